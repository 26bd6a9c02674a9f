"""A circuit breaker per source: fail fast while a source is down, probe it after a cool-down.

    closed --(N consecutive transient failures)--> open --(cool-down)--> half_open
    half_open --(probe succeeds)--> closed          half_open --(probe fails)--> open

Only transient failures count: a validation, business or permission error means the source is up
and answering. While open, no call reaches the source. In half-open exactly one probe is let through.
Written here rather than taken from a library: the breaker must run on the subagents' injected
clock, count contract categories rather than exceptions, and be shared by the subagents of one
process, which the general-purpose breaker packages do not offer together.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass, field
from enum import StrEnum

__all__ = ["Breaker", "BreakerState", "Breakers"]


class BreakerState(StrEnum):
    CLOSED = "closed"
    OPEN = "open"
    HALF_OPEN = "half_open"


@dataclass
class Breaker:
    failure_threshold: int = 5
    cooldown_s: float = 30.0
    clock: Callable[[], float] = time.monotonic
    state: BreakerState = BreakerState.CLOSED
    failures: int = 0
    opened_at: float = 0.0
    probing: bool = False
    transitions: list[tuple[BreakerState, BreakerState]] = field(default_factory=list)

    def _move(self, to: BreakerState) -> None:
        if to is not self.state:
            self.transitions.append((self.state, to))
            self.state = to

    def allow(self) -> bool:
        """May a call go out now? In half-open, only the one probe may."""
        if self.state is BreakerState.OPEN and self.clock() - self.opened_at >= self.cooldown_s:
            self._move(BreakerState.HALF_OPEN)
            self.probing = False
        if self.state is BreakerState.CLOSED:
            return True
        if self.state is BreakerState.HALF_OPEN and not self.probing:
            self.probing = True
            return True
        return False

    def retry_in_s(self) -> float:
        return max(0.0, self.cooldown_s - (self.clock() - self.opened_at))

    def record(self, source_failed: bool) -> None:
        if not source_failed:
            self.failures = 0
            self.probing = False
            self._move(BreakerState.CLOSED)
            return
        self.failures += 1
        if self.state is BreakerState.HALF_OPEN or self.failures >= self.failure_threshold:
            self.opened_at = self.clock()
            self.probing = False
            self._move(BreakerState.OPEN)


@dataclass
class Breakers:
    """One breaker per source, shared by every subagent of a coordinator process."""

    failure_threshold: int = 5
    cooldown_s: float = 30.0
    clock: Callable[[], float] = time.monotonic
    by_source: dict[str, Breaker] = field(default_factory=dict)

    def __getitem__(self, source: str) -> Breaker:
        if source not in self.by_source:
            self.by_source[source] = Breaker(self.failure_threshold, self.cooldown_s, self.clock)
        return self.by_source[source]
