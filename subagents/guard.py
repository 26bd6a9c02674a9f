"""What every call passes on its way to a source, beyond its own subagent: the fleet's view of the source.

Three rules, each about a source rather than one task, so they hold across everything that calls it:

- the **breaker** (``subagents.breaker``): while a source keeps failing, nobody calls it;
- the **retry budget**: transient retries stay within a share (10 % by default) of the first attempts
  of the last window (10 s), per source, plus a small reserve (1 retry a second, 10 at the start), so
  a degraded source sheds load instead of being hammered by every caller's retries, while a cold
  fleet (a source warming up) or a quiet one still gets the few retries it needs (the retry budget of
  Finagle, a share over a TTL plus a minimum of retries a second; gRPC's throttle starts full too);
- the **bulkhead**: a cap on concurrent calls per source, so one slow source cannot take every worker;
- the **concurrency limit**: a source's pushback (a transient answer saying when to call again) is flow
  control, not failure: it spends no retry budget, opens no breaker, and lowers the source's limit of
  calls at once (multiplicatively, × 0.9, at most once a second), which each answer raises again
  (additively, one call per limit's worth of answers), so a fleet settles at the rate the source
  allows (AIMD, as Netflix's concurrency limits and TCP do).

A lost connection is one failure, however many calls were in flight on it: the calls it fails at once
are told with the same connection, and only the first of them counts against the breaker and spends
a retry from the budget.

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

import math
from collections import deque
from collections.abc import AsyncIterator, Mapping
from contextlib import AbstractAsyncContextManager, asynccontextmanager
from dataclasses import dataclass, field
from enum import StrEnum
from fractions import Fraction
from typing import Protocol

import anyio

from subagents.breaker import Breakers, BreakerState

__all__ = [
    "DEFAULT_RETRY_RESERVE_PER_S",
    "DEFAULT_RETRY_SHARE",
    "DEFAULT_RETRY_WINDOW_S",
    "LIMIT_CEILING",
    "Bulkheads",
    "CallEnd",
    "Guard",
    "LocalGuard",
    "RetryBudget",
    "SourceState",
    "Verdict",
]

DEFAULT_RETRY_SHARE = 0.1  # retries at most 10 % of recent first attempts: the usual production rule
DEFAULT_RETRY_WINDOW_S = 10.0  # how long a first attempt's share stays spendable (Finagle's TTL)
DEFAULT_RETRY_RESERVE_PER_S = 1.0  # retries a second beyond the share, per source; a window's worth at start

# The credit of first attempts made within a tenth of the window of one another is kept as one deposit,
# dated by the oldest of them (so it expires a little early, never late): the budget's memory is
# bounded by the window, whatever the traffic.
_SLICES = 10
# The reserve is a rate times time, a float: one a hair under a whole retry is a whole retry.
_EPSILON = 1e-9


# A source's concurrency limit: where it starts, its bounds, and its steps (AIMD).
LIMIT_CEILING = 64
LIMIT_DECREASE = 0.9  # a pushback's, at most once a second: a burst of them is one signal, not many
LIMIT_DECREASE_EVERY_S = 1.0
_LOST_KEPT = 64  # the lost connections remembered per source (one is told by each of its calls)


class CallEnd(StrEnum):
    """How a call that was let through ended, as the fleet counts it."""

    ANSWERED = "answered"  # a result or a non-transient error: the source is up
    FAILED = "failed"  # a transient failure: it counts against the breaker
    PUSHED_BACK = "pushed_back"  # the source said when to call again: flow control, not failure
    CUT = "cut"  # the deadline cut it: it says nothing of the source


@dataclass(frozen=True)
class Verdict:
    """Whether a call may go out now; if not, how long until the source's circuit is probed again;
    and the source's concurrency limit for the fleet (calls at once)."""

    allowed: bool
    retry_in_s: float = 0.0
    limit: int = LIMIT_CEILING
    # The call failed with a session whose loss is counted already: one loss, one failure, one retry
    # from the budget; the other calls it failed are resent without spending it.
    loss_counted: bool = False


