"""search_tickets through the mcp Client: full text, by customer or order, the rate limit with retryAfterMs,
long bodies."""

from __future__ import annotations

import dataclasses
from collections.abc import Callable

import pytest
from mcp.server import MCPServer

from sources.settings import SourceSettings
from sources.store import Store
from sources.world import world_path
from tests.conftest import call, empty_message, wire

pytestmark = pytest.mark.anyio


class ManualClock:
    def __init__(self) -> None:
        self.now = 1000.0

    def __call__(self) -> float:
        return self.now


@pytest.fixture
def server(server_for: Callable[..., MCPServer]) -> MCPServer:
    return server_for("tickets")


async def test_full_text_search_for_a_customer(server: MCPServer) -> None:
    result = await call(server, "search_tickets", {"query": "damaged refund", "customer_id": "CUST-00042"})
    payload = wire(result)
    assert result.is_error is False
    assert payload["results"][0]["id"] == "TCK-20042"
    assert payload["results"][0]["order_id"] == "ORD-10023" and payload["results"][0]["status"] == "open"


async def test_open_tickets_of_a_customer_without_words(server: MCPServer) -> None:
    payload = wire(await call(server, "search_tickets", {"customer_id": "CUST-00042", "status": "open"}))
    assert [ticket["id"] for ticket in payload["results"]] == ["TCK-20042"]


async def test_no_tickets_is_a_valid_empty_result(server: MCPServer) -> None:
    result = await call(server, "search_tickets", {"customer_id": "CUST-00077"})
    payload = wire(result)
    assert (
        result.is_error is False
        and payload["resultCount"] == 0
        and "executed successfully" in payload["message"]
    )


async def test_search_text_never_becomes_query_syntax(server: MCPServer) -> None:
    for query in ["' OR 1=1 --", 'refund" OR "', "NEAR(a b) * ^ :", "refund AND NOT"]:
        result = await call(server, "search_tickets", {"query": query, "customer_id": "CUST-00042"})
        payload = wire(result)
        assert result.is_error is False, payload
        assert all(ticket["customer_id"] == "CUST-00042" for ticket in payload["results"])


async def test_search_text_that_reads_as_json_is_searched_as_text(server: MCPServer) -> None:
    # The argument guard has checked every argument against the published schema; the SDK's own
    # pre-parsing of strings as JSON ran after it and turned "null" into no query at all and a
    # bracketed word into a list, refused with pydantic's raw text.
    empty = wire(await call(server, "search_tickets", {"query": "null", "customer_id": "CUST-00042"}))
    assert empty["resultCount"] == 0 and "'null'" in empty["message"], empty
    result = await call(server, "search_tickets", {"query": '["damaged"]', "customer_id": "CUST-00042"})
    payload = wire(result)
    assert result.is_error is False, payload
    assert [ticket["id"] for ticket in payload["results"]][:1] == ["TCK-20042"]


async def test_tickets_about_an_order(server: MCPServer) -> None:
    result = await call(server, "search_tickets", {"order_id": "ORD-10023"})
    payload = wire(result)
    assert result.is_error is False
    assert "TCK-20042" in [ticket["id"] for ticket in payload["results"]]
    assert all(ticket["order_id"] == "ORD-10023" for ticket in payload["results"])
    both = wire(await call(server, "search_tickets", {"query": "damaged", "order_id": "ORD-10023"}))
    assert both["results"][0]["id"] == "TCK-20042"


async def test_no_tickets_about_an_order_is_a_valid_empty_result(server: MCPServer) -> None:
    result = await call(server, "search_tickets", {"order_id": "ORD-99999"})
    assert empty_message(result) == (
        "No tickets match order ORD-99999. The query executed successfully and returned no matches."
    )


@pytest.mark.parametrize("arguments", [{}, {"status": "open"}, {"limit": 5}])
async def test_a_query_a_customer_or_an_order_is_needed(
    server: MCPServer, arguments: dict[str, object]
) -> None:
    result = await call(server, "search_tickets", arguments)
    payload = wire(result)
    assert result.is_error is True and payload["errorCategory"] == "validation"
    assert (
        "Argument 'query' is required when neither customer_id nor order_id is given"
        in payload["description"]
    )


async def test_a_malformed_order_id_is_a_validation_error(server: MCPServer) -> None:
    payload = wire(await call(server, "search_tickets", {"order_id": "ORD-10023-A"}))
    assert payload["errorCategory"] == "validation" and "Argument 'order_id'" in payload["description"]


async def test_very_long_bodies_are_returned_whole(server: MCPServer, settings: SourceSettings) -> None:
    store = Store(world_path(settings.data_dir, settings.seed) / "tickets.db")
    longest = store.row(
        "SELECT id, customer_id, length(body) AS size FROM tickets ORDER BY size DESC LIMIT 1"
    )
    assert longest is not None and longest["size"] > 5000
    payload = wire(
        await call(server, "search_tickets", {"customer_id": longest["customer_id"], "limit": 100})
    )
    (ticket,) = [ticket for ticket in payload["results"] if ticket["id"] == longest["id"]]
    assert len(ticket["body"]) == longest["size"]


async def test_over_the_rate_limit_is_transient_with_retry_after(settings: SourceSettings) -> None:
    from sources import tickets

    clock = ManualClock()
    limited = dataclasses.replace(settings, tickets_rate_per_second=2, tickets_burst=1)
    server = tickets.create_server(limited, clock=clock)
    first = await call(server, "search_tickets", {"query": "refund"})
    assert first.is_error is False

    refused = await call(server, "search_tickets", {"query": "refund"})
    payload = wire(refused)
    assert refused.is_error is True
    assert payload["errorCategory"] == "transient" and payload["isRetryable"] is True
    assert payload["retryAfterMs"] == 500
    assert payload["attempted_query"] == {
        "tool": "search_tickets",
        "arguments": {"query": "refund", "customer_id": None, "order_id": None, "status": None, "limit": 20},
    }

    clock.now += 0.5
    assert (await call(server, "search_tickets", {"query": "refund"})).is_error is False
