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
from sources.formats import (
    CUSTOMER_ID,
    ORDER_ID,
    SEARCH_TEXT,
    TicketPriority,
    TicketStatus,
    one_of,
    whole_number,
)
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
    status: TicketStatus
    priority: TicketPriority
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
        self._lock = threading.Lock()  # a source's tool bodies may run on worker threads

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

    @source.tool(Ticket, title="Search support tickets")
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
        _take_a_token(limiter)
        sql, parameters = _search(query, _filters(customer_id, order_id, status))
        rows = source.store.rows(sql, [*parameters, limit])
        return page_of(
            [Ticket(**row) for row in rows],
            empty_message=f"No tickets match {_described(query, customer_id, order_id, status)}.",
        )

    return source.server


def _take_a_token(limiter: RateLimiter) -> None:
    """Go on if the rate limit allows a call now; otherwise fail, saying how long to wait."""
    wait_ms = limiter.wait_ms()
    if wait_ms:
        raise ToolFailure(
            ToolError.of(
                ErrorCategory.TRANSIENT,
                f"The tickets source is rate limited; the request did not execute. Retry after {wait_ms} ms.",
                retry_after_ms=wait_ms,
            )
        )


Filters = list[tuple[str, str]]  # SQL conditions on tickets ``t``, each with its one parameter


def _filters(customer_id: str | None, order_id: str | None, status: TicketStatus | None) -> Filters:
    filters: Filters = []
    if customer_id:
        filters.append(("t.customer_id = ?", customer_id))
    if order_id:
        filters.append(("t.order_id = ?", order_id))
    if status:
        filters.append(("t.status = ?", status.value))
    return filters


def _search(query: str | None, filters: Filters) -> tuple[str, list[str]]:
    """The SQL for a search, and its parameters but the limit: best matches first for words, else newest."""
    conditions = [condition for condition, _ in filters]
    parameters = [parameter for _, parameter in filters]
    if not query:
        return (
            f"SELECT t.* FROM tickets t WHERE {' AND '.join(conditions)} ORDER BY t.opened_on DESC, t.id LIMIT ?",  # noqa: S608  (literal clauses)
            parameters,
        )
    where = " AND ".join(["tickets_text MATCH ?", *conditions])
    return (
        f"SELECT t.* FROM tickets_text JOIN tickets t ON t.rowid = tickets_text.rowid "  # noqa: S608  (literal clauses)
        f"WHERE {where} ORDER BY bm25(tickets_text), t.id LIMIT ?",
        [match_any_word(query), *parameters],
    )


def _described(
    query: str | None, customer_id: str | None, order_id: str | None, status: TicketStatus | None
) -> str:
    """What a search asked for, as an empty result's message says it."""
    return " and ".join(
        part
        for part in (
            f"'{query}'" if query else "",
            f"customer {customer_id}" if customer_id else "",
            f"order {order_id}" if order_id else "",
            f"status {status.value}" if status else "",
        )
        if part
    )


if __name__ == "__main__":
    from sources.processes.serve import main

    main(create_server)
