"""The hooks: long results trimmed with the cut said, and nothing secret or personal headed for traces."""

from __future__ import annotations

import dataclasses
import random
from pathlib import Path
from typing import Any

import anyio
import pytest

from sources import billing, tickets
from sources.contract import ErrorCategory, ResultPage, ToolError
from sources.refund_rules import RefundLimit, refund_guard
from sources.security.auth import issue_credential
from sources.settings import SourceSettings
from sources.store import Store
from sources.world import world_path
from subagents.broker import CredentialBroker
from subagents.classify import Outcome
from subagents.hooks import ToolCall, TrimResults, redact
from subagents.sessions.connection import Connections
from subagents.subagent import Runtime, Task, run_subagent
from tests.conftest import TEST_KEY, call, credential, wire
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
    token = issue_credential(TEST_KEY, "agent", ["billing:read"], source="billing")
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


# --- the refund limit with what billing said: the order's refunds and its window --------------------


def _billing(tool: str, arguments: dict[str, Any]) -> ToolCall:
    return ToolCall("billing", tool, arguments, attempt=1)


def _assessment(order: str, already: float, **extra: Any) -> dict[str, Any]:
    return {"id": order, "requested": 10.0, "already_refunded": already, "refund_window_days": 60, **extra}


def _refund(order: str, amount: float, key: str) -> ToolCall:
    return _billing("issue_refund", {"order_id": order, "amount": amount, "idempotency_key": key})


def test_without_a_ledger_the_hook_sees_only_the_call() -> None:
    assert RefundLimit()(_refund("ORD-10023", 150, "k-1")) is None  # billing holds the order's total


def test_the_hook_blocks_what_would_take_the_orders_reported_refunds_above_the_limit() -> None:
    limit, ledger = refund_guard()
    page = ResultPage[Any](result_count=1, results=[_assessment("ORD-10023", 400.0, eligible=True)])
    ledger(_billing("refund_eligibility", {"order_id": "ORD-10023", "amount": 10}), Outcome("ok", page))
    blocked = limit(_refund("ORD-10023", 150, "k-1"))
    assert blocked is not None and blocked.error_category == "business"
    assert blocked.description == (
        "Blocked before sending: with £400.00 already refunded on ORD-10023 (as billing reported), a refund "
        "of £150.00 would take it to £550.00, above the £500.00 automatic limit per order. Escalate to a "
        "manager with the refund details (KB-ESCALATION)."
    )
    assert blocked.attempted_query is not None and blocked.attempted_query.arguments["amount"] == 150
    assert limit(_refund("ORD-10023", 100, "k-2")) is None  # £500 in all: billing decides the rest
    assert limit(_refund("ORD-10031", 150, "k-3")) is None  # nothing known of another order


def test_the_ledger_learns_from_refusals_invoices_and_refunds_and_never_counts_one_twice() -> None:
    limit, ledger = refund_guard()
    refused = ToolError.of(
        ErrorCategory.BUSINESS, "refused", partial_results=[_assessment("ORD-10023", 100.0, eligible=False)]
    )
    ledger(_billing("issue_refund", {}), Outcome("error", refused))
    invoices = ResultPage[Any](
        result_count=2,
        results=[{"order_id": "ORD-10023", "refunded": 50.0}, {"order_id": "ORD-10008", "refunded": 20.0}],
    )
    ledger(_billing("list_invoices", {"customer_id": "CUST-00042"}), Outcome("ok", invoices))
    issued = {"order_id": "ORD-10023", "amount": 300.0, "idempotency_key": "k-1", "replayed": False}
    for answered in (issued, {**issued, "replayed": True}):  # the answer, then a replay of it
        page = ResultPage[Any](result_count=1, results=[{**answered, "order_refunded": 400.0}])
        ledger(_refund("ORD-10023", 300, "k-1"), Outcome("ok", page))
    assert ledger.refunded == {"ORD-10023": 400.0, "ORD-10008": 20.0}  # the largest total reported
    assert limit(_refund("ORD-10023", 300, "k-1")) is None  # the same call again: a replay, billing's
    assert limit(_refund("ORD-10023", 100.01, "k-2")) is not None
    # Another source's records say nothing about refunds.
    other = ResultPage[Any](result_count=1, results=[{"order_id": "ORD-10031", "refunded": 499.0}])
    ledger(ToolCall("orders", "search_orders", {}, attempt=1), Outcome("ok", other))
    assert "ORD-10031" not in ledger.refunded


