"""What a run's sources answered, attempt by attempt, kept so the run can be replayed.

A run's decisions follow from what the code decides (the classification, the policy, the hooks,
the guard) and from what it is given: each attempt's answer or failure, when that came on the run's
clock, and the back-off jitter. ``RecordingTransport`` keeps the first two as each attempt ends; the
jitter is in the decisions themselves. ``subagents.sessions.replaying`` gives them back in the same order.

Kept here as it came, in this process's memory for the run's length; what is written
(``coordinator.recorded_run``) has no credential (an attempt's ``_meta`` is not even kept here) and no
personal data (``traces.stand_ins.pseudonymous``) unless full payloads are switched on. An exception is kept
as its type's name and arguments and rebuilt only from a fixed list of types (``_REBUILT``): a
recording is data, and reading one never imports or runs what it names.
"""

from __future__ import annotations

import builtins
import contextlib
import json
from typing import Any, Literal

import anyio
import httpx2
import pydantic
from mcp.shared.exceptions import MCPError
from mcp.types import CallToolResult
from pydantic import BaseModel, ConfigDict, Field

from subagents.classify import SourceUnavailable
from subagents.hooks import ToolCall
from subagents.transport import SourceLink, Transport

__all__ = ["Attempt", "Raised", "RecordingTransport", "Tape", "rebuilt"]


class _Recorded(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)


class Raised(_Recorded):
    """What a transport raised, as data: enough to raise the same thing again."""

    type: str  # the exception type's name (one of _REBUILT's, else only named)
    args: list[Any] = Field(default_factory=list)
    status: int | None = None  # an HTTP status error's status
    source: str | None = None  # SourceUnavailable: the source that could not be reached
    cause: Raised | None = None  # SourceUnavailable: why
    exceptions: list[Raised] = Field(default_factory=list)  # a group's members


class Attempt(_Recorded):
    """One attempt of one task, as it ended: answered, raised, or cut off mid-call (neither)."""

    task: str
    attempt: int = Field(ge=1)
    source: str
    tool: str
    arguments: dict[str, Any]
    stage: Literal["session", "call"]  # where it ended: opening the session, or the call itself
    ended_s: float  # on the run's clock, counted from the run's start
    # Where its start (its session asked for, just after the breaker let it go) and its end fall among
    # every attempt's starts and ends: the order the run's shared state (breakers, budgets) saw them in.
    began: int = Field(ge=0)
    ended: int = Field(ge=0)
    answer: dict[str, Any] | None = None  # the CallToolResult, as on the wire
    raised: Raised | None = None


class Tape:
    """The attempts of one run, in the order they ended, on the clock the run's subagents use."""

    def __init__(self, now: Any) -> None:
        self._now = now  # the run's clock (``Clock.now``)
        self.started = now()
        self.deadline_s = 0.0
        self.attempts: list[Attempt] = []
        self._events = 0
        self._began: dict[tuple[str, int], int] = {}

    def start(self, deadline_s: float) -> None:
        """The run starts now, with ``deadline_s`` to go: every attempt's time counts from here."""
        self.started = self._now()
        self.deadline_s = deadline_s

    def _event(self) -> int:
        self._events += 1
        return self._events - 1

    def began(self, call: ToolCall) -> None:
        self._began[call.task, call.attempt] = self._event()

    def add(self, call: ToolCall, stage: Literal["session", "call"], **ended: Any) -> None:
        began = self._began.pop((call.task, call.attempt), None)
        self.attempts.append(
            Attempt(
                task=call.task,
                attempt=call.attempt,
                source=call.source,
                tool=call.tool,
                arguments=dict(call.arguments),
                stage=stage,
                ended_s=self._now() - self.started,
                began=self._event() if began is None else began,
                ended=self._event(),
                **ended,
            )
        )


class RecordingTransport:
    """A transport that keeps every attempt's outcome on a ``Tape`` as it passes through to ``inner``."""

    def __init__(self, inner: Transport, tape: Tape) -> None:
        self._inner = inner
        self._tape = tape

    def __getitem__(self, source: str) -> SourceLink:
        return _RecordingLink(self._inner[source], self._tape)


