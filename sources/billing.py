"""The billing source: invoices, refund eligibility, and idempotent refunds.

Natural failures: financial records need scope ``billing:read`` and refunds ``billing:refund``
(permission); a refund later than the refund window after the order's delivery (KB-REFUNDS), or one
that would take what an order has been refunded automatically above the automatic refund limit (all
its refunds together, not one call), or above what is left to refund, is refused by a business rule
with the assessment attached as partial results; ``issue_refund`` is idempotent by key, and a key
reused with other arguments is a validation error.

The window counts in the world's calendar: ``create_server(today=...)`` (``TODAY`` unless a test
injects another day), never the wall clock. An order not delivered yet is within the window, which
starts at delivery: see ``_assess`` for why.
"""

from __future__ import annotations

import sqlite3
from dataclasses import dataclass
from datetime import date
from typing import Annotated, Any

from mcp.server import MCPServer
from pydantic import BaseModel, Field

from sources.contract import EmptyResult, ErrorCategory, ResultPage, ToolError, ToolFailure
from sources.domain import (
    AUTOMATIC_REFUND_LIMIT,
    REFUND_WINDOW_DAYS,
    TODAY,
    days_since_delivery,
    pounds,
    within_refund_window,
)
from sources.formats import AMOUNT, AMOUNT_DESCRIPTION, CUSTOMER_ID, IDEMPOTENCY_KEY, ORDER_ID, InvoiceStatus
from sources.refund_ledger import REFUNDED_ON_INVOICE, order_refunded
from sources.security.auth import current_principal, require_scope
from sources.settings import SourceSettings
from sources.store import Store
from sources.toolkit import invalid, open_source, page_of
from sources.wire import Wire

__all__ = [
    "Invoice",
    "Refund",
    "RefundAssessment",
    "create_server",
]

_LIMIT = pounds(AUTOMATIC_REFUND_LIMIT, short=True)  # as the tools' descriptions write it


class Invoice(BaseModel):
    id: str
    customer_id: str
    order_id: str
    issued_on: str
    amount: float
    currency: str
    status: InvoiceStatus
    refunded: float
    delivered_on: str | None = Field(
        default=None, description="When the order was delivered; absent while it has not been."
    )


class RefundAssessment(BaseModel):
    id: str = Field(description="The order assessed.")
    requested: float
    paid: float
    already_refunded: float
    refundable_balance: float
    automatic_limit: float
    delivered_on: str | None = Field(
        default=None,
        description="When the order was delivered; absent while it has not been (its window has not started).",
    )
    days_since_delivery: int | None = Field(
        default=None, description="Days from delivery to billing's today."
    )
    refund_window_days: int = Field(description="A refund may be issued this many days after delivery.")
    eligible: bool
    reason: str


class Refund(BaseModel):
    id: str
    order_id: str
    amount: float
    idempotency_key: str
    issued_by: str
    issued_on: str
    replayed: bool = Field(
        description="True when this key had already issued the refund: nothing new was paid."
    )
    order_refunded: float = Field(
        description="All refunded on the order so far, this refund included, when billing answered."
    )


def _check_amount(amount: float) -> None:
    if round(amount, 2) != amount:
        raise invalid(
            "amount",
            "has more than two decimals",
            received=amount,
            expected=f"Expected: {AMOUNT_DESCRIPTION}.",
            example=45.0,
        )


@dataclass(frozen=True)
class _Invoiced:
    """What billing knows of an invoiced order that a refund on it depends on."""

    order_id: str
    status: str
    paid: float  # nothing unless the invoice is paid
    already_refunded: float
    delivered_on: str | None
    days_since_delivery: int | None  # to billing's today; None while not delivered

    @property
    def balance(self) -> float:
        return round(self.paid - self.already_refunded, 2)


def _assess(store: Store, order_id: str, amount: float, today: date) -> RefundAssessment | None:
    """What may be refunded on this order ``today``, or None when billing has no invoice for it.

    The window (KB-REFUNDS: within ``REFUND_WINDOW_DAYS`` of delivery) counts from delivery, so an
    order not delivered yet (processing, shipped) is within it: the rule bounds how late a refund may
    come, not how early. That is what a support desk expects: refunds before delivery are routine (an
    order cancelled before dispatch, a goodwill refund for a late parcel) and no policy sends them to
    a manager; the balance and the automatic limit still hold. A cancelled order's invoice is void, so
    nothing was paid and there is nothing to refund anyway.
    """
    invoiced = _invoiced(store, order_id, today)
    if invoiced is None:
        return None
    refusal = _refusal(invoiced, amount, today)
    return RefundAssessment(
        id=order_id,
        requested=amount,
        paid=invoiced.paid,
        already_refunded=invoiced.already_refunded,
        refundable_balance=invoiced.balance,
        automatic_limit=AUTOMATIC_REFUND_LIMIT,
        delivered_on=invoiced.delivered_on,
        days_since_delivery=invoiced.days_since_delivery,
        refund_window_days=REFUND_WINDOW_DAYS,
        eligible=refusal is None,
        reason=_approval(invoiced, amount) if refusal is None else refusal,
    )


