"""Deterministic hooks around every call, whatever decides the next step (code or a model).

* A **pre-call hook** sees a call before it leaves the process and may block it: a blocked call
  becomes a ``business`` error with ``attempted_query`` and never reaches the source.
  ``RefundLimit`` guarantees that no refund above £500 is ever sent to billing, and fails closed: an
  amount it cannot read as a positive number of pounds is not sent either (billing enforces the limit
  per order too: two independent guards).
* A **post-call hook** sees every outcome before anything else does. ``TrimResults`` cuts long
  text and caps the number of records, saying what it cut, so a model gets the signal and not a wall.
* ``redact`` (from ``traces.redact``) removes credentials and personal data from anything headed
  for traces or logs.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any, Protocol

from sources.contract import AttemptedQuery, EmptyResult, ErrorCategory, ResultPage, ToolError
from sources.domain import AUTOMATIC_REFUND_LIMIT
from subagents.classify import Outcome
from traces.redact import redact

__all__ = ["PostCallHook", "PreCallHook", "RefundLimit", "ToolCall", "TrimResults", "redact"]


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
class RefundLimit:
    """Blocks a refund above the automatic limit before it leaves the process, and any amount it cannot read.

    Fails closed: what is not a finite positive number (a string, a bool, null, NaN, infinity) is not
    sent, since the hook could not tell whether it is within the limit.
    """

    limit: float = AUTOMATIC_REFUND_LIMIT
    tools: frozenset[str] = frozenset({"issue_refund"})

    def __call__(self, call: ToolCall) -> ToolError | None:
        if call.tool not in self.tools:
            return None
        amount = call.arguments.get("amount")
        if isinstance(amount, bool) or not isinstance(amount, int | float) or not 0 < amount < math.inf:
            return ToolError.of(
                ErrorCategory.VALIDATION,
                f"Blocked before sending: amount must be a positive number of pounds, such as 45.0; got {amount!r}.",
                attempted_query=call.attempted_query(),
            )
        if amount <= self.limit:
            return None
        return ToolError.of(
            ErrorCategory.BUSINESS,
            f"Blocked before sending: a refund of £{amount:,.2f} exceeds the £{self.limit:,.2f} automatic limit. "
            "Escalate to a manager with the refund details (KB-ESCALATION).",
            attempted_query=call.attempted_query(),
        )


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
        return Outcome(outcome.kind, trimmed, outcome.error_type, outcome.reopen)
