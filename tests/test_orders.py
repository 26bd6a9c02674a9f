"""search_orders and get_order through the mcp Client: filters, pagination, one order by id, and
validation that echoes the query."""

from __future__ import annotations

from collections.abc import Callable

import pytest
from mcp.server import MCPServer

from tests.conftest import call, empty_message, wire

pytestmark = pytest.mark.anyio


@pytest.fixture
def server(server_for: Callable[..., MCPServer]) -> MCPServer:
    return server_for("orders")


async def test_a_customers_orders_newest_first_with_items(server: MCPServer) -> None:
    result = await call(server, "search_orders", {"customer_id": "CUST-00042"})
    payload = wire(result)
    assert result.is_error is False
    assert [order["id"] for order in payload["results"]] == ["ORD-10031", "ORD-10023", "ORD-10008"]
    damaged = payload["results"][1]
    assert damaged["total"] == 750.0 and damaged["currency"] == "GBP"
    assert damaged["items"] == [
        {
            "sku": "SKU-4417-BLK",
            "description": "Barista Pro espresso machine, black",
            "quantity": 1,
            "unit_price": 750.0,
        }
    ]


async def test_filters_by_sku_and_dates(server: MCPServer) -> None:
    by_sku = wire(await call(server, "search_orders", {"customer_id": "CUST-00042", "sku": "SKU-4417-BLK"}))
    assert [order["id"] for order in by_sku["results"]] == ["ORD-10023"]
    by_date = wire(
        await call(
            server,
            "search_orders",
            {"customer_id": "CUST-00042", "placed_after": "2026-10-01", "placed_before": "2026-10-15"},
        )
    )
    assert [order["id"] for order in by_date["results"]] == ["ORD-10023"]


async def test_no_orders_is_a_valid_empty_result(server: MCPServer) -> None:
    result = await call(server, "search_orders", {"customer_id": "CUST-00077"})
    payload = wire(result)
    assert result.is_error is False
    assert payload["resultCount"] == 0 and payload["results"] == []
    assert "executed successfully" in payload["message"]


async def test_large_results_come_a_page_at_a_time(server: MCPServer) -> None:
    seen: list[str] = []
    arguments: dict[str, object] = {"customer_id": "CUST-00042", "limit": 2}
    first = wire(await call(server, "search_orders", arguments))
    assert first["truncated"] is True and first["nextCursor"] == "2"
    seen += [order["id"] for order in first["results"]]
    second = wire(await call(server, "search_orders", {**arguments, "cursor": first["nextCursor"]}))
    assert second["truncated"] is False and "nextCursor" not in second
    seen += [order["id"] for order in second["results"]]
    assert seen == ["ORD-10031", "ORD-10023", "ORD-10008"]


@pytest.mark.parametrize(
    ("arguments", "field", "fragment"),
    [
        ({"sku": "sku-4417-blk"}, "sku", "three capital letters"),
        ({"sku": "4417"}, "sku", "SKU-4417-BLK"),
        ({"placed_after": "12/10/2026"}, "placed_after", "YYYY-MM-DD"),
        ({"placed_after": "2026-02-30"}, "placed_after", "not a real calendar date"),
        ({"placed_after": "2026-10-30", "placed_before": "2026-10-01"}, "placed_before", "swapped"),
        ({"limit": 0}, "limit", "at least 1"),
        ({"limit": "ten"}, "limit", "must be an integer"),
    ],
)
async def test_bad_filters_are_validation_errors_echoing_the_query(
    server: MCPServer, arguments: dict[str, object], field: str, fragment: str
) -> None:
    sent = {"customer_id": "CUST-00042", **arguments}
    result = await call(server, "search_orders", sent)
    payload = wire(result)
    assert result.is_error is True
    assert payload["errorCategory"] == "validation" and payload["isRetryable"] is False
    assert f"Argument '{field}'" in payload["description"] and fragment in payload["description"]
    assert "Example:" in payload["description"]
    assert payload["attempted_query"]["tool"] == "search_orders"
    for name, value in sent.items():
        assert payload["attempted_query"]["arguments"][name] == value


async def test_get_order_returns_the_order_with_its_items(server: MCPServer) -> None:
    result = await call(server, "get_order", {"order_id": "ORD-10023"})
    payload = wire(result)
    assert result.is_error is False and payload["resultCount"] == 1 and payload["truncated"] is False
    (order,) = payload["results"]
    assert order["id"] == "ORD-10023" and order["customer_id"] == "CUST-00042"
    assert [item["sku"] for item in order["items"]] == ["SKU-4417-BLK"]
    listed = wire(await call(server, "search_orders", {"customer_id": "CUST-00042", "sku": "SKU-4417-BLK"}))
    assert listed["results"] == [order]  # the same record either way


async def test_an_unknown_order_is_a_valid_empty_result(server: MCPServer) -> None:
    result = await call(server, "get_order", {"order_id": "ORD-99999"})
    assert empty_message(result) == (
        "No order ORD-99999 exists. The query executed successfully and returned no matches."
    )


@pytest.mark.parametrize("order_id", ["ord-10023", "10023", "ORD-1002", "ORD-10023 "])
async def test_a_malformed_order_id_is_a_validation_error(server: MCPServer, order_id: str) -> None:
    result = await call(server, "get_order", {"order_id": order_id})
    payload = wire(result)
    assert result.is_error is True and payload["errorCategory"] == "validation"
    assert "Argument 'order_id'" in payload["description"] and "ORD-10023" in payload["description"]
    assert payload["attempted_query"] == {"tool": "get_order", "arguments": {"order_id": order_id}}
