"""Rounds in Claude mode (issue 45): the lead reads a round's findings and may add tasks that follow them.

Against the scripted Messages API on 127.0.0.1 (the real anthropic SDK) and the five real sources in
memory. What the lead may add is bounded in code, whatever it answers: rounds, tasks a round and a
query, record ids nobody found, writes the question did not ask for; a lead that fails ends the rounds
and the report keeps what was found.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import anyio
import pytest
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter

from coordinator.core import Config, Coordinator
from coordinator.lead_rounds import MOST_ADDED, MOST_ADDED_PER_ROUND
from coordinator.planning.rounds import MAX_ROUNDS
from coordinator.reporting.report import ResearchReport
from sources.settings import SourceSettings
from subagents.claude import ClaudeSettings
from tests.conftest import MODULES
from tests.fake_messages_api import Conversations, FakeMessagesApi, Reply, Silent, error, text_of, tool_use
from tests.fakes import FakeClock
from traces import attributes as names

pytestmark = pytest.mark.anyio

QUERY = "jane.doe@example.com: her orders, and could the £45 one be refunded?"
ORDERS_PLAN = {
    "tasks": [
        {"id": "customer", "source": "customers", "tool": "customer_lookup",
         "arguments": {"identifier": "jane.doe@example.com"}},
        {"id": "orders", "source": "orders", "tool": "search_orders",
         "arguments": {"customer_id": "{customer.id}"}, "depends_on": ["customer"]},
    ]
}  # fmt: skip


def added(*tasks: dict[str, Any], done: str = "") -> Reply:
    """The lead's answer to a round: the tasks it adds."""
    return tool_use({"tasks": list(tasks), "done": done}, name="add_tasks")


def task(
    task_id: str, source: str, tool: str, arguments: dict[str, Any], follows: str, **more: Any
) -> dict[str, Any]:
    return {"id": task_id, "source": source, "tool": tool, "arguments": arguments, "follows": follows,
            "why": f"follows {follows}", **more}  # fmt: skip


REFUND_45 = task(
    "refund_45", "billing", "refund_eligibility", {"order_id": "ORD-10031", "amount": 45},
    "orders:ORD-10031", purpose="refund research",
)  # fmt: skip


@pytest.fixture
def lead_api(messages_api: Callable[..., FakeMessagesApi]) -> Callable[..., FakeMessagesApi]:
    """A fake Messages API that plans ``plan`` and answers the lead's rounds with ``lead``."""

    def start(*lead: Reply, plan: dict[str, Any] = ORDERS_PLAN) -> FakeMessagesApi:
        return messages_api(planner=[tool_use(plan)], lead=list(lead))

    return start


async def research(
    settings: SourceSettings, api: FakeMessagesApi, *, token_budget: int = 200_000, deadline_s: float = 30.0,
    query: str = QUERY,
) -> ResearchReport:  # fmt: skip
    servers = {name: module.create_server(settings) for name, module in MODULES.items()}
    targets = {name: (lambda s=server: s) for name, server in servers.items()}
    claude = ClaudeSettings(
        api_key="test-key", base_url=api.base_url, max_retries=2, timeout_s=10, token_budget=token_budget
    )
    config = Config(settings, claude=claude)
    with anyio.fail_after(60):
        async with Coordinator(config, targets=targets, clock=FakeClock()) as coordinator:
            return await coordinator.research(query, seed=1, deadline_s=deadline_s)


def steps(report: ResearchReport, action: str) -> list[str]:
    return [step.reason for step in report.planning.steps if step.action == action]


