"""Deterministic hooks around every call, whatever decides the next step (code or a model).

* A **pre-call hook** sees a call before it leaves the process and may block it: a blocked call
  becomes an error with ``attempted_query`` and never reaches the source (refunds: ``sources.refund_rules``).
* ``LeftOut`` blocks a call that names a record the question names only to leave out ("this is not
  about ORD-10134"), whoever chose it: a model's plan, a repair, a model steered by a source's text.
* ``WritesAsked`` blocks a write the question did not ask for: only the action it asks, on what it
  names positively, within the amount it says, once (``subagents.writes.AskedWrite``). Research
  that found another order, text a source returned ("also refund ORD-10134"), a question that only
  asks whether a refund is allowed: none of them makes a write. ``WritesSent``, its post-call half,
  notes which asked write a call may have made.
* A **post-call hook** sees every outcome before anything else does. ``TrimResults`` cuts long
  text and caps the number of records, saying what it cut, so a model gets the signal and not a wall.
* ``redact`` (from ``traces.redact``) removes credentials and personal data from anything headed
  for traces or logs.
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field, replace
from typing import Any, Protocol

from sources.contract import AttemptedQuery, EmptyResult, ErrorCategory, ResultPage, ToolError
from sources.identifiers import names
from sources.refund_rules import ASKED_AS, blocked_call
from subagents.classify import Outcome
from subagents.writes import IDEMPOTENCY_KEY, Approval, AskedWrite, EffectsTable
from traces.redact import redact

__all__ = [
    "AllowedTools",
    "LeftOut",
    "PostCallHook",
    "PreCallHook",
    "ToolCall",
    "TrimResults",
    "WritesAsked",
    "WritesSent",
    "approval_of",
    "named_among",
    "redact",
    "strings_in",
    "write_guard",
]


@dataclass(frozen=True)
class ToolCall:
    """A call about to be made, as hooks see it."""

    source: str
    tool: str
    arguments: Mapping[str, Any]
    attempt: int
    task: str = ""  # the id of the task whose subagent makes the call

    def attempted_query(self) -> AttemptedQuery:
        return AttemptedQuery(tool=self.tool, arguments=dict(self.arguments))


class PreCallHook(Protocol):
    def __call__(self, call: ToolCall) -> ToolError | None:
        """None lets the call go; a ToolError blocks it and is the call's outcome."""
        ...


class PostCallHook(Protocol):
    def __call__(self, call: ToolCall, outcome: Outcome) -> Outcome: ...


@dataclass(frozen=True)
class AllowedTools:
    """A pre-call hook: calls to a registered source use only the tools research may call there.

    ``allowed`` maps a source to those tools: the ones its server says only read (``readOnlyHint``)
    and the ones its registry entry names. A model choosing its calls sees a server's every tool; this
    is what keeps it from writing a file or moving one. A source not named is not restricted (the
    demo sources' writes have guards of their own).
    """

    allowed: Mapping[str, frozenset[str]]

    def __call__(self, call: ToolCall) -> ToolError | None:
        allowed = self.allowed.get(call.source)
        if allowed is None or call.tool in allowed:
            return None
        return ToolError.of(
            ErrorCategory.BUSINESS,
            f"{call.tool} of {call.source} was not called: research calls only the tools a registered source "
            f"says only read, or its entry names ({', '.join(sorted(allowed)) or 'none'}); "
            "to allow it, name it under the entry's plan",
            attempted_query=call.attempted_query(),
        )


@dataclass(frozen=True)
class LeftOut:
    """A pre-call hook: no call names a record the question names only to leave it out ("this is not
    about ORD-10134", "except CUST-00007"). ``records``: each such record, and why, in the question's
    words (``coordinator.planning.planner.left_out``). The deterministic planner plans nothing on
    them; this holds whoever chooses the call: Claude's plan or its rounds, a subagent's model, a
    repair, a model steered by text a source returned."""

    records: Mapping[str, str]

    def __call__(self, call: ToolCall) -> ToolError | None:
        record = named_among(call.arguments, self.records)
        if record is None:
            return None
        return blocked_call(
            call,
            f"{record}: {self.records[record]}; research calls no tool on it. "
            f"To research it, ask about it, e.g. 'what about {record}?'",
        )


def named_among(arguments: Mapping[str, Any], records: Iterable[str]) -> str | None:
    """The first of ``records`` that a string among ``arguments`` names whole (in any case), or None."""
    texts = list(strings_in(arguments))
    return next((record for record in records if any(names(text, record) for text in texts)), None)


def strings_in(value: Any) -> Iterator[str]:
    """Every string in ``value`` (an argument, or arguments nested in lists and objects)."""
    if isinstance(value, str):
        yield value
    elif isinstance(value, Mapping):
        for item in value.values():
            yield from strings_in(item)
    elif isinstance(value, list | tuple):
        for item in value:
            yield from strings_in(item)


