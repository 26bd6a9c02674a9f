"""A recorded run given back: each attempt answered as it was, at the time it was, with its jitter.

``ReplayTransport`` answers each task's each attempt from the recording (``subagents.sessions.recording``),
whatever order the tasks now run in; an attempt the recording lacks (the replayed code called
something the recorded run did not) fails as nothing to connect to, which the decisions then show.
``ReplayClock`` is the run's time made of the recording: a task's clock stands where its last
attempt ended (each task keeps its own, in a context variable, as the tasks ran side by side) and
moves on by each back-off, without sleeping. ``RecordedJitter`` draws each task's recorded back-offs.
"""

from __future__ import annotations

import contextvars
import random
from collections.abc import Iterable
from typing import Any

import anyio
from mcp.types import CallToolResult

from subagents.classify import SourceUnavailable
from subagents.hooks import ToolCall
from subagents.sessions.recording import Attempt, rebuilt
from subagents.transport import SourceLink

__all__ = ["RecordedJitter", "ReplayClock", "ReplayTransport"]

_now: contextvars.ContextVar[float] = contextvars.ContextVar("replayed_now", default=0.0)


class ReplayClock:
    """The recorded run's clock: each task's time is where its last recorded attempt ended, plus back-offs."""

    def now(self) -> float:
        return _now.get()

    async def sleep(self, seconds: float) -> None:
        _now.set(_now.get() + max(seconds, 0.0))
        await anyio.lowlevel.checkpoint()

    @staticmethod
    def reached(instant: float) -> None:
        """The current task's time is at least ``instant`` (a recorded attempt ended then)."""
        _now.set(max(_now.get(), instant))


class RecordedJitter(random.Random):
    """One task's back-off jitter: the delays its recorded retries slept, in order, then seeded draws."""

    def __init__(self, delays_s: Iterable[float], seed: int = 0) -> None:
        super().__init__(seed)
        self._delays = list(delays_s)

    def uniform(self, a: float, b: float) -> float:
        if not self._delays:
            return super().uniform(a, b)
        # The recorded delay (rounded to the millisecond on its decision), within the bounds asked for.
        return min(max(self._delays.pop(0), a), b)


# How long a replay waits, with nothing happening, for the attempt whose turn it is before taking it
# as not coming (the replayed code decided otherwise): real time, as nothing else moves meanwhile.
_STALL_S = 0.2

_Event = tuple[str, str, int]  # ("began" | "ended", task, attempt)


class _InTurn:
    """The recorded order of every attempt's start and end, kept by the replay: the breakers, budgets
    and bulkheads the tasks share see the attempts in the order the recorded run's did."""

    def __init__(self, attempts: Iterable[Attempt]) -> None:
        events = [(a.began, ("began", a.task, a.attempt)) for a in attempts]
        events += [(a.ended, ("ended", a.task, a.attempt)) for a in attempts]
        self._order = [event for _, event in sorted(events)]
        self._known = set(self._order)
        self._done: set[_Event] = set()
        self._next = 0
        self._changed = anyio.Event()

    def _due(self) -> _Event | None:
        while self._next < len(self._order) and self._order[self._next] in self._done:
            self._next += 1
        return self._order[self._next] if self._next < len(self._order) else None

    async def turn(self, event: _Event) -> None:
        """Wait until every event recorded before ``event`` has happened, or is not coming; then it happens."""
        while event in self._known and event not in self._done and self._due() != event:
            changed = self._changed
            with anyio.move_on_after(_STALL_S):
                await changed.wait()
            due = self._due()
            if not changed.is_set() and due is not None:
                self._happened(due)  # nothing happened meanwhile: the event due is not coming
        self._happened(event)

    def _happened(self, event: _Event) -> None:
        self._done.add(event)
        self._changed.set()
        self._changed = anyio.Event()


class ReplayTransport:
    """Every source of a recorded run, answering from its recorded attempts, in their recorded order."""

    def __init__(self, attempts: Iterable[Attempt]) -> None:
        kept = list(attempts)
        self._attempts = {(a.task, a.attempt): a for a in kept}
        self.in_turn = _InTurn(kept)
        self.missing: list[ToolCall] = []  # attempts the replay made that the recording lacks
        self._links: dict[str, _ReplayLink] = {}

    def __getitem__(self, source: str) -> SourceLink:
        if source not in self._links:
            self._links[source] = _ReplayLink(source, self)
        return self._links[source]

    def recorded(self, call: ToolCall) -> Attempt | None:
        found = self._attempts.get((call.task, call.attempt))
        if found is None or (found.source, found.tool) != (call.source, call.tool):
            if call not in self.missing:
                self.missing.append(call)
            return None
        return found


def _not_recorded(call: ToolCall) -> ConnectionRefusedError:
    return ConnectionRefusedError(f"the recording has no attempt {call.attempt} of {call.task}")


class _ReplayLink:
    def __init__(self, source: str, transport: ReplayTransport) -> None:
        self._source = source
        self._transport = transport
        self._generation = 1

    @property
    def opened(self) -> int:
        return self._generation  # a session "opens" again after each drop, as a live one would

    def open_soon(self) -> None:
        pass

    async def session(self, *, timeout_s: float = 20.0, for_call: ToolCall | None = None) -> tuple[Any, int]:
        await anyio.lowlevel.checkpoint()
        if for_call is None:  # a session to list tools on (Claude mode): a recording lists none
            raise SourceUnavailable(self._source, ConnectionRefusedError("a recording lists no tools"))
        await self._transport.in_turn.turn(("began", for_call.task, for_call.attempt))
        recorded = self._transport.recorded(for_call)
        if recorded is None:
            raise SourceUnavailable(self._source, _not_recorded(for_call))
        if recorded.stage == "session":
            await self._transport.in_turn.turn(("ended", for_call.task, for_call.attempt))
            ReplayClock.reached(recorded.ended_s)
            assert recorded.raised is not None  # a session that opened is recorded at its call
            raise rebuilt(recorded.raised)
        return None, self._generation

    async def send(
        self, session: Any, call: ToolCall, *, timeout_s: float, meta: dict[str, Any] | None
    ) -> CallToolResult:
        recorded = self._transport.recorded(call)
        if recorded is None:
            raise _not_recorded(call)
        await self._transport.in_turn.turn(("ended", call.task, call.attempt))
        ReplayClock.reached(recorded.ended_s)
        if recorded.raised is not None:
            raise rebuilt(recorded.raised)
        if recorded.answer is None:  # cut off mid-call when recorded: it is cut off again, the same way
            await anyio.sleep_forever()
        return CallToolResult.model_validate(recorded.answer)

    async def reopen(self, generation: int) -> None:
        if generation == self._generation:
            self._generation += 1
