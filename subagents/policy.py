"""The recovery policy: what a subagent does with each category, within which bounds.

| category    | action                                                                 | default bound |
|-------------|------------------------------------------------------------------------|---------------|
| transient   | retry the identical call, exponential back-off with full jitter,       | 3 retries     |
|             | honouring retryAfterMs, never sleeping past the deadline; reconnect    |               |
|             | or respawn a dead source first                                         |               |
| validation  | repair the arguments from the error and make a fresh call              | 2 repairs     |
| business    | escalate with partial results; never retried                           | 0             |
| permission  | ask the credential broker for elevation; re-call once if granted       | 1 elevation   |
| valid empty | accept; never retried; not a gap                                       | -             |

The table is data (``RecoveryPolicy.actions``), so a deployment can change it; the bounds, delays,
per-call timeout and deadline are configuration, never literals in the loop. One testing switch, as
stamina's: ``set_testing(True)``, or ``RESEARCH_TESTING=1`` for a process and those it starts, makes
every back-off 0 s, with the same decisions and counts (the jitter is still drawn).
"""

from __future__ import annotations

import os
import random
from collections.abc import Iterator, Mapping
from contextlib import AbstractContextManager, contextmanager
from dataclasses import dataclass, field
from enum import StrEnum

from sources.contract import ErrorCategory

__all__ = ["TESTING_ENV", "Recovery", "RecoveryPolicy", "set_testing"]

TESTING_ENV = "RESEARCH_TESTING"
_testing = os.environ.get(TESTING_ENV, "") not in ("", "0")


def set_testing(on: bool) -> AbstractContextManager[None]:
    """Every back-off 0 s while ``on``; as a context manager, the setting before comes back at its end."""
    global _testing
    before, _testing = _testing, on
    return _restored(before)


@contextmanager
def _restored(before: bool) -> Iterator[None]:
    global _testing
    try:
        yield
    finally:
        _testing = before


class Recovery(StrEnum):
    """What the policy can do about a failed call."""

    RETRY = "retry"
    REPAIR = "repair"
    ELEVATE = "elevate"
    ESCALATE = "escalate"


_DEFAULT_ACTIONS = {
    ErrorCategory.TRANSIENT: Recovery.RETRY,
    ErrorCategory.VALIDATION: Recovery.REPAIR,
    ErrorCategory.BUSINESS: Recovery.ESCALATE,
    ErrorCategory.PERMISSION: Recovery.ELEVATE,
}


@dataclass(frozen=True)
class RecoveryPolicy:
    actions: dict[ErrorCategory, Recovery] = field(default_factory=_DEFAULT_ACTIONS.copy)  # each its own
    max_retries: int = 3
    max_repairs: int = 2
    max_elevations: int = 1
    base_delay_s: float = 1.0  # the first back-off ceiling; then 2 s, 4 s...
    max_delay_s: float = 8.0
    call_timeout_s: float = 5.0
    # A source's own per-call timeout, where its registry entry sets one (a server known to be slow).
    source_timeouts: Mapping[str, float] = field(default_factory=dict)

    def call_timeout_for(self, source: str) -> float:
        """The seconds one call to ``source`` may take."""
        return self.source_timeouts.get(source, self.call_timeout_s)

    @property
    def max_attempts(self) -> int:
        """The most calls one subagent makes: the first, and every retry, repair and elevation."""
        return 1 + self.max_retries + self.max_repairs + self.max_elevations

    def action_for(self, category: ErrorCategory) -> Recovery:
        return self.actions.get(category, Recovery.ESCALATE)

    def backoff_s(self, retry: int, rng: random.Random, retry_after_ms: int | None = None) -> float:
        """Full jitter: uniform in [0, min(max, base * 2^(retry-1))], but never less than the server asked;
        0 when testing (``set_testing``)."""
        ceiling = min(self.max_delay_s, self.base_delay_s * 2 ** (retry - 1))
        delay = rng.uniform(0, ceiling)
        if retry_after_ms is not None:
            delay = max(delay, retry_after_ms / 1000)
        return 0.0 if _testing else delay
