"""A circuit breaker per source: fail fast while a source is down, probe it after a cool-down.

    closed --(a failure rate over a window)--> open --(cool-down)--> half_open
    half_open --(probe succeeds)--> closed          half_open --(probe fails)--> open

It opens when the calls of the last ``window_s`` seconds hold at least ``failure_threshold`` transient
failures and those are at least ``failure_rate`` of them (resilience4j's and Polly's rule: a rate over
a window with a minimum, not a consecutive count), so a flaky source that mostly answers stays
closed while one that keeps failing opens after the same five failures as a consecutive count would.

Only transient failures count: a validation, business or permission error means the source is up
and answering. While open, no call reaches the source. In half-open exactly one probe is let through;
a probe that never ends (cancelled by a deadline, or a model's loop stopped) is ``abandon``ed, which
lets the next caller probe instead, so a cancelled call can never shut a source out for good.
The breaker keeps no clock: each step is told the time (``now``, the subagents' injected clock), so
it decides the same way in tests as in production.
Written here rather than taken from a library: the breaker must run on the subagents' injected
clock, count contract categories rather than exceptions, and be shared by the subagents of one
process, which the general-purpose breaker packages do not offer together.
"""

from __future__ import annotations

from collections import deque
from dataclasses import dataclass, field
from enum import StrEnum

__all__ = ["Breaker", "BreakerState", "Breakers"]


class BreakerState(StrEnum):
    CLOSED = "closed"
    OPEN = "open"
    HALF_OPEN = "half_open"


@dataclass
class Breaker:
    failure_threshold: int = 5  # the fewest failures in the window that open it
    cooldown_s: float = 30.0
    failure_rate: float = 0.5  # the share of the window's calls those failures must be
    window_s: float = 10.0
    state: BreakerState = BreakerState.CLOSED
    calls: deque[tuple[float, bool]] = field(default_factory=deque)  # (when, failed), the window's
    opened_at: float = 0.0
    probing: bool = False
    transitions: list[tuple[BreakerState, BreakerState]] = field(default_factory=list)

    def _move(self, to: BreakerState) -> None:
        if to is not self.state:
            self.transitions.append((self.state, to))
            self.state = to

    def allow(self, now: float) -> bool:
        """May a call go out now? In half-open, only the one probe may."""
        if self.state is BreakerState.OPEN and now - self.opened_at >= self.cooldown_s:
            self._move(BreakerState.HALF_OPEN)
            self.probing = False
        if self.state is BreakerState.CLOSED:
            return True
        if self.state is BreakerState.HALF_OPEN and not self.probing:
            self.probing = True
            return True
        return False

    def retry_in_s(self, now: float) -> float:
        return max(0.0, self.cooldown_s - (now - self.opened_at))

    def abandon(self) -> None:
        """A call let through never ended (it was cancelled): it proves nothing; the next may probe."""
        self.probing = False

    def record(self, source_failed: bool, now: float) -> None:
        self.calls.append((now, source_failed))
        while self.calls[0][0] <= now - self.window_s:
            self.calls.popleft()
        if not source_failed:
            self.probing = False
            self._move(BreakerState.CLOSED)
            return
        failures = sum(failed for _, failed in self.calls)
        opens = failures >= self.failure_threshold and failures >= self.failure_rate * len(self.calls)
        if self.state is BreakerState.HALF_OPEN or opens:
            self.opened_at = now
            self.probing = False
            self.calls.clear()
            self._move(BreakerState.OPEN)


@dataclass
class Breakers:
    """One breaker per source, shared by every subagent of a coordinator process."""

    failure_threshold: int = 5
    cooldown_s: float = 30.0
    failure_rate: float = 0.5
    window_s: float = 10.0
    by_source: dict[str, Breaker] = field(default_factory=dict)

    def __getitem__(self, source: str) -> Breaker:
        if source not in self.by_source:
            self.by_source[source] = Breaker(
                self.failure_threshold, self.cooldown_s, self.failure_rate, self.window_s
            )
        return self.by_source[source]