def test_the_hook_blocks_a_refund_on_an_order_billing_said_is_outside_the_window() -> None:
    limit, ledger = refund_guard()
    late = _assessment("ORD-12460", 0.0, eligible=False, delivered_on="2026-07-23", days_since_delivery=101)
    ledger(
        _billing("refund_eligibility", {"order_id": "ORD-12460", "amount": 10}),
        Outcome("error", ToolError.of(ErrorCategory.BUSINESS, "refused", partial_results=[late])),
    )
    blocked = limit(_refund("ORD-12460", 1, "k-1"))
    assert blocked is not None and blocked.error_category == "business"
    assert blocked.description == (
        "Blocked before sending: billing reported ORD-12460 delivered on 2026-07-23, 101 days ago, outside "
        "the 60-day refund window (KB-REFUNDS). Escalate to a manager with the refund details (KB-ESCALATION)."
    )
    inside = _assessment("ORD-10031", 0.0, eligible=True, delivered_on="2026-09-02", days_since_delivery=60)
    ledger(
        _billing("refund_eligibility", {}), Outcome("ok", ResultPage[Any](result_count=1, results=[inside]))
    )
    assert limit(_refund("ORD-10031", 1, "k-2")) is None  # the last day is inside the window


async def test_a_subagent_that_was_told_the_orders_refunds_does_not_send_one_above_the_limit(
    settings: SourceSettings, tmp_path: Path
) -> None:
    """Billing reported £400 refunded on ORD-10023 and ORD-12460 outside the window; the refunds that
    break a rule by what it said are blocked in the process, and billing's refunds stay as they were."""
    own = dataclasses.replace(settings, data_dir=tmp_path)  # refunds of its own
    server = billing.create_server(own)
    meta = credential("billing:read", "billing:refund", source="billing")
    first = {"order_id": "ORD-10023", "amount": 400, "idempotency_key": "hooks-first-400"}
    assert wire(await call(server, "issue_refund", first, meta))["resultCount"] == 1
    limit, ledger = refund_guard()
    clock = FakeClock()
    tasks = [
        Task("ask", "billing", "refund_eligibility", {"order_id": "ORD-10023", "amount": 50}),
        Task("refund", "billing", "issue_refund", {"order_id": "ORD-10023", "amount": 150, "idempotency_key": "hooks-150"}),
        Task("ask-late", "billing", "refund_eligibility", {"order_id": "ORD-12460", "amount": 10}),
        Task("refund-late", "billing", "issue_refund", {"order_id": "ORD-12460", "amount": 10, "idempotency_key": "hooks-late"}),
    ]  # fmt: skip
    with anyio.fail_after(30):
        async with Connections.opened({"billing": lambda: server}) as connections:
            runtime = Runtime(
                connections=connections, clock=clock, rng=random.Random(1), pre_call=(limit,),
                broker=CredentialBroker(TEST_KEY, base_scopes=frozenset({"billing:read", "billing:refund"})),
                post_call=(ledger, TrimResults()),
            )  # fmt: skip
            reports = {
                task.id: await run_subagent(task, runtime, deadline=clock.now() + 30) for task in tasks
            }
    assert reports["ask"].state == "ok" and reports["ask-late"].state == "escalated"  # billing's answers
    for blocked in (reports["refund"], reports["refund-late"]):
        assert blocked.state == "escalated" and blocked.attempts == 0
        assert [decision.action for decision in blocked.decisions] == ["hook_blocked"]
        assert blocked.message is not None and blocked.message.startswith("Blocked before sending: ")
    assert "£550.00, above the £500.00 automatic limit per order" in (reports["refund"].message or "")
    assert "101 days ago, outside the 60-day refund window" in (reports["refund-late"].message or "")
    rows = Store(world_path(tmp_path, own.seed) / "billing.db").rows("SELECT idempotency_key FROM refunds")
    assert rows == [{"idempotency_key": "hooks-first-400"}]


