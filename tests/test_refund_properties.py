"""Property: whatever refunds arrive, however many at once and however often retried, no order is
refunded automatically above the £500 limit or above what was paid, and no refund is paid twice.

Real billing, in memory, through the mcp Client; the tool bodies run on worker threads, so the
calls of a batch really race on the database. Each example starts from a pristine copy of the world.
"""

from __future__ import annotations

import dataclasses
import shutil
import tempfile
from pathlib import Path
from typing import Any

import anyio
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from mcp import Client

from sources import billing
from sources.domain import AUTOMATIC_REFUND_LIMIT
from sources.settings import SourceSettings
from sources.store import Store
from sources.world import ensure_world, world_path
from tests.conftest import credential, wire

REFUND = credential("billing:read", "billing:refund")
PAID = {"ORD-10008": 64.5, "ORD-10023": 750.0, "ORD-10031": 45.0}  # CUST-00042's paid invoices

# One refund: an order, an amount in pence, and which of a few keys it uses (so keys get reused,
# with the same arguments, a retry, or with others, a mistake).
Refund = tuple[str, int, int]
pence = st.integers(1, 60_000) | st.sampled_from([4_500, 25_000, 35_000, 40_000, 49_999, 50_000, 50_001])
refunds = st.tuples(st.sampled_from(sorted(PAID)), pence, st.integers(0, 9))
batches = st.lists(st.lists(refunds, min_size=1, max_size=6), min_size=1, max_size=4)


@pytest.fixture(scope="module")
def pristine(tmp_path_factory: pytest.TempPathFactory) -> Path:
    data_dir = tmp_path_factory.mktemp("pristine")
    ensure_world(data_dir, 42)
    return data_dir


async def _issue(client: Client, refund: Refund, run: str) -> dict[str, Any]:
    order, pence, key = refund
    arguments = {"order_id": order, "amount": pence / 100, "idempotency_key": f"{run}-key-{key}"}
    with anyio.fail_after(30):
        return wire(await client.call_tool("issue_refund", arguments, read_timeout_seconds=30, meta=REFUND))


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
@given(plan=batches)
def test_refunds_never_pass_the_limit_or_the_amount_paid_nor_pay_twice(
    settings: SourceSettings, pristine: Path, plan: list[list[Refund]]
) -> None:
    with tempfile.TemporaryDirectory() as data_dir:
        shutil.copytree(world_path(pristine, 42), world_path(Path(data_dir), 42))
        world = dataclasses.replace(settings, data_dir=Path(data_dir), seed=42)
        answers = anyio.run(_run, billing.create_server(world), plan)
        rows = Store(world_path(Path(data_dir), 42) / "billing.db").rows("SELECT * FROM refunds")
    mine = [row for row in rows if row["idempotency_key"].startswith("prop-")]
    for order, paid in PAID.items():
        total = round(sum(row["amount"] for row in mine if row["order_id"] == order), 2)
        assert total <= min(AUTOMATIC_REFUND_LIMIT, paid), (order, total)
    keys = [row["idempotency_key"] for row in mine]
    assert len(keys) == len(set(keys))  # no key paid twice
    issued = [answer for answer in answers if answer.get("resultCount") == 1]
    assert len({answer["results"][0]["id"] for answer in issued}) == len(mine)  # replays pay nothing new
    for (
        answer
    ) in answers:  # every refusal is the contract's: business (the rules) or validation (a reused key)
        if answer.get("isError"):
            assert answer["errorCategory"] in ("business", "validation"), answer