def _invoiced(store: Store, order_id: str, today: date) -> _Invoiced | None:
    invoice = store.row(
        f"SELECT i.amount, i.status, i.delivered_on, {REFUNDED_ON_INVOICE} AS refunded "  # noqa: S608  (a literal column)
        "FROM invoices i WHERE i.order_id = ?",
        (order_id,),
    )
    if invoice is None:
        return None
    delivered_on = invoice["delivered_on"]
    return _Invoiced(
        order_id=order_id,
        status=invoice["status"],
        paid=invoice["amount"] if invoice["status"] == "paid" else 0.0,
        already_refunded=round(float(invoice["refunded"]), 2),  # to the penny, as ``order_refunded``
        delivered_on=delivered_on,
        days_since_delivery=None if delivered_on is None else days_since_delivery(delivered_on, today),
    )


def _refusal(invoiced: _Invoiced, amount: float, today: date) -> str | None:
    """Why a refund of ``amount`` may not be issued automatically, the first rule it breaks; None if none."""
    order_id, already = invoiced.order_id, invoiced.already_refunded
    if invoiced.paid == 0:
        return f"the invoice of {order_id} is {invoiced.status}: nothing was paid"
    if not within_refund_window(invoiced.delivered_on, today):
        return (
            f"{order_id} was delivered on {invoiced.delivered_on}, {invoiced.days_since_delivery} days ago, "
            f"outside the {REFUND_WINDOW_DAYS}-day refund window (KB-REFUNDS); a manager must approve it"
        )
    if amount > invoiced.balance:
        return f"{pounds(amount)} is more than the refundable balance of {pounds(invoiced.balance)}"
    if already + amount > AUTOMATIC_REFUND_LIMIT:  # the limit is the order's, over all its refunds
        total = f" (with {pounds(already)} already refunded, {pounds(already + amount)})" if already else ""
        return (
            f"{pounds(amount)}{total} exceeds the {pounds(AUTOMATIC_REFUND_LIMIT)} automatic limit per order; "
            "a manager must approve it"
        )
    return None


def _approval(invoiced: _Invoiced, amount: float) -> str:
    """Why a refund of ``amount`` may be issued automatically: it breaks none of the rules."""
    window = (
        f"delivered on {invoiced.delivered_on}, {invoiced.days_since_delivery} days ago"
        if invoiced.delivered_on is not None
        else "not delivered yet: the window starts at delivery"
    )
    return (
        f"{pounds(amount)} is within the balance, the automatic limit and the "
        f"{REFUND_WINDOW_DAYS}-day refund window ({window})"
    )


def _refuse(assessment: RefundAssessment) -> ToolFailure:
    outside_window = (
        assessment.days_since_delivery is not None
        and assessment.days_since_delivery > assessment.refund_window_days
    )
    over_limit = (
        assessment.already_refunded + assessment.requested > AUTOMATIC_REFUND_LIMIT
        and assessment.requested <= assessment.refundable_balance
    )
    next_step = (  # a manager may approve what the rules refuse; nobody can refund what was not paid
        "Escalate to a manager with the refund details (KB-ESCALATION)."
        if outside_window or over_limit
        else "Do not retry."
    )
    return ToolFailure(
        ToolError.of(
            ErrorCategory.BUSINESS,
            f"Refund of {pounds(assessment.requested)} on {assessment.id} is not allowed: {assessment.reason}. {next_step}",
            partial_results=[assessment.model_dump(mode="json")],
        )
    )