@dataclass
class _Deposit:
    at: float
    retries: Fraction  # what is left of the share of the first attempts made at ``at``


@dataclass
class _Account:
    """One source's budget as of ``latest``: the credit of its recent first attempts, and its reserve."""

    latest: float
    reserve: float
    credit: deque[_Deposit] = field(default_factory=deque)  # oldest first


@dataclass
class RetryBudget:
    """Retries per source: ``share`` of its first attempts of the last ``window_s``, plus a reserve.

    - **Credit**: each first attempt deposits ``share`` of a retry, spendable for ``window_s``
      (Finagle's ``RetryBudget`` TTL): a retry is paid by first attempts of the window before it,
      and a first attempt pays for at most ``share`` of a retry, ever.
    - **Reserve**: ``reserve_per_s`` retries a second accrue, up to a window's worth
      (``reserve_per_s * window_s``), and it starts full, as gRPC's retry throttle starts with a full
      bucket: a cold fleet rides out a source warming up, a quiet one still has a retry to make.

    A retry takes a whole retry of credit (the oldest first: it expires first), else one of the
    reserve, else it is refused and counted. A server's ``retryAfterMs`` sets when the retry goes out
    (``RecoveryPolicy.backoff_s``); it is spent here all the same, when it is decided. So at every
    moment, whatever the order of the callers, for each source:

        retries <= share * first_attempts + reserve_per_s * (window_s + seconds since first seen)

    the long-run ratio at most ``share + reserve_per_s / (first attempts a second)``; and a source
    whose first attempts stop (its breaker open, nobody asking) retries at the reserve's rate at most.
    ``share`` None: no budget (one query alone). ``now`` is the callers' clock; the budget never lets
    its own time run backwards (a caller a little behind another is taken as at the latest time).
    """

    share: float | None = DEFAULT_RETRY_SHARE
    reserve_per_s: float = DEFAULT_RETRY_RESERVE_PER_S
    window_s: float = DEFAULT_RETRY_WINDOW_S
    first_attempts: dict[str, int] = field(default_factory=dict)
    retries: dict[str, int] = field(default_factory=dict)
    refused: dict[str, int] = field(default_factory=dict)
    _accounts: dict[str, _Account] = field(default_factory=dict, repr=False)
    _deposit: Fraction = field(init=False, repr=False)

    def __post_init__(self) -> None:
        if self.share is not None and not self.share >= 0:
            raise ValueError(
                f"a retry budget's share is a fraction of first attempts, 0 or more; got {self.share}"
            )
        if not self.reserve_per_s >= 0:
            raise ValueError(
                f"a retry budget's reserve is retries a second, 0 or more; got {self.reserve_per_s}"
            )
        if not self.window_s > 0:
            raise ValueError(f"a retry budget's window is seconds, more than 0; got {self.window_s}")
        # Exact: ten first attempts at 10 % are one whole retry, not 0.9999999999999999 of one.
        self._deposit = Fraction(self.share or 0).limit_denominator(1_000_000)

    @property
    def reserve_cap(self) -> float:
        """The most the reserve holds (and what it holds at the start): a window's worth."""
        return self.reserve_per_s * self.window_s

    def _account(self, source: str, now: float) -> _Account:
        """``source``'s account brought to ``now``: its reserve topped up, its expired credit dropped."""
        account = self._accounts.get(source)
        if account is None:
            account = self._accounts[source] = _Account(latest=now, reserve=self.reserve_cap)
        if now > account.latest:
            topped_up = account.reserve + self.reserve_per_s * (now - account.latest)
            account.reserve = min(self.reserve_cap, topped_up)
            account.latest = now
        while account.credit and account.credit[0].at <= account.latest - self.window_s:
            account.credit.popleft()
        return account

    def first_attempt(self, source: str, now: float) -> None:
        self.first_attempts[source] = self.first_attempts.get(source, 0) + 1
        if self.share is None:
            return
        account = self._account(source, now)
        if self._deposit == 0:
            return
        credit = account.credit
        if credit and account.latest - credit[-1].at < self.window_s / _SLICES:
            credit[-1].retries += self._deposit
        else:
            credit.append(_Deposit(account.latest, self._deposit))

    def spend(self, source: str, now: float) -> bool:
        """Take one retry for ``source`` if the budget has it; False (and counted) if not."""
        if self.share is not None and not self._take(self._account(source, now)):
            self.refused[source] = self.refused.get(source, 0) + 1
            return False
        self.retries[source] = self.retries.get(source, 0) + 1
        return True

    def _take(self, account: _Account) -> bool:
        credit = account.credit
        if sum((deposit.retries for deposit in credit), Fraction(0)) >= 1:
            owed = Fraction(1)
            while owed:
                taken = min(owed, credit[0].retries)
                credit[0].retries -= taken
                owed -= taken
                if credit[0].retries == 0:
                    credit.popleft()
            return True
        if account.reserve >= 1 - _EPSILON:
            account.reserve -= 1
            return True
        return False


