"""Property: whatever refunds arrive, however many at once and however often retried, and on whatever
day, no order is refunded automatically above the £500 limit or above what was paid, no refund is
issued more than 60 days after its order's delivery, and no refund is paid twice.

Real billing, in memory, through the mcp Client; the tool bodies run on worker threads, so the
calls of a batch really race on the database. Each example starts from a pristine copy of the world.
"""

from __future__ import annotations

import dataclasses
import shutil
import tempfile
from datetime import date, timedelta
from pathlib import Path
from typing import Any

import anyio
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from mcp import Client

from sources import billing
from sources.domain import AUTOMATIC_REFUND_LIMIT, TODAY, within_refund_window
from sources.settings import SourceSettings
from sources.store import Store
from sources.world import ensure_world, world_path
from tests.conftest import credential, wire

# CUST-00042's paid invoices, and the story's order delivered 101 days before the world's today.
PAID = {"ORD-10008": 64.5, "ORD-10023": 750.0, "ORD-10031": 45.0, "ORD-12460": 129.0}

# One refund: an order, an amount in pence, and which of a few keys it uses (so keys get reused,
# with the same arguments, a retry, or with others, a mistake).
Refund = tuple[str, int, int]
pence = st.integers(1, 60_000) | st.sampled_from([4_500, 25_000, 35_000, 40_000, 49_999, 50_000, 50_001])
refunds = st.tuples(st.sampled_from(sorted(PAID)), pence, st.integers(0, 9))
batches = st.lists(st.lists(refunds, min_size=1, max_size=6), min_size=1, max_size=4)
# Billing's today, days after the world's: each story order's window closes in this range (the last
# day inside it and the first outside: ORD-10008 at 15/16, ORD-10023 at 42/43, ORD-10031 at 50/51).
days_later = st.integers(0, 90) | st.sampled_from([15, 16, 42, 43, 50, 51])


@pytest.fixture(scope="module")
def pristine(tmp_path_factory: pytest.TempPathFactory) -> Path:
    data_dir = tmp_path_factory.mktemp("pristine")
    ensure_world(data_dir, 42)
    return data_dir


async def _issue(client: Client, refund: Refund, run: str) -> dict[str, Any]:
    order, pence, key = refund
    arguments = {"order_id": order, "amount": pence / 100, "idempotency_key": f"{run}-key-{key}"}
    meta = credential("billing:read", "billing:refund", source="billing")  # fresh: credentials live minutes
    with anyio.fail_after(30):
        return wire(await client.call_tool("issue_refund", arguments, read_timeout_seconds=30, meta=meta))


async def _run(server: Any, plan: list[list[Refund]]) -> list[dict[str, Any]]:
    answers: list[dict[str, Any]] = []
    async with Client(server, read_timeout_seconds=30) as client:
        for batch in plan:  # each batch at once: concurrent callers
            async with anyio.create_task_group() as group:
                for refund in batch:

                    async def one(refund: Refund = refund) -> None:
                        answers.append(await _issue(client, refund, "prop"))

                    group.start_soon(one)
    return answers


@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(plan=batches, later=days_later)
def test_refunds_never_pass_the_limit_the_amount_paid_or_the_window_nor_pay_twice(
    settings: SourceSettings, pristine: Path, plan: list[list[Refund]], later: int
) -> None:
    today = TODAY + timedelta(days=later)
    with tempfile.TemporaryDirectory() as data_dir:
        shutil.copytree(world_path(pristine, 42), world_path(Path(data_dir), 42))
        world = dataclasses.replace(settings, data_dir=Path(data_dir), seed=42)
        answers = anyio.run(_run, billing.create_server(world, today=today), plan)
        store = Store(world_path(Path(data_dir), 42) / "billing.db")
        rows = store.rows("SELECT * FROM refunds")
        delivered = {row["order_id"]: row["delivered_on"] for row in store.rows("SELECT * FROM invoices")}
    mine = [row for row in rows if row["idempotency_key"].startswith("prop-")]
    for order, paid in PAID.items():
        total = round(sum(row["amount"] for row in mine if row["order_id"] == order), 2)
        assert total <= min(AUTOMATIC_REFUND_LIMIT, paid), (order, total)
    for row in mine:  # each on billing's day, within its order's window
        assert row["issued_on"] == today.isoformat(), row
        assert within_refund_window(delivered[row["order_id"]], date.fromisoformat(row["issued_on"])), row
    keys = [row["idempotency_key"] for row in mine]
    assert len(keys) == len(set(keys))  # no key paid twice
    issued = [answer for answer in answers if answer.get("resultCount") == 1]
    assert len({answer["results"][0]["id"] for answer in issued}) == len(mine)  # replays pay nothing new
    for (
        answer
    ) in answers:  # every refusal is the contract's: business (the rules) or validation (a reused key)
        if answer.get("isError"):
            assert answer["errorCategory"] in ("business", "validation"), answer
