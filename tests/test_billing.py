"""Billing through the mcp Client: scopes, the £500 automatic limit, idempotent refunds."""

from __future__ import annotations

import dataclasses
import sqlite3
import time
import uuid
from collections.abc import Callable
from datetime import date, timedelta
from pathlib import Path

import anyio
import pytest
from mcp import Client
from mcp.server import MCPServer
from mcp.types import CallToolResult

from sources import billing
from sources.domain import REFUND_WINDOW_DAYS
from sources.settings import SourceSettings
from sources.store import READ_WAIT_S, WRITE_WAIT_S, Store
from sources.world import world_path
from tests.conftest import CALL_TIMEOUT, call, credential, private_settings, wire

pytestmark = pytest.mark.anyio


def read_credential() -> dict[str, str]:
    """A fresh credential for billing with ``billing:read`` (made per call: credentials live minutes)."""
    return credential("billing:read", source="billing")


def refund_credential() -> dict[str, str]:
    return credential("billing:read", "billing:refund", source="billing")


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
    payload = wire(await call(server, "list_invoices", {"customer_id": "CUST-00042"}, read_credential()))
    assert {invoice["order_id"] for invoice in payload["results"]} == {"ORD-10008", "ORD-10023", "ORD-10031"}
    assert all(isinstance(invoice["refunded"], float) for invoice in payload["results"])


async def test_no_invoices_is_a_valid_empty_result(server: MCPServer) -> None:
    result = await call(server, "list_invoices", {"customer_id": "CUST-00077"}, read_credential())
    assert result.is_error is False and wire(result)["resultCount"] == 0


async def test_a_refund_within_the_limit_is_eligible(server: MCPServer) -> None:
    payload = wire(
        await call(server, "refund_eligibility", {"order_id": "ORD-10031", "amount": 45}, read_credential())
    )
    (assessment,) = payload["results"]
    assert assessment["eligible"] is True and assessment["automatic_limit"] == 500.0


async def test_750_above_the_limit_is_a_business_error_with_the_assessment(server: MCPServer) -> None:
    result = await call(
        server, "refund_eligibility", {"order_id": "ORD-10023", "amount": 750}, read_credential()
    )
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
    payload = wire(await call(server, "issue_refund", arguments, refund_credential()))
    assert payload["errorCategory"] == "business"
    invoices = wire(await call(server, "list_invoices", {"customer_id": "CUST-00042"}, read_credential()))
    assert next(i for i in invoices["results"] if i["order_id"] == "ORD-10023")["refunded"] == 0.0


async def test_an_unknown_order_has_nothing_to_assess(server: MCPServer) -> None:
    result = await call(
        server, "refund_eligibility", {"order_id": "ORD-99999", "amount": 10}, read_credential()
    )
    assert result.is_error is False and wire(result)["resultCount"] == 0


async def test_issue_refund_is_idempotent_by_key(server: MCPServer) -> None:
    key = f"test-{uuid.uuid4().hex[:12]}"
    arguments = {"order_id": "ORD-10008", "amount": 10.5, "idempotency_key": key}
    first = wire(await call(server, "issue_refund", arguments, refund_credential()))
    again = wire(await call(server, "issue_refund", arguments, refund_credential()))
    assert first["results"][0]["replayed"] is False and again["results"][0]["replayed"] is True
    assert first["results"][0]["id"] == again["results"][0]["id"]
    assert first["results"][0]["issued_by"] == "research-agent"
    invoices = wire(await call(server, "list_invoices", {"customer_id": "CUST-00042"}, read_credential()))
    assert next(i for i in invoices["results"] if i["order_id"] == "ORD-10008")["refunded"] == 10.5

    reused = wire(await call(server, "issue_refund", {**arguments, "amount": 11}, refund_credential()))
    assert reused["errorCategory"] == "validation" and "already used" in reused["description"]


async def test_a_refund_above_the_balance_is_a_business_error(server: MCPServer) -> None:
    arguments = {"order_id": "ORD-10031", "amount": 46, "idempotency_key": f"test-{uuid.uuid4().hex[:12]}"}
    payload = wire(await call(server, "issue_refund", arguments, refund_credential()))
    assert payload["errorCategory"] == "business" and "refundable balance" in payload["description"]