class _RecordingLink:
    def __init__(self, inner: SourceLink, tape: Tape) -> None:
        self._inner = inner
        self._tape = tape

    @property
    def opened(self) -> int:
        return self._inner.opened

    def open_soon(self) -> None:
        self._inner.open_soon()

    async def session(self, *, timeout_s: float = 20.0, for_call: ToolCall | None = None) -> tuple[Any, int]:
        if for_call is not None:
            self._tape.began(for_call)
        try:
            return await self._inner.session(timeout_s=timeout_s, for_call=for_call)
        except Exception as exc:
            if for_call is not None:
                self._tape.add(for_call, "session", raised=raised(exc))
            raise

    async def send(
        self, session: Any, call: ToolCall, *, timeout_s: float, meta: dict[str, Any] | None
    ) -> CallToolResult:
        try:
            result = await self._inner.send(session, call, timeout_s=timeout_s, meta=meta)
        except Exception as exc:
            self._tape.add(call, "call", raised=raised(exc))
            raise
        except BaseException:  # cancelled mid-call: no answer came
            self._tape.add(call, "call")
            raise
        answer = result.model_dump(mode="json", by_alias=True, exclude_none=True)
        self._tape.add(call, "call", answer=answer)
        return result

    async def reopen(self, generation: int) -> None:
        await self._inner.reopen(generation)


def _plain(value: Any) -> Any:
    """``value`` if it is JSON as it is, else its text (an exception's arguments may be anything)."""
    try:
        json.dumps(value)
    except (TypeError, ValueError):
        return str(value)
    return value


def raised(exc: BaseException) -> Raised:
    """``exc`` as data."""
    if isinstance(exc, BaseExceptionGroup):
        return Raised(
            type="ExceptionGroup", args=[exc.message], exceptions=[raised(e) for e in exc.exceptions]
        )
    if isinstance(exc, SourceUnavailable):
        return Raised(type="SourceUnavailable", source=exc.source, cause=raised(exc.cause))
    if isinstance(exc, MCPError):
        return Raised(type="MCPError", args=[exc.error.code, exc.error.message, _plain(exc.error.data)])
    if isinstance(exc, httpx2.HTTPStatusError):
        return Raised(type="HTTPStatusError", args=[str(exc)], status=exc.response.status_code)
    if isinstance(exc, json.JSONDecodeError):
        return Raised(type="JSONDecodeError", args=[exc.msg, exc.doc[:200], min(exc.pos, 200)])
    if isinstance(exc, pydantic.ValidationError):
        return Raised(type="ValidationError", args=[exc.title])
    return Raised(type=type(exc).__name__, args=[_plain(arg) for arg in exc.args])


def _types() -> dict[str, type[Exception]]:
    """The exception types a recording may raise again: those a transport raises and
    ``subagents.classify`` tells apart (and any of Python's own)."""
    own = {
        name: kind
        for name, kind in vars(builtins).items()
        if isinstance(kind, type) and issubclass(kind, Exception) and not issubclass(kind, BaseExceptionGroup)
    }
    transport = (
        anyio.ClosedResourceError, anyio.BrokenResourceError, anyio.EndOfStream, anyio.IncompleteRead,
        anyio.WouldBlock,
    )  # fmt: skip
    http = {
        name: kind
        for name, kind in vars(httpx2).items()
        if isinstance(kind, type) and issubclass(kind, Exception)
    }
    return {**own, **http, **{kind.__name__: kind for kind in transport}}


_REBUILT = _types()


class NotRebuilt(Exception):
    """A failure a recording names but cannot raise again (its type is not one ``_REBUILT`` knows)."""


def rebuilt(record: Raised) -> Exception:
    """The exception ``record`` describes, raised as the transport raised it."""
    match record.type:
        case "ExceptionGroup":
            return ExceptionGroup(
                str(record.args[0]) if record.args else "", [rebuilt(e) for e in record.exceptions]
            )
        case "SourceUnavailable" if record.cause is not None:
            return SourceUnavailable(record.source or "", rebuilt(record.cause))
        case "MCPError":
            code, message, data = (*record.args, None, None, None)[:3]
            return MCPError(int(code or 0), str(message or ""), data)
        case "HTTPStatusError":
            request = httpx2.Request("POST", "http://recorded.invalid/mcp")
            response = httpx2.Response(record.status or 500, request=request)
            return httpx2.HTTPStatusError(
                str(record.args[0]) if record.args else "", request=request, response=response
            )
        case "JSONDecodeError":
            msg, doc, pos = (*record.args, "", "", 0)[:3]
            return json.JSONDecodeError(str(msg), str(doc), int(pos or 0))
        case "ValidationError":
            return pydantic.ValidationError.from_exception_data(
                str(record.args[0]) if record.args else "", []
            )
    kind = _REBUILT.get(record.type)
    if kind is not None:
        with contextlib.suppress(Exception):  # a type whose constructor wants more than its args: named
            return kind(*record.args)
    return NotRebuilt(f"{record.type}: {' '.join(str(arg) for arg in record.args)}")