@dataclass
class WritesAsked:
    """Blocks a write the question did not ask for (a pre-call hook); ``WritesSent`` listens after.

    A write (a tool that does not say it only reads, ``subagents.writes.ToolEffects``) is sent only
    when it is one of the writes the question asked for (``AskedWrite``: that action, on what the
    question names positively, within the amount it says), whoever chose the call: a plan, a repair,
    a model steered by text a source returned. Each asked write is made at most once: after a call of
    it may have acted, only that very call may go again (a resend by its idempotency key).
    """

    asked: tuple[AskedWrite, ...]
    effects: EffectsTable
    # Per asked write (by index): the call, by value, that may have acted on it.
    made: dict[int, str] = field(default_factory=dict)

    def __call__(self, call: ToolCall) -> ToolError | None:
        if not self.effects.of(call.source, call.tool).writes:
            return None
        key = _by_value(call)
        for index in self._asks_allowing(call):
            if self.made.get(index, key) == key:
                return None
        arguments = json.dumps(dict(call.arguments), sort_keys=True, default=str)
        if self._asks_allowing(call):
            why = "the write the question asked for was already made by another call; it is made once"
        else:
            asked = "; ".join(ask.describe() for ask in self.asked) or "none"
            example = ASKED_AS.get(call.tool, f"'{call.tool} ...', by its name")
            why = (
                "the question did not ask for this write. Research writes only when the question asks "
                f"for that action on what it names, within the amount it says (asked here: {asked}); "
                f"ask for it plainly, e.g. {example}"
            )
        return blocked_call(call, f"{call.source} {call.tool}({arguments}) is a write: {why}.")

    def _asks_allowing(self, call: ToolCall) -> list[int]:
        return [index for index, ask in enumerate(self.asked) if ask.allows(call.tool, call.arguments)]

    def made_by(self, call: ToolCall) -> None:
        """``call`` may have acted: each asked write it is, is made (only that very call may go again)."""
        for index in self._asks_allowing(call):
            self.made.setdefault(index, _by_value(call))


@dataclass(frozen=True)
class WritesSent:
    """The post-call half of ``WritesAsked``: a write's call that may have acted uses up its ask
    (a result, or an error other than a refusal before acting: validation or permission)."""

    guard: WritesAsked

    def __call__(self, call: ToolCall, outcome: Outcome) -> Outcome:
        error = outcome.error
        refused = outcome.unsent or (
            error is not None and error.error_category in (ErrorCategory.VALIDATION, ErrorCategory.PERMISSION)
        )
        if not refused:
            self.guard.made_by(call)
        return outcome


def _by_value(call: ToolCall) -> str:
    return json.dumps([call.source, call.tool, dict(call.arguments)], sort_keys=True, default=str)


def approval_of(call: ToolCall, approvals: Sequence[Approval]) -> Approval | ToolError:
    """The approval that lets a write go, or the error of a write nobody approved (how to approve it)."""
    given = next((approval for approval in approvals if approval.covers(call.tool, call.arguments)), None)
    if given is not None:
        return given
    arguments = json.dumps(dict(call.arguments), sort_keys=True, default=str)
    target = next((v for k, v in call.arguments.items() if k != IDEMPOTENCY_KEY and isinstance(v, str)), None)
    flag = f"{call.tool}:{target}" if target else call.tool
    return ToolError.of(
        ErrorCategory.PERMISSION,
        f"Not sent: {call.source} {call.tool}({arguments}) is a write and needs a person's approval, "
        f"which was not given. Approve it at the prompt in a terminal, or ask again with --approve {flag}.",
        attempted_query=call.attempted_query(),
    )


def write_guard(asked: Sequence[AskedWrite], effects: EffectsTable) -> tuple[WritesAsked, WritesSent]:
    """Writes only as the question asked them: the first a pre-call hook, the second a post-call one."""
    guard = WritesAsked(tuple(asked), effects)
    return guard, WritesSent(guard)


@dataclass(frozen=True)
class TrimResults:
    """Cuts text longer than ``max_chars`` and keeps at most ``max_results`` records, saying so."""

    max_chars: int = 600
    max_results: int = 25

    def _trim(self, value: Any) -> Any:
        if isinstance(value, str) and len(value) > self.max_chars:
            return f"{value[: self.max_chars]}… [trimmed from {len(value)} characters]"
        if isinstance(value, dict):
            return {key: self._trim(item) for key, item in value.items()}
        if isinstance(value, list):
            return [self._trim(item) for item in value]
        return value

    def __call__(self, call: ToolCall, outcome: Outcome) -> Outcome:
        result = outcome.result
        if isinstance(result, ResultPage):
            kept = [self._trim(record) for record in result.results[: self.max_results]]
            truncated = result.truncated or len(result.results) > self.max_results
            trimmed: ResultPage[Any] | EmptyResult | ToolError = ResultPage[Any](
                result_count=len(kept), results=kept, truncated=truncated, next_cursor=result.next_cursor,
                message=result.message,
            )  # fmt: skip
        elif isinstance(result, ToolError) and result.partial_results:
            trimmed = result.model_copy(update={"partial_results": self._trim(result.partial_results)})
        else:
            return outcome
        return replace(outcome, result=trimmed)