@pytest.mark.parametrize(
    ("amount", "fragment"),
    [(0, "greater than 0"), (-5, "greater than 0"), (12.345, "two decimals"), ("45", "a number")],
)
async def test_bad_amounts_are_validation_errors(server: MCPServer, amount: object, fragment: str) -> None:
    payload = wire(
        await call(
            server, "refund_eligibility", {"order_id": "ORD-10031", "amount": amount}, read_credential()
        )
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

    first = wire(await call(fresh, "issue_refund", refund(400), refund_credential()))
    assert first["resultCount"] == 1
    before = wire(
        await call(fresh, "refund_eligibility", {"order_id": "ORD-10023", "amount": 350}, read_credential())
    )
    second = wire(await call(fresh, "issue_refund", refund(350), refund_credential()))
    for refused in (before, second):  # asked before the fact or tried, the same answer
        assert (
            refused["errorCategory"] == "business" and "automatic limit per order" in refused["description"]
        )
        assert "Escalate to a manager" in refused["description"]
        (assessment,) = refused["partial_results"]
        assert assessment["already_refunded"] == 400 and assessment["eligible"] is False
    assert (
        wire(await call(fresh, "issue_refund", refund(100), refund_credential()))["resultCount"] == 1
    )  # £500 in all
    assert (
        wire(await call(fresh, "issue_refund", refund(0.01), refund_credential()))["errorCategory"]
        == "business"
    )


# --- the refund window (KB-REFUNDS: within 60 days of delivery) ------------------------------------

LATE = "ORD-12460"  # the story's late order: delivered on 2026-07-23, 101 days before the world's today


@pytest.fixture(scope="module")
def own_settings(settings: SourceSettings, tmp_path_factory: pytest.TempPathFactory) -> SourceSettings:
    """A world of its own: the refunds these tests issue must not change what other tests read."""
    return dataclasses.replace(settings, data_dir=tmp_path_factory.mktemp("billing-window"))


def _key() -> str:
    return f"test-{uuid.uuid4().hex[:12]}"


def _refunds_with_key(settings: SourceSettings, key: str) -> list[dict[str, object]]:
    store = Store(world_path(settings.data_dir, settings.seed) / "billing.db")
    return store.rows("SELECT id FROM refunds WHERE idempotency_key = ?", (key,))


async def test_a_refund_inside_the_window_says_when_the_order_was_delivered(server: MCPServer) -> None:
    payload = wire(
        await call(server, "refund_eligibility", {"order_id": "ORD-10031", "amount": 45}, read_credential())
    )
    (assessment,) = payload["results"]
    assert assessment["eligible"] is True
    assert (assessment["delivered_on"], assessment["days_since_delivery"]) == ("2026-10-22", 10)
    assert assessment["refund_window_days"] == REFUND_WINDOW_DAYS == 60
    assert "the 60-day refund window (delivered on 2026-10-22, 10 days ago)" in assessment["reason"]


async def test_a_refund_outside_the_window_is_refused_the_same_before_and_at_the_fact(
    server: MCPServer,
) -> None:
    asked = {"order_id": LATE, "amount": 45}
    before = wire(await call(server, "refund_eligibility", asked, read_credential()))
    tried = wire(
        await call(server, "issue_refund", {**asked, "idempotency_key": _key()}, refund_credential())
    )
    for refused in (before, tried):
        assert refused["errorCategory"] == "business" and refused["isRetryable"] is False
        description = refused["description"]
        assert description.startswith(f"Refund of £45.00 on {LATE} is not allowed: ")
        assert (
            "delivered on 2026-07-23, 101 days ago, outside the 60-day refund window (KB-REFUNDS)"
            in description
        )
        assert description.endswith("Escalate to a manager with the refund details (KB-ESCALATION).")
        (assessment,) = refused["partial_results"]
        assert assessment["id"] == LATE and assessment["paid"] == 129.0 and assessment["eligible"] is False
        assert (assessment["delivered_on"], assessment["days_since_delivery"]) == ("2026-07-23", 101)
    assert (before["description"], before["partial_results"]) == (
        tried["description"],
        tried["partial_results"],
    )
    assert tried["attempted_query"]["tool"] == "issue_refund"
    (invoice,) = wire(await call(server, "list_invoices", {"customer_id": "CUST-00460"}, read_credential()))[
        "results"
    ]
    assert invoice["refunded"] == 0.0 and invoice["delivered_on"] == "2026-07-23"


@pytest.mark.parametrize(
    ("days", "allowed"),
    [(REFUND_WINDOW_DAYS - 1, True), (REFUND_WINDOW_DAYS, True), (REFUND_WINDOW_DAYS + 1, False)],
)
async def test_the_last_day_of_the_window_is_inside_it(
    own_settings: SourceSettings, days: int, allowed: bool
) -> None:
    """Delivered on D: "within 60 days of delivery" includes D + 60; D + 61 is outside.

    Billing's today is injected (the world's calendar, never the clock), so the boundary is exact.
    """
    delivered = date(2026, 10, 22)  # ORD-10031 (tests/test_world.py pins it)
    today = delivered + timedelta(days=days)
    server = billing.create_server(own_settings, today=today)
    asked, key = {"order_id": "ORD-10031", "amount": 1}, _key()
    before = wire(await call(server, "refund_eligibility", asked, read_credential()))
    tried = wire(await call(server, "issue_refund", {**asked, "idempotency_key": key}, refund_credential()))
    if allowed:
        (assessment,) = before["results"]
        assert assessment["eligible"] is True and assessment["days_since_delivery"] == days
        (refund,) = tried["results"]
        assert refund["issued_on"] == today.isoformat()  # the injected day
        assert len(_refunds_with_key(own_settings, key)) == 1
    else:
        for refused in (before, tried):
            assert refused["errorCategory"] == "business"
            assert f"delivered on 2026-10-22, {days} days ago, outside the 60-day" in refused["description"]
        assert _refunds_with_key(own_settings, key) == []


async def test_an_order_not_delivered_yet_may_be_refunded_its_window_not_started(
    own_settings: SourceSettings,
) -> None:
    server = billing.create_server(own_settings)  # writes the world on first use
    folder = world_path(own_settings.data_dir, own_settings.seed)
    undelivered = {
        row["id"]
        for row in Store(folder / "orders.db").rows(
            "SELECT id FROM orders WHERE status IN ('processing', 'shipped')"
        )
    }
    row = Store(folder / "billing.db").row(
        "SELECT order_id FROM invoices WHERE status = 'paid' AND delivered_on IS NULL AND amount >= 10 "
        "ORDER BY order_id LIMIT 1"
    )
    assert row is not None and row["order_id"] in undelivered
    asked = {"order_id": row["order_id"], "amount": 10}
    (assessment,) = wire(await call(server, "refund_eligibility", asked, read_credential()))["results"]
    assert assessment["eligible"] is True
    assert "delivered_on" not in assessment and "days_since_delivery" not in assessment  # none yet
    assert "not delivered yet: the window starts at delivery" in assessment["reason"]
    issued = wire(
        await call(server, "issue_refund", {**asked, "idempotency_key": _key()}, refund_credential())
    )
    assert issued["resultCount"] == 1 and issued["results"][0]["order_refunded"] == 10.0


async def test_a_refund_waiting_for_the_write_lock_holds_up_no_read(
    settings: SourceSettings, tmp_path: Path
) -> None:
    """A tool that writes runs on a worker thread: while it waits for another writer's lock, the
    source's reads (on its event loop) are answered, and the refund goes through once the lock is free."""
    own = private_settings(settings, tmp_path)  # the refund is real: in a world of its own
    server = billing.create_server(own)
    path = world_path(own.data_dir, own.seed) / "billing.db"
    refund = {"order_id": "ORD-10031", "amount": 5, "idempotency_key": "waits-for-the-lock-01"}
    answered: list[CallToolResult] = []
    async with (
        Client(server, read_timeout_seconds=CALL_TIMEOUT) as client,
        anyio.create_task_group() as group,
    ):
        with Store(path).transaction():  # another writer holds the write lock

            async def issue() -> None:
                answered.append(await call(client, "issue_refund", refund, refund_credential()))

            group.start_soon(issue)
            for _ in range(3):  # sent after the refund, answered while it waits
                read = await call(client, "list_invoices", {"customer_id": "CUST-00042"}, read_credential())
                assert read.is_error is False and wire(read)["resultCount"] > 0
            assert not answered  # the refund still waits for the lock
        # the lock is freed here; the refund then goes through
    (result,) = answered
    assert result.is_error is False and wire(result)["results"][0]["amount"] == 5


async def test_a_read_that_meets_a_stuck_writer_is_answered_busy_within_its_bound(
    server: MCPServer, settings: SourceSettings
) -> None:
    """A read runs on the event loop, so it waits for a commit at most READ_WAIT_S, then says the data
    store is busy (transient: retry), never stalling the source for the writer's five seconds."""
    path = world_path(settings.data_dir, settings.seed) / "billing.db"
    async with Client(server, read_timeout_seconds=CALL_TIMEOUT) as client:
        stuck = sqlite3.connect(path, isolation_level=None)
        stuck.execute("BEGIN EXCLUSIVE")  # a writer stuck in the middle of its commit: no one may read
        try:
            started = time.monotonic()
            result = await call(client, "list_invoices", {"customer_id": "CUST-00042"}, read_credential())
            waited = time.monotonic() - started
        finally:
            stuck.execute("ROLLBACK")
            stuck.close()
        payload = wire(result)
        assert result.is_error is True and payload["errorCategory"] == "transient", payload
        assert "data store is busy" in payload["description"] and payload["isRetryable"] is True
        assert READ_WAIT_S <= waited < WRITE_WAIT_S  # the read's bound, not the writer's
        again = await call(client, "list_invoices", {"customer_id": "CUST-00042"}, read_credential())
        assert again.is_error is False  # the lock gone, the retry is served
