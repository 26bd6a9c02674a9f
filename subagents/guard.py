"""What every call passes on its way to a source, beyond its own subagent: the fleet's view of the source.

Three rules, each about a source rather than one task, so they hold across everything that calls it:

- the **breaker** (``subagents.breaker``): while a source keeps failing, nobody calls it;
- the **retry budget**: transient retries stay within a share (10 % by default) of first attempts, per
  source, so a degraded source sheds load instead of being hammered by every caller's retries (the
  retry budget of Finagle and of Google's SRE book, without their time window: a budget lives as long
  as the batch or process that holds it, which is the window);
- the **bulkhead**: a cap on concurrent calls per source, so one slow source cannot take every worker.

Written here, not taken from a library: the resilience libraries keep such rules inside one process
and count exceptions, while these count the contract's categories on the subagents' injected clock
and must be answerable from another process.

``SourceState`` holds the first two as plain synchronous state: one object per fleet, whoever hosts it
(this process, or one Ray actor that every worker asks; see ``coordinator.batch``). ``Guard`` is what a
subagent sees: the same questions, awaited, because the answer may come from another process. The
bulkhead stays in each process (``Bulkheads``): a slot taken must be given back even when the call is
cancelled, which a remote counter cannot promise; a fleet-wide cap is divided among the processes.
"""

from __future__ import annotations

from collections.abc import AsyncIterator, Mapping
from contextlib import AbstractAsyncContextManager, asynccontextmanager
from dataclasses import dataclass, field
from typing import Protocol

import anyio

from subagents.breaker import Breakers, BreakerState

__all__ = [
    "DEFAULT_RETRY_SHARE",
    "Bulkheads",
    "Guard",
    "LocalGuard",
    "RetryBudget",
    "SourceState",
    "Verdict",
]

DEFAULT_RETRY_SHARE = 0.1  # retries at most 10 % of first attempts: the usual production rule


@dataclass(frozen=True)
class Verdict:
    """Whether a call may go out now; if not, how long until the source's circuit is probed again."""

    allowed: bool
    retry_in_s: float = 0.0


@dataclass
class RetryBudget:
    """Retries per source within ``share`` of its first attempts, counted as they are spent.

    A retry is allowed while ``retries + 1 <= share * first_attempts``: the ratio never passes the
    share, at any moment, whatever the order of callers. ``share`` None: no budget (one query alone).
    """

    share: float | None = DEFAULT_RETRY_SHARE
    first_attempts: dict[str, int] = field(default_factory=dict)
    retries: dict[str, int] = field(default_factory=dict)
    refused: dict[str, int] = field(default_factory=dict)

    def first_attempt(self, source: str) -> None:
        self.first_attempts[source] = self.first_attempts.get(source, 0) + 1

    def spend(self, source: str) -> bool:
        """Take one retry for ``source`` if the budget has it; False (and counted) if not."""
        spent = self.retries.get(source, 0)
        if self.share is not None and spent + 1 > self.share * self.first_attempts.get(source, 0):
            self.refused[source] = self.refused.get(source, 0) + 1
            return False
        self.retries[source] = spent + 1
        return True


@dataclass
class SourceState:
    """The breakers and the retry budget of a fleet, in one place. Synchronous: whoever hosts it
    (a process, a Ray actor) serialises the calls. ``now`` is the host's clock unless a caller's
    injected clock is passed (one process: its subagents' clock)."""

    breakers: Breakers = field(default_factory=Breakers)
    budget: RetryBudget = field(default_factory=lambda: RetryBudget(share=None))

    @classmethod
    def shared(cls, retry_share: float, bulkhead: int | None) -> SourceState:
        """The state many concurrent callers share (a batch). A breaker opens on consecutive failures,
        and one lost session fails every call in flight on it at once: as many as the bulkhead lets
        through. So the threshold counts those on top of the usual five, and one lost session never
        reads as a source that keeps failing."""
        threshold = Breakers().failure_threshold + (bulkhead or 0)
        return cls(Breakers(failure_threshold=threshold), RetryBudget(retry_share))

    def allow(self, source: str, now: float, *, first: bool) -> Verdict:
        breaker = self.breakers[source]
        if not breaker.allow(now):
            return Verdict(False, breaker.retry_in_s(now))
        if first:
            self.budget.first_attempt(source)
        return Verdict(True)

    def record(self, source: str, failed: bool, now: float) -> Verdict:
        """The outcome of a call that was let through; the verdict for the next (closed unless it opened)."""
        breaker = self.breakers[source]
        breaker.record(source_failed=failed, now=now)
        if breaker.state is BreakerState.OPEN:
            return Verdict(False, breaker.retry_in_s(now))
        return Verdict(True)

    def abandon(self, source: str) -> None:
        self.breakers[source].abandon()

    def spend_retry(self, source: str) -> bool:
        return self.budget.spend(source)

    def counts(self) -> dict[str, dict[str, int]]:
        """First attempts, retries and refused retries per source (for progress and summaries)."""
        budget = self.budget
        return {
            "first_attempts": dict(budget.first_attempts),
            "retries": dict(budget.retries),
            "retries_refused": dict(budget.refused),
        }


class Guard(Protocol):
    """The fleet's rules as a subagent asks them. ``now`` is the subagent's clock; a guard whose state
    is in another process may keep its own time instead. ``abandon`` is not awaited: it is called
    while a cancelled call unwinds, where nothing more can be awaited."""

    async def allow(self, source: str, now: float, *, first: bool) -> Verdict: ...

    async def record(self, source: str, failed: bool, now: float) -> Verdict: ...

    def abandon(self, source: str) -> None: ...

    async def spend_retry(self, source: str) -> bool: ...

    def slot(self, source: str) -> AbstractAsyncContextManager[None]:
        """Held for the duration of one call: the source's bulkhead."""
        ...


@dataclass
class Bulkheads:
    """At most ``limit`` concurrent calls per source from this process (``limits`` per source)."""

    limit: int | None = None  # None: no cap
    limits: Mapping[str, int] = field(default_factory=dict)
    _limiters: dict[str, anyio.CapacityLimiter] = field(default_factory=dict)

    def cap(self, source: str) -> int | None:
        return self.limits.get(source, self.limit)

    @asynccontextmanager
    async def slot(self, source: str) -> AsyncIterator[None]:
        cap = self.cap(source)
        if cap is None:
            yield
            return
        if source not in self._limiters:
            self._limiters[source] = anyio.CapacityLimiter(cap)
        async with self._limiters[source]:
            yield


@dataclass
class LocalGuard:
    """A guard whose state is in this process: one query's, or every question's of a local batch."""

    state: SourceState = field(default_factory=SourceState)
    bulkheads: Bulkheads = field(default_factory=Bulkheads)

    @classmethod
    def of(cls, breakers: Breakers | None = None) -> LocalGuard:
        return cls(SourceState(breakers if breakers is not None else Breakers()))

    @property
    def breakers(self) -> Breakers:
        return self.state.breakers

    async def allow(self, source: str, now: float, *, first: bool) -> Verdict:
        return self.state.allow(source, now, first=first)

    async def record(self, source: str, failed: bool, now: float) -> Verdict:
        return self.state.record(source, failed, now)

    def abandon(self, source: str) -> None:
        self.state.abandon(source)

    async def spend_retry(self, source: str) -> bool:
        return self.state.spend_retry(source)

    def slot(self, source: str) -> AbstractAsyncContextManager[None]:
        return self.bulkheads.slot(source)
