"""Deterministic hooks around every call, whatever decides the next step (code or a model).

* A **pre-call hook** sees a call before it leaves the process and may block it: a blocked call
  becomes a ``business`` error with ``attempted_query`` and never reaches the source.
  ``RefundLimit`` guarantees that no refund above the automatic limit (``sources.domain``) is ever sent to billing, and fails closed: an
  amount it cannot read as a positive number of pounds is not sent either (billing enforces the limit
  per order too: two independent guards). Given a ``RefundLedger`` it also holds to the per-order
  rules from what billing has told this runtime: a refund that would take the order's known refunds
  above the limit, or on an order billing said is outside the refund window, is not sent either.
* ``RefundLedger`` is a post-call hook that only listens: what billing said was already refunded on
  each order (eligibility assessments, refused ones' partial results too; invoices; refunds issued),
  and which orders it said are outside the window.
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
import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field, replace
from typing import Any, Protocol

from sources.contract import AttemptedQuery, EmptyResult, ErrorCategory, ResultPage, ToolError
from sources.domain import AUTOMATIC_REFUND_LIMIT, REFUND_WINDOW_DAYS, pounds
from subagents.classify import Outcome
from subagents.writes import IDEMPOTENCY_KEY, Approval, AskedWrite, EffectsTable
from traces.redact import redact

__all__ = [
    "AllowedTools",
    "PostCallHook",
    "PreCallHook",
    "RefundLedger",
    "RefundLimit",
    "ToolCall",
    "TrimResults",
    "WritesAsked",
    "WritesSent",
    "approval_of",
    "redact",
    "refund_guard",
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


@dataclass
class RefundLedger:
    """What billing told one runtime about orders' refunds: a post-call hook that changes nothing.

    ``refunded`` holds, per order, the largest total billing reported refunded on it: an assessment's
    ``already_refunded`` (allowed or refused), an invoice's ``refunded``, an issued refund's
    ``order_refunded``. Each was the true total when billing answered, and totals only grow, so the
    largest is a lower bound of the truth however the answers interleave: the hook may miss refunds
    it was not told of (billing still refuses those), never count one twice. ``issued_keys`` are the
    keys billing answered an issued refund for: the same call again is a replay that pays nothing,
    billing's to answer. ``late`` holds the orders billing said are outside the window, with its
    figures: time only moves on, so they stay outside.
    """

    refunded: dict[str, float] = field(default_factory=dict)
    late: dict[str, tuple[str, int]] = field(default_factory=dict)  # order -> (delivered on, days ago)
    issued_keys: set[str] = field(default_factory=set)

    def __call__(self, call: ToolCall, outcome: Outcome) -> Outcome:
        if call.source != "billing":
            return outcome
        for record in _records(outcome):
            self._observe(call.tool, record)
        return outcome

    def _observe(self, tool: str, record: Mapping[str, Any]) -> None:
        if tool == "issue_refund" and isinstance(record.get("idempotency_key"), str):  # a refund
            self.issued_keys.add(record["idempotency_key"])
            order, total = record.get("order_id"), _number(record.get("order_refunded"))
        elif "already_refunded" in record:  # an assessment: its order is ``id``
            order, total = record.get("id"), _number(record.get("already_refunded"))
            days, window = record.get("days_since_delivery"), record.get("refund_window_days")
            if isinstance(order, str) and isinstance(days, int) and isinstance(window, int) and days > window:
                self.late[order] = (str(record.get("delivered_on")), days)
        elif "refunded" in record:  # an invoice
            order, total = record.get("order_id"), _number(record.get("refunded"))
        else:
            return
        if isinstance(order, str):
            self.refunded[order] = max(self.refunded.get(order, 0.0), total)

    def blocks(self, call: ToolCall, amount: float, limit: float) -> str | None:
        """Why this refund must not be sent, from what billing said; None when nothing said so."""
        order, key = call.arguments.get("order_id"), call.arguments.get("idempotency_key")
        if not isinstance(order, str) or key in self.issued_keys:  # a replay pays nothing: billing answers it
            return None
        if order in self.late:
            delivered_on, days = self.late[order]
            return (
                f"billing reported {order} delivered on {delivered_on}, {days} days ago, outside the "
                f"{REFUND_WINDOW_DAYS}-day refund window (KB-REFUNDS)"
            )
        already = self.refunded.get(order, 0.0)
        if already and already + amount > limit:
            return (
                f"with {pounds(already)} already refunded on {order} (as billing reported), a refund of "
                f"{pounds(amount)} would take it to {pounds(already + amount)}, above the {pounds(limit)} "
                "automatic limit per order"
            )
        return None


def _records(outcome: Outcome) -> list[Mapping[str, Any]]:
    """The records an outcome carries: a page's results, or an error's partial results."""
    result = outcome.result  # an empty result's results are []
    records = (result.partial_results or []) if isinstance(result, ToolError) else result.results
    return [record for record in records if isinstance(record, Mapping)]


def _number(value: Any) -> float:
    return float(value) if isinstance(value, int | float) and not isinstance(value, bool) else 0.0


@dataclass(frozen=True)
class RefundLimit:
    """Blocks a refund above the automatic limit before it leaves the process, and any amount it cannot read.

    Fails closed: what is not a finite positive number (a string, a bool, null, NaN, infinity) is not
    sent, since the hook could not tell whether it is within the limit. With a ``ledger`` (the same
    one among the runtime's post-call hooks, see ``refund_guard``) it also blocks what the order's
    refunds as billing reported them rule out: above the limit in total, or outside the window.
    Without one it sees only the call, and billing alone enforces the per-order rules.
    """

    limit: float = AUTOMATIC_REFUND_LIMIT
    tools: frozenset[str] = frozenset({"issue_refund"})
    ledger: RefundLedger | None = None

    def __call__(self, call: ToolCall) -> ToolError | None:
        if call.tool not in self.tools:
            return None
        amount = call.arguments.get("amount")
        if isinstance(amount, bool) or not isinstance(amount, int | float) or not 0 < amount < math.inf:
            return _blocked(
                call,
                f"amount must be a positive number of pounds, such as 45.0; got {amount!r}.",
                ErrorCategory.VALIDATION,
            )
        if amount > self.limit:
            reason: str | None = (
                f"a refund of {pounds(amount)} exceeds the {pounds(self.limit)} automatic limit"
            )
        else:
            reason = None if self.ledger is None else self.ledger.blocks(call, amount, self.limit)
        if reason is None:
            return None
        return _blocked(call, f"{reason}. Escalate to a manager with the refund details (KB-ESCALATION).")


def _blocked(call: ToolCall, why: str, category: ErrorCategory = ErrorCategory.BUSINESS) -> ToolError:
    """A pre-call hook's verdict on ``call``: it is not sent, and this is its outcome."""
    return ToolError.of(category, f"Blocked before sending: {why}", attempted_query=call.attempted_query())


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


def refund_guard() -> tuple[RefundLimit, RefundLedger]:
    """A refund limit that knows what billing told this runtime: the first is a pre-call hook, the
    second a post-call one (put it before ``TrimResults``, so it sees every record)."""
    ledger = RefundLedger()
    return RefundLimit(ledger=ledger), ledger


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
            example = (
                "'Refund £45 on ORD-10031'"
                if call.tool == "issue_refund"
                else f"'{call.tool} ...', by its name"
            )
            why = (
                "the question did not ask for this write. Research writes only when the question asks "
                f"for that action on what it names, within the amount it says (asked here: {asked}); "
                f"ask for it plainly, e.g. {example}"
            )
        return _blocked(call, f"{call.source} {call.tool}({arguments}) is a write: {why}.")

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