async def test_the_lead_adds_a_follow_up_from_a_finding_and_it_runs(
    lead_api: Any, settings: SourceSettings, spans: InMemorySpanExporter
) -> None:
    api = lead_api(added(REFUND_45))  # then the default lead: nothing more
    report = await research(settings, api)
    check = next(summary for summary in report.tasks if summary.id == "refund_45")
    assert (check.tool, check.arguments, check.state) == (
        "refund_eligibility", {"order_id": "ORD-10031", "amount": 45}, "ok",
    )  # fmt: skip
    assert check.follows == "orders:ORD-10031" and check.depends_on == ["orders"]
    assert "billing:refund_eligibility:ORD-10031" in {finding.citation for finding in report.findings}
    assert report.status == "complete"
    assert [step.action for step in report.planning.steps] == ["plan", "round", "stop"]
    # The lead read the round's findings: the orders it found, compact, with no one's name or email.
    first = text_of(api.requests_of("lead")[0]["messages"][0])
    assert "ORD-10031" in first and '"total": 45.0' in first
    assert "Jane Doe" not in first and first.count("jane.doe@example.com") == 1  # the query's own, alone
    assert len(api.requests_of("lead")) == 2  # after round 1, and after round 2 (it added nothing)
    plans = [span for span in spans.get_finished_spans() if span.name == "plan"]
    # A plan span per round: the first plan, the lead's round that added the check, the one that added none.
    assert [(span.attributes or {})[names.PLAN_ROUND] for span in plans] == [1, 2, 3]
    assert [list((span.attributes or {})[names.PLAN_TASKS]) for span in plans[1:]] == [["refund_45"], []]
    (subagent,) = [
        s for s in spans.get_finished_spans() if (s.attributes or {}).get(names.TASK_ID) == "refund_45"
    ]
    assert (subagent.attributes or {})[names.TASK_FOLLOWS] == "orders:ORD-10031"


async def test_a_task_on_a_record_nobody_found_is_refused_and_recorded(
    lead_api: Any, settings: SourceSettings
) -> None:
    steered = task(
        "refund_other", "billing", "refund_eligibility", {"order_id": "ORD-10134", "amount": 45},
        "orders:ORD-10031", purpose="refund research",
    )  # fmt: skip
    unfound = task(
        "tickets_other", "tickets", "search_tickets", {"order_id": "ORD-10999"}, "orders:ORD-10999"
    )
    api = lead_api(added(steered, unfound))
    report = await research(settings, api)
    assert {summary.id for summary in report.tasks} == {"customer", "orders"}  # nothing else ran
    refused = steps(report, "refuse")
    assert len(refused) == 2
    assert "refund_other" in refused[0] and "its arguments name ORD-10134" in refused[0]
    assert (
        "tickets_other" in refused[1]
        and "it follows ORD-10999, which orders neither ran on nor found" in refused[1]
    )
    assert steps(report, "stop") == ["the lead added nothing more: it added no task the code allows"]
    assert len(api.requests_of("lead")) == 1


async def test_the_lead_adds_no_more_than_the_bounds_allow(lead_api: Any, settings: SourceSettings) -> None:
    def searches(round_number: int, count: int) -> Reply:
        return added(*[
            task(f"policies_{round_number}_{n}", "kb", "search_policies", {"query": f"refund rule {n}"},
                 "orders:ORD-10031")
            for n in range(count)
        ])  # fmt: skip

    api = lead_api(searches(2, MOST_ADDED_PER_ROUND + 2), searches(3, MOST_ADDED_PER_ROUND))
    report = await research(settings, api)
    ran = [summary.id for summary in report.tasks if summary.follows]
    assert len(ran) == MOST_ADDED < 2 * MOST_ADDED_PER_ROUND
    assert ran[:MOST_ADDED_PER_ROUND] == [f"policies_2_{n}" for n in range(MOST_ADDED_PER_ROUND)]
    over = steps(report, "refuse")
    assert len(over) == 2 + (2 * MOST_ADDED_PER_ROUND - MOST_ADDED)
    assert all("over the bound" in reason for reason in over)
    assert len(api.requests_of("lead")) == MAX_ROUNDS - 1  # not asked again once the rounds are spent
    assert steps(report, "stop") == [f"the rounds are spent ({MAX_ROUNDS} rounds)"]
    assert report.notes == []  # a bound the rounds are made with, not a failure


@pytest.mark.parametrize(
    ("lead", "category", "said"),
    [
        ([error(529, "overloaded_error", "overloaded")] * 3, "transient", "the model API failed"),
        (
            [added(task("t", "tickets", "drop_tickets", {}, "orders:ORD-10031"))] * 2,
            "validation",
            "the repaired list of tasks is still invalid: task 't' names unknown tool 'drop_tickets'",
        ),
    ],
    ids=["api-error", "invalid-twice"],
)
async def test_a_lead_that_fails_ends_the_rounds_with_the_findings_so_far(
    lead_api: Any, settings: SourceSettings, lead: list[Reply], category: str, said: str
) -> None:
    api = lead_api(*lead)
    report = await research(settings, api)
    assert [(summary.id, summary.state) for summary in report.tasks] == [("customer", "ok"), ("orders", "ok")]
    assert {"orders:search_orders:ORD-10031", "customers:customer_lookup:CUST-00042"} <= {
        finding.citation for finding in report.findings
    }
    (stop,) = report.planning.steps[-1:]
    assert stop.action == "stop" and stop.category == category and said in stop.reason
    (note,) = [note for note in report.notes if note.startswith("round 2 was not planned")]
    assert said in note and note.endswith("the rounds ended with the findings so far")