def create_server(
    settings: SourceSettings | None = None, *, wire: Wire | None = None, today: date = TODAY
) -> MCPServer:
    """Billing on this settings' world; ``today`` is the world's day the refund window counts to."""
    source = open_source(
        "billing",
        settings,
        wire=wire,
        instructions="Invoices and refunds. Financial records need scope billing:read; refunds need billing:refund.",
    )
    store = source.store

    @source.tool(Invoice, title="List a customer's invoices")
    def list_invoices(
        customer_id: Annotated[str, CUSTOMER_ID.field("Whose invoices to list.")],
    ) -> ResultPage[Invoice] | EmptyResult:
        """List a customer's invoices, newest first, with the amount refunded on each. Needs scope billing:read.

        No invoices is a valid empty result (isError false, resultCount 0). Without the scope the
        call fails with a `permission` error: request elevation to billing:read, never retry as is.
        """
        require_scope("billing:read", "financial records")
        rows = store.rows(
            f"SELECT i.*, {REFUNDED_ON_INVOICE} AS refunded FROM invoices i "  # noqa: S608  (a literal column)
            "WHERE i.customer_id = ? ORDER BY i.issued_on DESC, i.id",
            (customer_id,),
        )
        return page_of(
            [Invoice(**row) for row in rows],
            empty_message=f"No invoices for {customer_id}.",
        )

    @source.tool(
        RefundAssessment,
        title="Check a refund's eligibility",
        description=f"""Assess whether a refund of `amount` (GBP) on an order may be issued automatically. Needs scope billing:read.

        Returns the assessment when the refund is allowed. A refund more than {REFUND_WINDOW_DAYS} days after the
        order's delivery, or one that would take the order's refunded total above the {_LIMIT} automatic
        limit, or above the refundable balance, is a `business` error (never retry) carrying the
        assessment in `partial_results`: escalate to a manager. An order not delivered yet is within
        the window (it starts at delivery). An order billing does not know is a valid empty result.
        """,
    )
    def refund_eligibility(
        order_id: Annotated[str, ORDER_ID.field("The order to refund.")],
        amount: AMOUNT,
    ) -> ResultPage[RefundAssessment] | EmptyResult:
        require_scope("billing:read", "financial records")
        _check_amount(amount)
        assessment = _assess(store, order_id, amount, today)
        if assessment is None:
            return page_of(
                [],
                empty_message=f"No invoice for {order_id}.",
            )
        if not assessment.eligible:
            raise _refuse(assessment)
        return page_of([assessment], empty_message="")

    @source.tool(
        Refund,
        title="Issue a refund",
        writes=True,  # it moves money
        idempotent=True,  # the same idempotency key and arguments pay nothing more: billing replays the key
        description=f"""Issue a refund of `amount` (GBP) on an order. Needs scope billing:refund. Idempotent by key.

        Calling again with the same key and arguments returns the refund already issued
        (`replayed` true) and pays nothing more. A refund more than {REFUND_WINDOW_DAYS} days after the order's
        delivery, or one that would take the order's refunded total above the {_LIMIT} automatic limit,
        or above the refundable balance, is a `business` error (never retry; escalate to a manager)
        carrying the assessment in `partial_results`. A key already used with other arguments is a
        `validation` error.
        """,
    )
    def issue_refund(
        order_id: Annotated[str, ORDER_ID.field("The order to refund.")],
        amount: AMOUNT,
        idempotency_key: Annotated[
            str, IDEMPOTENCY_KEY.field("Repeat the call with the same key and nothing is paid twice.")
        ],
    ) -> ResultPage[Refund] | EmptyResult:
        require_scope("billing:refund", "issuing refunds")
        _check_amount(amount)
        with store.transaction() as connection:
            connection.row_factory = sqlite3.Row
            earlier = connection.execute(
                "SELECT * FROM refunds WHERE idempotency_key = ?", (idempotency_key,)
            ).fetchone()
            if earlier is not None:
                return _replay(dict(earlier), order_id, amount, order_refunded(connection, order_id))
            assessment = _assess(store, order_id, amount, today)
            if assessment is None:
                raise invalid("order_id", "names no invoiced order", received=order_id, form=ORDER_ID)
            if not assessment.eligible:
                raise _refuse(assessment)
            count = connection.execute("SELECT COUNT(*) FROM refunds").fetchone()[0]
            refund = {
                "id": f"RFD-{50001 + count:05d}",
                "order_id": order_id,
                "amount": amount,
                "idempotency_key": idempotency_key,
                "issued_by": current_principal().subject,
                "issued_on": today.isoformat(),
            }
            connection.execute(
                "INSERT INTO refunds (id, order_id, amount, idempotency_key, issued_by, issued_on) "
                "VALUES (:id, :order_id, :amount, :idempotency_key, :issued_by, :issued_on)",
                refund,
            )
            refunded = order_refunded(connection, order_id)
        return page_of([Refund(**refund, replayed=False, order_refunded=refunded)], empty_message="")

    return source.server


def _replay(
    earlier: dict[str, Any], order_id: str, amount: float, refunded: float
) -> ResultPage[Refund] | EmptyResult:
    if (earlier["order_id"], earlier["amount"]) != (order_id, amount):
        raise invalid(
            "idempotency_key",
            f"was already used for a refund of {pounds(earlier['amount'])} on {earlier['order_id']}",
            received=earlier["idempotency_key"],
            form=IDEMPOTENCY_KEY,
        )
    return page_of([Refund(**earlier, replayed=True, order_refunded=refunded)], empty_message="")


if __name__ == "__main__":
    from sources.processes.serve import main

    main(create_server)
