"""The refund ledger: billing's record of every refund it issued, read in one place.

Billing writes the ledger (``issue_refund``, idempotent by key). What it holds is read here, by
billing itself (what an order has been refunded so far) and by whoever audits billing from outside
it (the chaos checker: no order refunded above the limit in total, none outside the window, none
executed twice), so that the SQL that knows the ledger's tables lives in one module.
"""

from __future__ import annotations

import sqlite3
from dataclasses import dataclass
from datetime import date

from sources.settings import SourceSettings
from sources.store import Store
from sources.world import world_path

__all__ = ["REFUNDED_ON_INVOICE", "LedgerRefund", "ledger", "order_refunded"]

_ORDER_REFUNDED = "SELECT COALESCE(SUM(amount), 0) AS total FROM refunds WHERE order_id = ?"
# All refunded on the order of invoice ``i``, as a column of a query on invoices: read in the same
# statement as the invoice, so both come from one snapshot, in one read.
REFUNDED_ON_INVOICE = "COALESCE((SELECT SUM(r.amount) FROM refunds r WHERE r.order_id = i.order_id), 0)"


@dataclass(frozen=True)
class LedgerRefund:
    """One refund billing issued, with the delivery date of its order (None: not delivered yet)."""

    id: str
    order_id: str
    amount: float
    idempotency_key: str
    issued_on: date
    delivered_on: date | None


def order_refunded(connection: sqlite3.Connection, order_id: str) -> float:
    """All refunded on ``order_id`` so far, to the penny, as a connection in one of billing's
    transactions sees it (its own insert included). A read outside one takes ``REFUNDED_ON_INVOICE``
    with the invoice."""
    total = connection.execute(_ORDER_REFUNDED, (order_id,)).fetchone()[0]
    return round(float(total), 2)


def ledger(settings: SourceSettings) -> list[LedgerRefund]:
    """Every refund billing issued in the world of ``settings``, in the order it issued them."""
    store = Store(world_path(settings.data_dir, settings.seed) / "billing.db")
    rows = store.rows(
        "SELECT r.id, r.order_id, r.amount, r.idempotency_key, r.issued_on, i.delivered_on "
        "FROM refunds r LEFT JOIN invoices i ON i.order_id = r.order_id ORDER BY r.rowid"
    )
    return [
        LedgerRefund(
            id=row["id"],
            order_id=row["order_id"],
            amount=row["amount"],
            idempotency_key=row["idempotency_key"],
            issued_on=date.fromisoformat(row["issued_on"]),
            delivered_on=date.fromisoformat(row["delivered_on"]) if row["delivered_on"] else None,
        )
        for row in rows
    ]
