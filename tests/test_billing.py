"""Billing through the mcp Client: scopes, the £500 automatic limit, idempotent refunds."""

from __future__ import annotations

import dataclasses
import uuid
from collections.abc import Callable
from pathlib import Path

import pytest
from mcp.server import MCPServer

from sources import billing
from sources.settings import SourceSettings
from tests.conftest import call, credential, wire

pytestmark = pytest.mark.anyio

READ = credential("billing:read")
REFUND = credential("billing:read", "billing:refund")


@pytest.fixture
def server(server_for: Callable[..., MCPServer]) -> MCPServer:
    return server_for("billing")


@pytest.mark.parametrize(
    ("tool", "arguments", "scope"),
    [
        ("list_invoices", {"customer_id": "CUST-00042"}, "billing:read"),
        ("refund_eligibility", {"order_id": "ORD-10031", "amount": 45}, "billing:read"),
        (
            "issue_refund",
            {"order_id": "ORD-10031", "amount": 5, "idempotency_key": "no-scope-0001"},
            "billing:refund",
        ),
    ],
)
async def test_financial_records_need_a_scope(
    server: MCPServer, tool: str, arguments: dict, scope: str
) -> None:
    result = await call(server, tool, arguments)
    payload = wire(result)
    assert result.is_error is True
    assert payload["errorCategory"] == "permission" and payload["isRetryable"] is False
    assert f"'{scope}'" in payload["description"]
    assert payload["attempted_query"] == {"tool": tool, "arguments": arguments}


async def test_invoices_with_the_scope(server: MCPServer) -> None:
    payload = wire(await call(server, "list_invoices", {"customer_id": "CUST-00042"}, READ))
    assert {invoice["order_id"] for invoice in payload["results"]} == {"ORD-10008", "ORD-10023", "ORD-10031"}
    assert all(isinstance(invoice["refunded"], float) for invoice in payload["results"])


async def test_no_invoices_is_a_valid_empty_result(server: MCPServer) -> None:
    result = await call(server, "list_invoices", {"customer_id": "CUST-00077"}, READ)
    assert result.is_error is False and wire(result)["resultCount"] == 0


async def test_a_refund_within_the_limit_is_eligible(server: MCPServer) -> None:
    payload = wire(await call(server, "refund_eligibility", {"order_id": "ORD-10031", "amount": 45}, READ))
    (assessment,) = payload["results"]
    assert assessment["eligible"] is True and assessment["automatic_limit"] == 500.0


async def test_750_above_the_limit_is_a_business_error_with_the_assessment(server: MCPServer) -> None:
    result = await call(server, "refund_eligibility", {"order_id": "ORD-10023", "amount": 750}, READ)
    payload = wire(result)
    assert result.is_error is True
    assert payload["errorCategory"] == "business" and payload["isRetryable"] is False
    assert "£500.00 automatic limit" in payload["description"] and "manager" in payload["description"]
    (assessment,) = payload["partial_results"]
    assert assessment["id"] == "ORD-10023" and assessment["paid"] == 750.0 and assessment["eligible"] is False
    assert payload["attempted_query"] == {
        "tool": "refund_eligibility",
        "arguments": {"order_id": "ORD-10023", "amount": 750},
    }


async def test_the_server_refuses_to_issue_a_refund_above_the_limit(server: MCPServer) -> None:
    arguments = {"order_id": "ORD-10023", "amount": 750, "idempotency_key": "over-limit-0001"}
    payload = wire(await call(server, "issue_refund", arguments, REFUND))
    assert payload["errorCategory"] == "business"
    invoices = wire(await call(server, "list_invoices", {"customer_id": "CUST-00042"}, READ))
    assert next(i for i in invoices["results"] if i["order_id"] == "ORD-10023")["refunded"] == 0.0


async def test_an_unknown_order_has_nothing_to_assess(server: MCPServer) -> None:
    result = await call(server, "refund_eligibility", {"order_id": "ORD-99999", "amount": 10}, READ)
    assert result.is_error is False and wire(result)["resultCount"] == 0


async def test_issue_refund_is_idempotent_by_key(server: MCPServer) -> None:
    key = f"test-{uuid.uuid4().hex[:12]}"
    arguments = {"order_id": "ORD-10008", "amount": 10.5, "idempotency_key": key}
    first = wire(await call(server, "issue_refund", arguments, REFUND))
    again = wire(await call(server, "issue_refund", arguments, REFUND))
    assert first["results"][0]["replayed"] is False and again["results"][0]["replayed"] is True
    assert first["results"][0]["id"] == again["results"][0]["id"]
    assert first["results"][0]["issued_by"] == "research-agent"
    invoices = wire(await call(server, "list_invoices", {"customer_id": "CUST-00042"}, READ))
    assert next(i for i in invoices["results"] if i["order_id"] == "ORD-10008")["refunded"] == 10.5

    reused = wire(await call(server, "issue_refund", {**arguments, "amount": 11}, REFUND))
    assert reused["errorCategory"] == "validation" and "already used" in reused["description"]


async def test_a_refund_above_the_balance_is_a_business_error(server: MCPServer) -> None:
    arguments = {"order_id": "ORD-10031", "amount": 46, "idempotency_key": f"test-{uuid.uuid4().hex[:12]}"}
    payload = wire(await call(server, "issue_refund", arguments, REFUND))
    assert payload["errorCategory"] == "business" and "refundable balance" in payload["description"]


@pytest.mark.parametrize(
    ("amount", "fragment"),
    [(0, "greater than 0"), (-5, "greater than 0"), (12.345, "two decimals"), ("45", "a number")],
)
async def test_bad_amounts_are_validation_errors(server: MCPServer, amount: object, fragment: str) -> None:
    payload = wire(
        await call(server, "refund_eligibility", {"order_id": "ORD-10031", "amount": amount}, READ)
    )
    assert payload["errorCategory"] == "validation" and "Argument 'amount'" in payload["description"]
    assert fragment in payload["description"]


async def test_the_automatic_limit_is_per_order_over_all_its_refunds(
    settings: SourceSettings, tmp_path: Path
) -> None:
    """£400 then £350 on a £750 order: the second would take the order to £750, above £500 (a manager's)."""
    fresh = billing.create_server(dataclasses.replace(settings, data_dir=tmp_path))  # refunds of its own

    def refund(amount: float) -> dict[str, object]:
        return {"order_id": "ORD-10023", "amount": amount, "idempotency_key": f"test-{uuid.uuid4().hex[:12]}"}

    first = wire(await call(fresh, "issue_refund", refund(400), REFUND))
    assert first["resultCount"] == 1
    before = wire(await call(fresh, "refund_eligibility", {"order_id": "ORD-10023", "amount": 350}, READ))
    second = wire(await call(fresh, "issue_refund", refund(350), REFUND))
    for refused in (before, second):  # asked before the fact or tried, the same answer
        assert (
            refused["errorCategory"] == "business" and "automatic limit per order" in refused["description"]
        )
        assert "Escalate to a manager" in refused["description"]
        (assessment,) = refused["partial_results"]
        assert assessment["already_refunded"] == 400 and assessment["eligible"] is False
    assert wire(await call(fresh, "issue_refund", refund(100), REFUND))["resultCount"] == 1  # £500 in all
    assert wire(await call(fresh, "issue_refund", refund(0.01), REFUND))["errorCategory"] == "business"