@pytest.fixture(params=["asyncio", "trio"])
def anyio_backend(request: pytest.FixtureRequest) -> str:
    """The hooks run inside the subagent, which is written for anyio: both backends."""
    return str(request.param)


async def test_a_write_is_made_only_as_the_question_asks_for_it(
    settings: SourceSettings, tmp_path: Path
) -> None:
    """Every refund is approved here, so the write guard alone decides: a question that only asks
    whether a refund is allowed makes none; research that found an order makes none on it; a request
    makes the one write it asks, on the order it names positively, within its amount, once (a resend
    of the same call by its key is the same write)."""
    from coordinator.planning.writes import asked_writes
    from coordinator.registry import Registry
    from coordinator.runtime import build_runtime
    from sources import orders
    from subagents.writes import Approval

    own = dataclasses.replace(settings, data_dir=tmp_path)  # refunds of its own
    servers = {"billing": billing.create_server(own), "orders": orders.create_server(own)}

    async def run(question: str, tasks: list[Task]) -> dict[str, Any]:
        clock = FakeClock()
        async with Connections.opened(
            {name: (lambda s=server: s) for name, server in servers.items()}
        ) as opened:
            runtime = build_runtime(
                opened, CredentialBroker(TEST_KEY, base_scopes=frozenset({"billing:read", "billing:refund", "orders:read"})),
                registry=Registry(None), data_dir=tmp_path, asked=asked_writes(question).writes,
                approvals=(Approval("issue_refund"),), clock=clock, seed=1,
            )  # fmt: skip
            return {task.id: await run_subagent(task, runtime, deadline=clock.now() + 30) for task in tasks}

    def refund(order: str, key: str, amount: float = 5) -> Task:
        return Task(
            key, "billing", "issue_refund", {"order_id": order, "amount": amount, "idempotency_key": key}
        )

    with anyio.fail_after(60):
        whether = await run("can we refund £5 on ORD-10031?", [
            Task("lookup", "orders", "get_order", {"order_id": "ORD-10134"}),
            refund("ORD-10031", "guard-whether"),
            refund("ORD-10134", "guard-unnamed"),
        ])  # fmt: skip
        found = await run("what can we do for CUST-00042 about their orders?", [
            Task("orders", "orders", "search_orders", {"customer_id": "CUST-00042"}),
            refund("ORD-10008", "guard-found"),
        ])  # fmt: skip
        asked = await run("Refund £5 on ORD-10031 please. This is not about ORD-10134.", [
            refund("ORD-10134", "guard-negated"),
            refund("ORD-10031", "guard-more", amount=6),
            refund("ORD-10031", "guard-asked"),
            refund("ORD-10031", "guard-asked"),  # the same call again: the same write, replayed by its key
            refund("ORD-10031", "guard-twice"),
        ])  # fmt: skip
    assert whether["lookup"].state == "ok" and found["orders"].state == "ok"  # a read is a read
    blocked = [
        whether["guard-whether"],
        whether["guard-unnamed"],
        found["guard-found"],
        asked["guard-negated"],
    ]
    for report in [*blocked, asked["guard-more"], asked["guard-twice"]]:
        assert report.state == "escalated" and report.attempts == 0, report
        assert [decision.action for decision in report.decisions] == ["hook_blocked"]
    for report in blocked:
        assert "the question did not ask for this write" in (report.message or ""), report.message
    assert "the question did not ask for this write" in (asked["guard-more"].message or "")  # £6 > £5
    assert "already made by another call" in (asked["guard-twice"].message or "")
    assert asked["guard-asked"].state == "ok"
    rows = Store(world_path(tmp_path, own.seed) / "billing.db").rows(
        "SELECT order_id, idempotency_key FROM refunds"
    )
    assert rows == [{"order_id": "ORD-10031", "idempotency_key": "guard-asked"}]


