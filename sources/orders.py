"""The orders source: ``search_orders`` with filters and pagination, and ``get_order`` by id.

Natural failures: a malformed SKU, order id or date, a date that is not a date, or date bounds in
the wrong order are validation errors that echo ``attempted_query``; a customer with no matching
orders, or an order id that names no order, is a valid empty result; large result sets come a page
at a time (``nextCursor``).
"""

from __future__ import annotations

from datetime import date
from typing import Annotated, Any

from mcp.server import MCPServer
from pydantic import BaseModel, Field

from sources.contract import EmptyResult, ResultPage
from sources.formats import CURSOR, CUSTOMER_ID, ISO_DATE, ORDER_ID, SKU, OrderStatus, whole_number
from sources.settings import SourceSettings
from sources.store import Store
from sources.toolkit import invalid, open_source, page_of
from sources.wire import Wire

__all__ = ["Order", "create_server"]


class OrderItem(BaseModel):
    sku: str
    description: str
    quantity: int
    unit_price: float


class Order(BaseModel):
    id: str
    customer_id: str
    placed_on: str
    status: OrderStatus
    delivered_on: str | None = Field(
        default=None, description="When the order reached the customer; absent while it has not."
    )
    total: float
    currency: str
    items: list[OrderItem]


def _date(field: str, value: str | None) -> date | None:
    if value is None:
        return None
    try:
        return date.fromisoformat(value)
    except ValueError:
        raise invalid(field, "is not a real calendar date", received=value, form=ISO_DATE) from None


def _date_bounds(placed_after: str | None, placed_before: str | None) -> tuple[date | None, date | None]:
    """The placement dates a search is bounded by, each checked to be a date, the two in order."""
    after, before = _date("placed_after", placed_after), _date("placed_before", placed_before)
    if after and before and after > before:
        raise invalid(
            "placed_before",
            f"is earlier than placed_after ({before} < {after}); the date bounds look swapped",
            received=placed_before,
            expected="Expected: placed_after on or before placed_before.",
            example=str(after),
        )
    return after, before


def _conditions(
    customer_id: str, sku: str | None, after: date | None, before: date | None
) -> tuple[list[str], list[str]]:
    """A search's SQL conditions on orders, and their parameters."""
    clauses, parameters = ["customer_id = ?"], [customer_id]
    if sku:
        clauses.append("id IN (SELECT order_id FROM order_items WHERE sku = ?)")
        parameters.append(sku)
    if after:
        clauses.append("placed_on >= ?")
        parameters.append(after.isoformat())
    if before:
        clauses.append("placed_on <= ?")
        parameters.append(before.isoformat())
    return clauses, parameters


def create_server(settings: SourceSettings | None = None, *, wire: Wire | None = None) -> MCPServer:
    source = open_source(
        "orders",
        settings,
        wire=wire,
        instructions="Customer orders. Search a customer's orders by SKU and date, or fetch one order by id.",
    )

    @source.tool(Order, title="Search a customer's orders")
    def search_orders(
        customer_id: Annotated[str, CUSTOMER_ID.field("Whose orders to search.")],
        sku: Annotated[str | None, SKU.field("Only orders containing this SKU.")] = None,
        placed_after: Annotated[
            str | None, ISO_DATE.field("Only orders placed on or after this date.")
        ] = None,
        placed_before: Annotated[
            str | None, ISO_DATE.field("Only orders placed on or before this date.")
        ] = None,
        limit: Annotated[int, whole_number("Most orders per page.", 1, 200, 50)] = 50,
        cursor: Annotated[str | None, CURSOR.field("Continue from a previous page.")] = None,
    ) -> ResultPage[Order] | EmptyResult:
        """Search one customer's orders, newest first, optionally by SKU and placement date.

        Returns orders with their items, a page at a time: when `truncated` is true, pass
        `nextCursor` as `cursor` for the next page. No matching orders is a valid empty result
        (isError false, resultCount 0), not an error. A malformed SKU or date, or date bounds in
        the wrong order, is a `validation` error that echoes the attempted query.
        """
        after, before = _date_bounds(placed_after, placed_before)
        clauses, parameters = _conditions(customer_id, sku, after, before)
        offset = int(cursor or 0)
        rows = source.store.rows(
            f"SELECT * FROM orders WHERE {' AND '.join(clauses)} ORDER BY placed_on DESC, id LIMIT ? OFFSET ?",  # noqa: S608  (clauses are literals; values are parameters)
            [*parameters, limit + 1, offset],
        )
        filters = ", ".join(
            f"{name}={value}"
            for name, value in (
                ("sku", sku),
                ("placed_after", placed_after),
                ("placed_before", placed_before),
            )
            if value
        )
        return page_of(
            [_with_items(source.store, row) for row in rows[:limit]],
            empty_message=f"No orders of {customer_id} match{f' ({filters})' if filters else ''}.",
            next_cursor=str(offset + limit) if len(rows) > limit else None,
        )

    @source.tool(Order, title="Get an order")
    def get_order(
        order_id: Annotated[str, ORDER_ID.field("The order to fetch.")],
    ) -> ResultPage[Order] | EmptyResult:
        """Fetch one order by its id, with its items.

        Returns the order, or a valid empty result (isError false, resultCount 0) when no order has
        that id. A malformed order id is a `validation` error that names the field, the expected
        form and an example: correct it and call again.
        """
        row = source.store.row("SELECT * FROM orders WHERE id = ?", (order_id,))
        return page_of(
            [] if row is None else [_with_items(source.store, row)],
            empty_message=f"No order {order_id} exists.",
        )

    return source.server


def _with_items(store: Store, row: dict[str, Any]) -> Order:
    items = store.rows(
        "SELECT sku, description, quantity, unit_price FROM order_items WHERE order_id = ?", (row["id"],)
    )
    return Order(**row, items=[OrderItem(**item) for item in items])


if __name__ == "__main__":
    from sources.processes.serve import main

    main(create_server)
