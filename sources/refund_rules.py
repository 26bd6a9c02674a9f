"""Billing's refund rules, held to by its caller before a refund leaves the process, beside billing's
own: hooks that ``coordinator.runtime`` puts in every run (a bare ``subagents.Runtime`` has ``RefundLimit``)."""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any, Protocol, TypeVar

from sources.contract import AttemptedQuery, EmptyResult, ErrorCategory, ResultPage, ToolError
from sources.domain import AUTOMATIC_REFUND_LIMIT, REFUND_WINDOW_DAYS, pounds

__all__ = ["ASKED_AS", "Call", "RefundLedger", "RefundLimit", "blocked_call", "refund_guard"]


class Call(Protocol):
    """A call about to leave for a source, as a guard sees it."""

    @property
    def source(self) -> str: ...
    @property
    def tool(self) -> str: ...
    @property
    def arguments(self) -> Mapping[str, Any]: ...
    def attempted_query(self) -> AttemptedQuery: ...


class _Answered(Protocol):
    @property
    def result(self) -> ResultPage[Any] | EmptyResult | ToolError: ...


_Outcome = TypeVar("_Outcome", bound=_Answered)

# How a question asks for billing's write, quoted when a write nobody asked for is refused.
ASKED_AS = {"issue_refund": "'Refund £45 on ORD-10031'"}


def blocked_call(call: Call, why: str, category: ErrorCategory = ErrorCategory.BUSINESS) -> ToolError:
    """A pre-call guard's verdict on ``call``: it is not sent, and this is its outcome."""
    return ToolError.of(category, f"Blocked before sending: {why}", attempted_query=call.attempted_query())


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

    def __call__(self, call: Call, outcome: _Outcome) -> _Outcome:
        if call.source != "billing":
            return outcome
        result = outcome.result  # its records: a page's results, or an error's partial results
        for record in (result.partial_results or []) if isinstance(result, ToolError) else result.results:
            if isinstance(record, Mapping):
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

    def blocks(self, call: Call, amount: float, limit: float) -> str | None:
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

    def __call__(self, call: Call) -> ToolError | None:
        if call.tool not in self.tools:
            return None
        amount = call.arguments.get("amount")
        if isinstance(amount, bool) or not isinstance(amount, int | float) or not 0 < amount < math.inf:
            return blocked_call(
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
        return blocked_call(call, f"{reason}. Escalate to a manager with the refund details (KB-ESCALATION).")


def refund_guard() -> tuple[RefundLimit, RefundLedger]:
    """A refund limit that knows what billing told this runtime: the first is a pre-call hook, the
    second a post-call one (put it before ``TrimResults``, so it sees every record)."""
    ledger = RefundLedger()
    return RefundLimit(ledger=ledger), ledger