LEFT_OUT_QUESTIONS = [  # (question, the record it names only to leave out)
    ("Refund £5 on ORD-10031 please. This is not about ORD-10134.", "ORD-10134"),
    ("orders of CUST-00042, except ORD-10008", "ORD-10008"),
    ("tickets of jane.doe@example.com, not CUST-00007's", "CUST-00007"),
    ("what about ORD-10023? ignore john.smith@example.com", "john.smith@example.com"),
]


@pytest.mark.parametrize(("question", "record"), LEFT_OUT_QUESTIONS)
def test_no_call_names_a_record_the_question_leaves_out(question: str, record: str) -> None:
    """Whoever chose the call (a model's plan, a repair, a model steered by a source's text), one that
    names a record the question leaves out is blocked before it leaves, in any spelling of its case and
    wherever among the arguments; a record that only contains it, or another, goes."""
    from coordinator.planning.planner import left_out
    from subagents.hooks import LeftOut

    records = left_out(question)
    assert set(records) == {record}, records
    hook = LeftOut(records)
    for arguments in (
        {"order_id": record},
        {"identifier": record.lower()},
        {"query": f"anything on {record.upper()}, please"},
        {"ids": ["ORD-10031", record]},
        {"filter": {"nested": [record]}},
    ):
        blocked = hook(ToolCall("orders", "get_order", arguments, attempt=1))
        assert blocked is not None and blocked.error_category == ErrorCategory.BUSINESS, arguments
        assert f"{record}: the question names it only to leave it out" in blocked.description
    for arguments in ({"order_id": "ORD-10031"}, {"query": f"{record}9"}, {"query": f"X{record}"}, {}):
        assert hook(ToolCall("orders", "get_order", arguments, attempt=1)) is None, arguments


def test_a_record_the_question_also_asks_about_is_not_left_out() -> None:
    from coordinator.planning.planner import left_out

    assert left_out("ORD-10031 and ORD-10134, but not ORD-10134's tickets") == {}
    assert left_out("orders of CUST-00042") == {}


async def test_a_subagent_never_sends_a_call_on_a_record_the_question_leaves_out(
    settings: SourceSettings, tmp_path: Path
) -> None:
    """The runtime a question's run builds holds the hook: a task on the record left out ends
    escalated with no attempt made, the message saying why; the same read on another record runs."""
    from coordinator.planning.planner import left_out
    from coordinator.registry import Registry
    from coordinator.runtime import build_runtime
    from sources import orders

    question = "what about ORD-10031? this is not about ORD-10134"
    clock = FakeClock()
    async with Connections.opened({"orders": lambda: orders.create_server(settings)}) as opened:
        runtime = build_runtime(
            opened, CredentialBroker(TEST_KEY, base_scopes=frozenset({"orders:read"})), registry=Registry(None),
            data_dir=tmp_path, asked=(), approvals=(), left_out=left_out(question), clock=clock, seed=1,
        )  # fmt: skip
        with anyio.fail_after(30):
            other = await run_subagent(
                Task("other", "orders", "get_order", {"order_id": "ord-10134"}),
                runtime,
                deadline=clock.now() + 30,
            )
            asked = await run_subagent(Task("asked", "orders", "get_order", {"order_id": "ORD-10031"}), runtime, deadline=clock.now() + 30)  # fmt: skip
    assert other.state == "escalated" and other.attempts == 0, other
    assert [decision.action for decision in other.decisions] == ["hook_blocked"]
    assert "ORD-10134: the question names it only to leave it out ('not about ORD-10134')" in (
        other.message or ""
    ), other.message
    assert asked.state == "ok" and asked.results
