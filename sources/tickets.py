"""The tickets source (support): ``search_tickets``, by words (full text), customer or order.

Natural failures: the source is rate limited, and a caller over the limit gets a transient error with
``retryAfterMs``; a search that matches nothing is a valid empty result; a search without words, a
customer or an order is a validation error. Ticket bodies can be very long: they are returned whole,
and trimming them before they reach a model is the caller's post-call hook's job.
"""

from __future__ import annotations

import math
import threading
import time
from collections.abc import Callable
from typing import Annotated

from mcp.server import MCPServer
from pydantic import BaseModel

from sources.contract import EmptyResult, ErrorCategory, ResultPage, ToolError, ToolFailure
from sources.formats import CUSTOMER_ID, ORDER_ID, SEARCH_TEXT, TicketStatus, one_of, whole_number
from sources.settings import SourceSettings
from sources.store import match_any_word
from sources.toolkit import invalid, open_source, page_of
from sources.wire import Wire

__all__ = ["RateLimiter", "Ticket", "create_server"]


class Ticket(BaseModel):
    id: str
    customer_id: str
    order_id: str | None
    subject: str
    body: str
    status: str
    priority: str
    opened_on: str


class RateLimiter:
    """A token bucket that refuses rather than waits, and says how long until the next token.

    Written here rather than taken from a library: the rate-limit libraries at hand either block
    the caller until a token is free or keep their own clock, and this source must answer at once
    with ``retryAfterMs`` and run on an injected clock in tests.
    """

    def __init__(self, rate_per_second: float, burst: int, clock: Callable[[], float]) -> None:
        self._rate = rate_per_second
        self._capacity = max(burst, 1)
        self._tokens = float(self._capacity)
        self._clock = clock
        self._last = clock()
        self._lock = threading.Lock()  # tool bodies run on worker threads

    def wait_ms(self) -> int:
        """Take a token and return 0, or take none and return how long until one is free."""
        with self._lock:
            now = self._clock()
            self._tokens = min(self._capacity, self._tokens + (now - self._last) * self._rate)
            self._last = now
            if self._tokens >= 1:
                self._tokens -= 1
                return 0
            if self._rate <= 0:
                return 60_000
            return max(1, math.ceil((1 - self._tokens) / self._rate * 1000))


def create_server(
    settings: SourceSettings | None = None,
    *,
    wire: Wire | None = None,
    clock: Callable[[], float] = time.monotonic,
) -> MCPServer:
    source = open_source(
        "tickets",
        settings,
        wire=wire,
        instructions="Support tickets. Full-text search, optionally for one customer or one order.",
    )
    settings = source.settings
    limiter = RateLimiter(settings.tickets_rate_per_second, settings.tickets_burst, clock)

    @source.tool(Ticket)
    def search_tickets(
        query: Annotated[
            str | None, SEARCH_TEXT.field("Words to search for in ticket subjects and bodies.")
        ] = None,
        customer_id: Annotated[str | None, CUSTOMER_ID.field("Only this customer's tickets.")] = None,
        order_id: Annotated[str | None, ORDER_ID.field("Only tickets about this order.")] = None,
        status: Annotated[
            TicketStatus | None, one_of("Only tickets in this status.", TicketStatus, TicketStatus.OPEN)
        ] = None,
        limit: Annotated[int, whole_number("Most tickets returned.", 1, 100, 20)] = 20,
    ) -> ResultPage[Ticket] | EmptyResult:
        """Search support tickets by words, customer or order, in any combination; best matches (or newest) first.

        Give at least one of `query`, `customer_id` and `order_id`: with none, the call is a
        `validation` error. No matching tickets is a valid empty result (isError false,
        resultCount 0). Over the rate limit the call fails with a `transient` error carrying
        `retryAfterMs`: wait that long and retry the identical call. Bodies can be very long.
        """
        if query is None and customer_id is None and order_id is None:
            raise invalid(
                "query", "is required when neither customer_id nor order_id is given", form=SEARCH_TEXT
            )
        wait_ms = limiter.wait_ms()
        if wait_ms:
            raise ToolFailure(
                ToolError.of(
                    ErrorCategory.TRANSIENT,
                    f"The tickets source is rate limited; the request did not execute. Retry after {wait_ms} ms.",
                    retry_after_ms=wait_ms,
                )
            )
        filters, parameters = [], []
        if customer_id:
            filters.append("t.customer_id = ?")
            parameters.append(customer_id)
        if order_id:
            filters.append("t.order_id = ?")
            parameters.append(order_id)
        if status:
            filters.append("t.status = ?")
            parameters.append(status.value)
        if query:
            where = " AND ".join(["tickets_text MATCH ?", *filters])
            sql = (
                f"SELECT t.* FROM tickets_text JOIN tickets t ON t.rowid = tickets_text.rowid "  # noqa: S608  (literal clauses)
                f"WHERE {where} ORDER BY bm25(tickets_text), t.id LIMIT ?"
            )
            parameters.insert(0, match_any_word(query))
        else:
            sql = f"SELECT t.* FROM tickets t WHERE {' AND '.join(filters)} ORDER BY t.opened_on DESC, t.id LIMIT ?"  # noqa: S608
        rows = source.store.rows(sql, [*parameters, limit])
        described = " and ".join(
            part
            for part in (
                f"'{query}'" if query else "",
                f"customer {customer_id}" if customer_id else "",
                f"order {order_id}" if order_id else "",
                f"status {status.value}" if status else "",
            )
            if part
        )
        return page_of(
            [Ticket(**row) for row in rows],
            empty_message=f"No tickets match {described}.",
        )

    return source.server


if __name__ == "__main__":
    from sources.serve import main

    main(create_server)