@dataclass
class SourceState:
    """The breakers and the retry budget of a fleet, in one place. Synchronous: whoever hosts it
    (a process, a Ray actor) serialises the calls. ``now`` is the host's clock unless a caller's
    injected clock is passed (one process: its subagents' clock)."""

    breakers: Breakers = field(default_factory=Breakers)
    budget: RetryBudget = field(default_factory=lambda: RetryBudget(share=None))
    limits: dict[str, float] = field(default_factory=dict)  # each source's concurrency limit
    pushbacks: dict[str, int] = field(default_factory=dict)
    lost: dict[str, deque[str]] = field(default_factory=dict)  # the connections counted as lost
    decreased_at: dict[str, float] = field(default_factory=dict)  # each source's limit's last decrease

    @classmethod
    def shared(cls, retry_share: float) -> SourceState:
        """The state many concurrent callers share (a batch), with the fleet's retry budget. Its breakers
        judge a larger sample: 10 failures, 90 % of the window's calls. A source failing often but
        answering (a degraded one) is the budget's to slow down; the breaker is for one that is down."""
        return cls(Breakers(failure_threshold=10, failure_rate=0.9), RetryBudget(retry_share))

    def limit(self, source: str) -> int:
        return max(1, int(self.limits.get(source, LIMIT_CEILING)))

    def allow(self, source: str, now: float, *, first: bool) -> Verdict:
        breaker = self.breakers[source]
        if not breaker.allow(now):
            return Verdict(False, breaker.retry_in_s(now), self.limit(source))
        if first:
            self.budget.first_attempt(source, now)
        return Verdict(True, limit=self.limit(source))

    def record(self, source: str, end: CallEnd, now: float, connection: str | None = None) -> Verdict:
        """How a call that was let through ended (``connection``: the one it lost, if it lost it); the
        verdict for the next (closed unless it opened) with the source's concurrency limit."""
        breaker, limit = self.breakers[source], self.limits.get(source, float(LIMIT_CEILING))
        lost = self.lost.setdefault(source, deque(maxlen=_LOST_KEPT))
        counted = end is CallEnd.FAILED and connection is not None and connection in lost
        if counted or end is CallEnd.CUT:
            breaker.abandon()  # a loss counted already, or a call the deadline cut: no news of the source
        else:
            breaker.record(source_failed=end is CallEnd.FAILED, now=now)
        if end is CallEnd.FAILED and connection is not None and not counted:
            lost.append(connection)
        if end is CallEnd.PUSHED_BACK:
            self.pushbacks[source] = self.pushbacks.get(source, 0) + 1
            if now - self.decreased_at.get(source, -math.inf) >= LIMIT_DECREASE_EVERY_S:
                self.limits[source] = max(1.0, limit * LIMIT_DECREASE)
                self.decreased_at[source] = now
        elif end is CallEnd.ANSWERED:
            self.limits[source] = min(float(LIMIT_CEILING), limit + 1 / limit)
        if breaker.state is BreakerState.OPEN:
            return Verdict(False, breaker.retry_in_s(now), self.limit(source), counted)
        return Verdict(True, limit=self.limit(source), loss_counted=counted)

    def abandon(self, source: str) -> None:
        self.breakers[source].abandon()

    def spend_retry(self, source: str, now: float) -> bool:
        return self.budget.spend(source, now)

    def counts(self) -> dict[str, dict[str, int]]:
        """First attempts, retries and refused retries per source (for progress and summaries)."""
        budget = self.budget
        return {
            "first_attempts": dict(budget.first_attempts),
            "retries": dict(budget.retries),
            "retries_refused": dict(budget.refused),
            "pushbacks": dict(self.pushbacks),
            "limits": {
                source: self.limit(source) for source in self.limits if self.limit(source) < LIMIT_CEILING
            },
        }