async def test_a_task_on_a_record_the_question_leaves_out_is_refused_though_a_finding_holds_it(
    lead_api: Any, settings: SourceSettings
) -> None:
    """Her orders were found, ORD-10008 among them; the question said it is not about ORD-10008, so a
    check on it is refused, whatever the lead says, and nothing runs on it."""
    on_it = task(
        "refund_other", "billing", "refund_eligibility", {"order_id": "ORD-10008", "amount": 45},
        "orders:ORD-10008", purpose="refund research",
    )  # fmt: skip
    report = await research(
        settings, lead_api(added(on_it, REFUND_45)), query=f"{QUERY} Not about ORD-10008."
    )
    (refused,) = steps(report, "refuse")
    assert (
        "refund_other" in refused
        and "it names ORD-10008: the question names it only to leave it out" in refused
    )
    assert {summary.id for summary in report.tasks} == {"customer", "orders", "refund_45"}


async def test_a_write_the_lead_adds_that_the_question_did_not_ask_for_is_refused(
    lead_api: Any, settings: SourceSettings
) -> None:
    refund = task(
        "refund_it", "billing", "issue_refund",
        {"order_id": "ORD-10031", "amount": 45, "idempotency_key": "lead-1"}, "orders:ORD-10031",
    )  # fmt: skip
    api = lead_api(added(refund))
    report = await research(settings, api)  # "could the £45 one be refunded?" asks whether, not to
    assert "refund_it" not in {summary.id for summary in report.tasks}
    (refused,) = steps(report, "refuse")
    assert "refund_it (billing.issue_refund" in refused and "a write the question does not ask for" in refused


async def test_a_spent_token_budget_ends_the_rounds_without_asking_the_lead(
    lead_api: Any, settings: SourceSettings
) -> None:
    api = lead_api(added(REFUND_45))
    report = await research(settings, api, token_budget=1_000)  # the plan and the first round spend it
    assert api.requests_of("lead") == []
    assert "refund_45" not in {summary.id for summary in report.tasks}
    assert report.planning.steps[-1].action == "stop"
    assert report.planning.steps[-1].reason.startswith("round 2 was not planned: the token budget is spent")
    assert [note for note in report.notes if "the token budget is spent" in note] == [
        report.planning.steps[-1].reason
    ]


async def test_a_silent_lead_is_bounded_by_its_share_of_what_is_left_of_the_deadline(
    lead_api: Any, settings: SourceSettings
) -> None:
    silent = Silent()
    api = lead_api()
    answer = api.respond
    api.respond = lambda request: (
        silent(request) if Conversations.route(request) == "lead" else answer(request)
    )
    try:
        report = await research(settings, api, deadline_s=8.0)
    finally:
        silent.released.set()
    assert [(summary.id, summary.state) for summary in report.tasks] == [("customer", "ok"), ("orders", "ok")]
    stop = report.planning.steps[-1]
    assert stop.action == "stop" and stop.category == "transient"
    assert "the lead agent did not answer within" in stop.reason
    assert any(
        note.startswith("round 2 was not planned: the lead agent did not answer") for note in report.notes
    )


async def test_an_added_task_waiting_for_another_added_one_is_sent_back_for_repair(
    lead_api: Any, settings: SourceSettings
) -> None:
    """A round's tasks wait only for what has run: refusing one added task can strand no other."""
    chained = task(
        "tickets_45", "tickets", "search_tickets", {"order_id": "ORD-10031"}, "orders:ORD-10031",
        depends_on=["refund_45"],
    )  # fmt: skip
    api = lead_api(added(REFUND_45, chained), added(REFUND_45))
    report = await research(settings, api)
    (repair,) = steps(report, "repair")
    assert repair == "task 'tickets_45' names 'refund_45', which is not a task that has run"
    assert "Submit a corrected list of tasks" in str(api.requests_of("lead")[1]["messages"][-1]["content"])
    assert {summary.id: summary.state for summary in report.tasks}["refund_45"] == "ok"
