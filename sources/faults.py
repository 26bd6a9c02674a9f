"""The one fault layer every source runs behind: latency, transient faults, hangs, crashes, garbage.

Faults are set at start, by ``--faults`` or ``RESEARCH_FAULTS``, as ``name=value`` pairs:

    latency=200ms,jitter=50ms,transient=0.2,hang=0.05,crash=0.01,garbage=0.05,lose=0.05,seed=7

| name        | effect on each ``tools/call``                                              | default |
|-------------|----------------------------------------------------------------------------|---------|
| `latency`   | added delay before the call runs (`ms` or `s`)                            | 0       |
| `jitter`    | the delay varies uniformly by up to this much either way                   | 0       |
| `transient` | probability of a transient contract error instead of running the call     | 0       |
| `hang`      | probability that the call is accepted and never answered                   | 0       |
| `crash`     | probability that the process is killed (SIGKILL) mid-call                 | 0       |
| `garbage`   | probability that corrupt bytes go on the wire instead of the answer    | 0       |
| `lose`      | probability that the call runs but its answer is never sent             | 0       |
| `exit`      | probability that the process exits cleanly (status 0) mid-call         | 0       |
| `truncate`  | probability that a truncated JSON-RPC message goes on the wire instead (stdio) | 0 |
| `unknown_id`| probability that an answer with an unknown request id goes on the wire instead (stdio) | 0 |
| `oversize`  | probability that the answer carries an extra 2 MB text block            | 0       |
| `die_at`    | `handshake`: killed on the first handshake message; `start`: exits before serving | - |
| `seed`      | seed of the fault dice, so a run replays exactly                           | 0       |

Every die is rolled for every call, in a fixed order, whichever fault fires: the sequence of
outcomes depends on the seed and the call count alone, so a failing run replays. A source's own
code never special-cases chaos; it never sees a call the fault layer took.
"""

from __future__ import annotations

import os
import random
import re
import signal
from collections.abc import Awaitable, Callable, Iterator
from dataclasses import dataclass, fields
from typing import TYPE_CHECKING, Any, Literal

import anyio
from pydantic import BaseModel, ConfigDict, Field, ValidationError

from sources.deferred import deferred
from sources.wire import StdioWire, Wire

# The fleet's commands read fault settings without the contract's models; the mcp SDK is loaded
# already wherever a fault layer runs (inside a server).
if TYPE_CHECKING:
    import mcp.types
    from mcp.server.context import CallNext, HandlerResult, ServerRequestContext
    from mcp.types import CallToolResult

    from sources import contract, tool_failure
else:
    mcp = deferred("mcp")
    contract = deferred("sources.contract")
    tool_failure = deferred("sources.tool_failure")

_HANDSHAKE = frozenset({"initialize", "server/discover"})
OVERSIZE_BYTES = 2 * 1024 * 1024

__all__ = ["OVERSIZE_BYTES", "FaultLayer", "FaultSettings", "Roll", "rolls", "transient_result"]

_DURATION = re.compile(r"^\s*(?P<number>\d+(?:\.\d+)?)\s*(?P<unit>ms|s)?\s*$")