class Guard(Protocol):
    """The fleet's rules as a subagent asks them. ``now`` is the subagent's clock; a guard whose state
    is in another process may keep its own time instead. ``abandon`` is not awaited: it is called
    while a cancelled call unwinds, where nothing more can be awaited."""

    async def allow(self, source: str, now: float, *, first: bool) -> Verdict: ...

    async def record(
        self, source: str, end: CallEnd, now: float, connection: str | None = None
    ) -> Verdict: ...

    def abandon(self, source: str) -> None: ...

    async def spend_retry(self, source: str, now: float) -> bool: ...

    def slot(self, source: str) -> AbstractAsyncContextManager[None]:
        """Held for the duration of one call: the source's bulkhead."""
        ...


@dataclass
class Bulkheads:
    """At most ``limit`` concurrent calls per source from this process (``limits`` per source), and
    at most its ``share`` of each source's concurrency limit for the fleet (``limit_to``)."""

    limit: int | None = None  # None: no cap
    limits: Mapping[str, int] = field(default_factory=dict)
    share: float = 1.0  # this process's part of the fleet (a batch of N workers: 1/N)
    _fleet: dict[str, int] = field(default_factory=dict)
    _limiters: dict[str, anyio.CapacityLimiter] = field(default_factory=dict)

    def limit_to(self, source: str, fleet_limit: int) -> None:
        """The source's limit for the fleet changed: this process's slots follow it."""
        self._fleet[source] = fleet_limit
        if source in self._limiters:
            self._limiters[source].total_tokens = self._cap(source) or math.inf

    def _cap(self, source: str) -> int | None:
        own = self.limits.get(source, self.limit)
        fleet = self._fleet.get(source, LIMIT_CEILING)
        if fleet >= LIMIT_CEILING:
            return own
        part = max(1, int(fleet * self.share))
        return part if own is None else min(own, part)

    @asynccontextmanager
    async def slot(self, source: str) -> AsyncIterator[None]:
        cap = self._cap(source)
        if cap is None and source not in self._limiters:
            yield
            return
        if source not in self._limiters:
            self._limiters[source] = anyio.CapacityLimiter(cap or math.inf)
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

    async def allow(self, source: str, now: float, *, first: bool) -> Verdict:
        verdict = self.state.allow(source, now, first=first)
        self.bulkheads.limit_to(source, verdict.limit)
        return verdict

    async def record(self, source: str, end: CallEnd, now: float, connection: str | None = None) -> Verdict:
        verdict = self.state.record(source, end, now, connection)
        self.bulkheads.limit_to(source, verdict.limit)
        return verdict

    def abandon(self, source: str) -> None:
        self.state.abandon(source)

    async def spend_retry(self, source: str, now: float) -> bool:
        return self.state.spend_retry(source, now)

    def slot(self, source: str) -> AbstractAsyncContextManager[None]:
        return self.bulkheads.slot(source)
