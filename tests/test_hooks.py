"""The hooks: long results trimmed with the cut said, and nothing secret or personal headed for traces."""

from __future__ import annotations

import random
from typing import Any

import anyio
import pytest

from sources import tickets
from sources.auth import issue_credential
from sources.settings import SourceSettings
from sources.store import Store
from sources.world import world_path
from subagents.broker import CredentialBroker
from subagents.connection import Connections
from subagents.hooks import RefundLimit, ToolCall, TrimResults, redact
from subagents.subagent import Runtime, Task, run_subagent
from tests.conftest import TEST_KEY
from tests.fakes import FakeClock

pytestmark = pytest.mark.anyio


async def test_long_ticket_bodies_are_trimmed_before_anyone_reads_them(settings: SourceSettings) -> None:
    store = Store(world_path(settings.data_dir, settings.seed) / "tickets.db")
    longest = store.row(
        "SELECT id, customer_id, length(body) AS size FROM tickets ORDER BY size DESC LIMIT 1"
    )
    assert longest is not None
    server = tickets.create_server(settings)
    clock = FakeClock()
    with anyio.fail_after(30):
        async with Connections.opened({"tickets": lambda: server}) as connections:
            runtime = Runtime(
                connections=connections, broker=CredentialBroker(TEST_KEY), clock=clock, rng=random.Random(1),
                post_call=(TrimResults(max_chars=300),),
            )  # fmt: skip
            task = Task(
                "t", "tickets", "search_tickets", {"customer_id": longest["customer_id"], "limit": 100}
            )
            report = await run_subagent(task, runtime, deadline=clock.now() + 30)
    assert report.state == "ok"
    trimmed = next(ticket["body"] for ticket in report.results if ticket["id"] == longest["id"])
    assert trimmed.endswith(f"… [trimmed from {longest['size']} characters]")
    assert len(trimmed) < 400 and all(len(ticket["body"]) < 400 for ticket in report.results)


def test_trimming_caps_the_number_of_records_and_says_so() -> None:
    from sources.contract import ResultPage
    from subagents.classify import Outcome
    from subagents.hooks import ToolCall

    page = ResultPage[Any](result_count=5, results=[{"id": str(i), "text": "x" * 50} for i in range(5)])
    trimmed = TrimResults(max_chars=10, max_results=3)(ToolCall("s", "t", {}, 1), Outcome("ok", page))
    result = trimmed.result
    assert isinstance(result, ResultPage) and result.result_count == 3 and result.truncated is True
    assert result.results[0]["text"] == "x" * 10 + "… [trimmed from 50 characters]"


def test_redaction_removes_credentials_and_personal_data() -> None:
    token = issue_credential(TEST_KEY, "agent", ["billing:read"])
    payload = {
        "arguments": {"identifier": "jane.doe@example.com", "amount": 750},
        "meta": {"research-coordinator/credential": token},
        "results": [
            {"id": "CUST-00042", "email": "jane.doe@example.com", "name": "Jane Doe", "tier": "gold"}
        ],
        "description": f"No customer matches jane.doe@example.com (sent with {token}).",
    }
    clean = redact(payload)
    text = str(clean)
    assert "jane.doe" not in text and "Jane Doe" not in text and token not in text
    assert clean["results"][0]["id"] == "CUST-00042" and clean["results"][0]["tier"] == "gold"
    assert clean["arguments"]["amount"] == 750
    assert clean["meta"]["research-coordinator/credential"] == "[redacted credential]"


@pytest.mark.parametrize("amount", ["750", None, True, float("nan"), float("inf"), -5, 0, [750]])
def test_the_refund_limit_fails_closed_on_an_amount_it_cannot_read(amount: object) -> None:
    call = ToolCall("billing", "issue_refund", {"order_id": "ORD-10023", "amount": amount}, attempt=1)
    blocked = RefundLimit()(call)
    assert blocked is not None and blocked.error_category == "validation"
    assert "Blocked before sending" in blocked.description and blocked.attempted_query is not None


@pytest.mark.parametrize(("amount", "sent"), [(45, True), (500.0, True), (500.01, False)])
def test_the_refund_limit_lets_readable_amounts_within_it_go(amount: float, sent: bool) -> None:
    call = ToolCall("billing", "issue_refund", {"order_id": "ORD-10023", "amount": amount}, attempt=1)
    assert (RefundLimit()(call) is None) is sent