class FaultSettings(BaseModel):
    """What the fault layer injects. All probabilities are per ``tools/call``."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    latency_ms: float = Field(default=0, ge=0)
    jitter_ms: float = Field(default=0, ge=0)
    transient: float = Field(default=0, ge=0, le=1)
    hang: float = Field(default=0, ge=0, le=1)
    crash: float = Field(default=0, ge=0, le=1)
    garbage: float = Field(default=0, ge=0, le=1)
    lose: float = Field(default=0, ge=0, le=1)
    exit: float = Field(default=0, ge=0, le=1)
    truncate: float = Field(default=0, ge=0, le=1)
    unknown_id: float = Field(default=0, ge=0, le=1)
    oversize: float = Field(default=0, ge=0, le=1)
    die_at: Literal["", "handshake", "start"] = ""
    seed: int = 0

    @property
    def active(self) -> bool:
        """Whether any fault is set (the seed alone sets none)."""
        return any(value for name, value in self if name != "seed")

    @classmethod
    def parse(cls, spec: str) -> FaultSettings:
        """Read ``latency=200ms,transient=0.2,...``; a bad spec raises ``ValueError`` naming the pair."""
        values: dict[str, Any] = {}
        for pair in filter(None, (part.strip() for part in spec.split(","))):
            name, sep, value = pair.partition("=")
            name = name.strip()
            if not sep or name not in _SPEC_FIELDS:
                raise ValueError(
                    f"fault setting {pair!r} is not name=value with a name among {', '.join(_SPEC_FIELDS)}; "
                    "e.g. latency=200ms,transient=0.2,seed=7"
                )
            field = _SPEC_FIELDS[name]
            if field.endswith("_ms"):
                match = _DURATION.match(value)
                if match is None:
                    raise ValueError(f"fault setting {name}={value!r} needs a duration such as 200ms or 1.5s")
                factor = 1000 if match["unit"] == "s" else 1
                values[field] = float(match["number"]) * factor
            else:
                values[field] = value.strip()
        try:
            return cls.model_validate(values)
        except ValidationError as exc:
            problem = exc.errors()[0]
            raise ValueError(
                f"fault setting {problem['loc'][0]}: {problem['msg']}; e.g. transient=0.2 (a probability 0..1)"
            ) from None

    def spec(self, *, as_change: bool = False) -> str:
        """The ``name=value`` form that ``parse`` reads back to these settings: the fields not at zero.

        With ``as_change``, the fields given on purpose (``model_fields_set``) and only those, zeros
        included: the change that ``merged`` applies, once ``parse`` has read it back.
        """
        parts = []
        for name, field in _SPEC_FIELDS.items():
            value = getattr(self, field)
            if field in self.model_fields_set if as_change else value:
                parts.append(f"{name}={value:g}ms" if field.endswith("_ms") else f"{name}={value}")
        return ",".join(parts)

    def merged(self, change: FaultSettings) -> FaultSettings:
        """These settings with the fields ``change`` was given (its ``model_fields_set``) taken from it.

        How a fault is added to those in force: ``FaultSettings(transient=0.3)`` adds the transient
        fault and keeps the latency, ``FaultSettings(transient=0)`` clears that one fault alone, and
        settings given in full (as ``merged`` returns them) replace every field.
        """
        return FaultSettings.model_validate(
            {**self.model_dump(), **change.model_dump(include=change.model_fields_set)}
        )


# A setting's name in a spec is its field's, less the unit: latency=200ms is latency_ms.
_SPEC_FIELDS = {field.removesuffix("_ms"): field for field in FaultSettings.model_fields}


@dataclass(frozen=True)
class Roll:
    """What the dice said for one call: its added delay, and which faults strike it."""

    delay_ms: float
    crash: bool
    hang: bool
    garbage: bool
    transient: bool
    lose: bool
    exit: bool
    truncate: bool
    unknown_id: bool
    oversize: bool


# The dice, in the order they are rolled: Roll's fields after the delay.
_DICE = [each.name for each in fields(Roll)][1:]


def rolls(settings: FaultSettings) -> Iterator[Roll]:
    """The dice for each call in turn. Every die is rolled for every call in a fixed order, before
    any is acted on, so the same seed strikes the same calls: a run replays, and a test can know
    which calls the layer chose."""
    rng = random.Random(settings.seed)  # noqa: S311  (fault dice, not cryptography)
    s = settings
    while True:
        delay_ms = max(0.0, s.latency_ms + rng.uniform(-s.jitter_ms, s.jitter_ms))
        yield Roll(delay_ms, *(rng.random() < getattr(s, die) for die in _DICE))


def transient_result(source: str) -> CallToolResult:
    """The answer of the transient fault: a contract transient error saying the call did not run.

    One builder for the server-side layer and the client-side one (``subagents.sessions.client_faults``), so
    a caller cannot tell which side injected it.
    """
    return tool_failure.to_call_tool_result(
        contract.ToolError.of(
            contract.ErrorCategory.TRANSIENT,
            f"The {source} source is temporarily unavailable (injected fault); "
            "the request did not execute and should succeed on retry.",
        )
    )


def _kill_self() -> None:
    os.kill(os.getpid(), signal.SIGKILL)


class FaultLayer:
    """Server middleware that applies ``FaultSettings`` to every ``tools/call``.

    ``wire`` is the transport side of the garbage fault (``sources.wire``); without one, the garbage
    fault is refused rather than silently doing nothing.
    """

    def __init__(
        self,
        settings: FaultSettings,
        *,
        source: str,
        wire: Wire | None = None,
        sleep: Callable[[float], Awaitable[None]] = anyio.sleep,
        crash: Callable[[], None] = _kill_self,
    ) -> None:
        self._wire = wire
        self._source = source
        self.settings = FaultSettings()
        self._rolls = rolls(self.settings)
        self.apply(settings)
        self._sleep = sleep
        self._crash = crash

    def apply(self, settings: FaultSettings) -> None:
        """Switch to new settings (at start, or at run time through the chaos control); the dice restart."""
        if (settings.truncate or settings.unknown_id) and not isinstance(self._wire, StdioWire):
            raise ValueError(
                "the truncate and unknown_id faults write JSON-RPC on the stdio wire; use them over stdio"
            )
        if settings.garbage and self._wire is None:
            raise ValueError(
                "the garbage fault needs a wire to corrupt: stdio's, or an HTTP source started with --chaos-control"
            )
        self.settings = settings
        self._active = settings.active  # asked once here, not on every call (it reads every field)
        self._rolls = rolls(settings)

    async def __call__(self, ctx: ServerRequestContext[Any, Any], call_next: CallNext) -> HandlerResult:
        if self.settings.die_at == "handshake" and ctx.method in _HANDSHAKE:
            self._crash()
        if ctx.method != "tools/call" or not self._active:
            return await call_next(ctx)
        roll = next(self._rolls)
        if roll.delay_ms:
            await self._sleep(roll.delay_ms / 1000)
        if roll.crash:
            self._crash()
        if roll.exit:
            os._exit(0)  # a clean exit mid-call: no answer, no traceback, status 0
        for kind in ("garbage", "truncate", "unknown_id"):
            if getattr(roll, kind) and self._wire is not None and self._wire.corrupt(ctx, kind):
                await anyio.sleep_forever()  # the answer was the corruption: the caller waits in vain
        if roll.hang:
            await anyio.sleep_forever()
        if roll.transient:
            return transient_result(self._source)
        result = await call_next(ctx)
        if roll.lose:
            await anyio.sleep_forever()  # the call ran; its answer is lost on the way back
        if roll.oversize and isinstance(result, mcp.types.CallToolResult):
            padding = mcp.types.TextContent(type="text", text="x" * OVERSIZE_BYTES)
            return result.model_copy(update={"content": [*result.content, padding]})
        return result
