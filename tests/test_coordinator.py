"""The coordinator end to end in memory: every task ends in one terminal state, every gap annotated."""

from __future__ import annotations

import dataclasses
import json
import os
import time
from pathlib import Path
from typing import Any

import anyio
import pytest

from coordinator.core import DEFAULT_GRANTS, Config, Coordinator
from coordinator.planning.plan import Plan, PlannedTask, Ref
from coordinator.planning.planner import plan_query
from coordinator.reporting.report import ResearchReport
from coordinator.run import DEADLINE_GRACE_S
from sources.faults import FaultSettings
from sources.processes.fleet import Fleet, Member
from sources.settings import SourceSettings
from subagents.broker import Grant
from subagents.classify import SourceUnavailable, classify_exception
from subagents.sessions.connection import Target, stdio_target
from subagents.subagent import MonotonicClock
from tests.conftest import MODULES
from tests.fakes import FakeClock
from traces.private_files import publish_file

pytestmark = pytest.mark.anyio

STORY = "Investigate jane.doe@example.com: recent orders, open tickets, and whether a £750 refund on ORD-10023 is allowed"
TERMINAL = {"ok", "empty", "escalated", "blocked", "deadline"}


def in_memory(settings: SourceSettings, faults: dict[str, FaultSettings] | None = None) -> dict[str, Target]:
    servers = {
        source: module.create_server(settings.with_faults((faults or {}).get(source, FaultSettings())))
        for source, module in MODULES.items()
    }
    return {source: (lambda server=server: server) for source, server in servers.items()}


async def ask(
    settings: SourceSettings,
    query: str = STORY,
    *,
    plan: Plan | None = None,
    targets: dict[str, Target] | None = None,
    deadline: float = 30,
    clock: Any = None,
) -> ResearchReport:
    with anyio.fail_after(deadline + DEADLINE_GRACE_S + 20):
        async with Coordinator(
            Config(settings), targets=targets or in_memory(settings), clock=clock or FakeClock()
        ) as coordinator:
            return await coordinator.research(query, deadline_s=deadline, seed=1, plan=plan)


def by_task(report: ResearchReport) -> dict[str, Any]:
    return {task.id: task for task in report.tasks}


def check_every_task_accounted_for(report: ResearchReport, plan: Plan) -> None:
    assert [task.id for task in report.tasks] == [task.id for task in plan.order()]
    assert all(task.state in TERMINAL for task in report.tasks)
    gaps = {gap.task for gap in report.gaps}
    assert gaps == {task.id for task in report.tasks if task.state in ("escalated", "blocked", "deadline")}
    assert report.status == ("partial" if gaps else "complete")


async def test_the_story_query(settings: SourceSettings) -> None:
    report = await ask(settings)
    check_every_task_accounted_for(report, plan_query(STORY))
    states = {task.id: task.state for task in report.tasks}
    assert states == {
        "customer": "ok",
        "orders": "ok",
        "policies": "ok",
        "refund": "escalated",
        "tickets": "ok",
    }
    citations = {finding.citation for finding in report.findings}
    assert {
        "customers:customer_lookup:CUST-00042", "orders:search_orders:ORD-10023",
        "tickets:search_tickets:TCK-20042", "kb:search_policies:KB-REFUNDS",
    } <= citations  # fmt: skip
    (gap,) = report.gaps
    assert (gap.task, gap.source, gap.state, gap.error_category) == (
        "refund",
        "billing",
        "escalated",
        "business",
    )
    assert gap.next_step == "escalate to a manager"
    assert gap.attempted_query.tool == "refund_eligibility"
    assert gap.attempted_query.arguments == {"order_id": "ORD-10023", "amount": 750.0}
    assert gap.partial_results[0]["id"] == "ORD-10023" and gap.partial_results[0]["eligible"] is False
    (escalation,) = report.escalations
    assert escalation.source == "billing" and [d.action for d in escalation.decisions] == [
        "elevate",
        "escalate",
    ]
    assert len(report.trace_id) == 32 and int(report.trace_id, 16) != 0
    assert "[customers:customer_lookup:CUST-00042]" in report.answer and "GAP refund" in report.answer


def base_plan(**changes: dict[str, Any]) -> Plan:
    """The story with a refund inside the limit: every task succeeds unless a test breaks one."""
    customer = Ref("customer", "id")
    tasks = [
        PlannedTask("customer", "customers", "customer_lookup", {"identifier": "jane.doe@example.com"}),
        PlannedTask("orders", "orders", "search_orders", {"customer_id": customer}, depends_on=("customer",)),
        PlannedTask("tickets", "tickets", "search_tickets", {"customer_id": customer, "status": "open"}, depends_on=("customer",)),
        PlannedTask("refund", "billing", "refund_eligibility", {"order_id": "ORD-10031", "amount": 45.0},
                    purpose="refund research", depends_on=("customer",)),
        PlannedTask("policies", "kb", "search_policies", {"query": "refunds damaged"}),
    ]  # fmt: skip
    return Plan.of("q", [dataclasses.replace(task, **changes.get(task.id, {})) for task in tasks])


async def test_the_base_plan_is_complete(settings: SourceSettings) -> None:
    report = await ask(settings, plan=base_plan())
    assert report.status == "complete" and report.gaps == [] and report.escalations == []
    assert {task.state for task in report.tasks} == {"ok"}


CASES = [
    ("tickets", "transient", {}, {"tickets": FaultSettings(transient=1)}, "retry later"),
    ("kb", "transient", {}, {"kb": FaultSettings(transient=1)}, "retry later"),
    ("orders", "transient", {}, {"orders": FaultSettings(transient=1)}, "retry later"),
    ("billing", "transient", {}, {"billing": FaultSettings(transient=1)}, "retry later"),
    ("orders", "validation", {"orders": {"arguments": {"customer_id": Ref("customer", "id"), "placed_after": "2026-02-30"}}}, {}, "fix the input"),
    ("billing", "business", {"refund": {"arguments": {"order_id": "ORD-10023", "amount": 750.0}}}, {}, "escalate to a manager"),
    ("billing", "permission", {"refund": {"purpose": "curiosity"}}, {}, "request access"),
]  # fmt: skip


@pytest.mark.parametrize(("source", "category", "changes", "faults", "next_step"), CASES)
async def test_one_failing_source_leaves_the_others_findings(
    settings: SourceSettings, source: str, category: str, changes: dict, faults: dict, next_step: str
) -> None:
    plan = base_plan(**changes)
    report = await ask(settings, plan=plan, targets=in_memory(settings, faults))
    check_every_task_accounted_for(report, plan)
    (gap,) = report.gaps
    assert gap.source == source and gap.error_category == category and gap.next_step == next_step
    failed_task = plan.tasks[gap.task]
    assert gap.attempted_query.tool == failed_task.tool
    others = {task.source for task in plan.order()} - {source}
    assert others <= {finding.source for finding in report.findings}


@pytest.mark.parametrize(
    ("identifier", "upstream_state", "next_step"),
    [("CUST-00013", "escalated", "escalate to a manager"), ("nobody@example.com", "empty", "retry later")],
)
async def test_an_unresolved_customer_blocks_its_dependents(
    settings: SourceSettings, identifier: str, upstream_state: str, next_step: str
) -> None:
    plan = base_plan(customer={"arguments": {"identifier": identifier}})
    report = await ask(settings, plan=plan)
    check_every_task_accounted_for(report, plan)
    states = {task.id: task.state for task in report.tasks}
    assert states == {
        "customer": upstream_state,
        "orders": "blocked",
        "tickets": "blocked",
        "refund": "blocked",
        "policies": "ok",
    }
    for gap in report.gaps:
        if gap.state == "blocked":
            assert gap.blocked_by == "customer" and f"blocked by customer ({upstream_state})" in gap.message
    assert any(finding.source == "kb" for finding in report.findings)


async def test_a_hung_source_and_a_2_second_deadline(settings: SourceSettings) -> None:
    """Real time here: the run must come back by its deadline plus the grace, with the others' findings."""
    targets = in_memory(settings, {"tickets": FaultSettings(hang=1)})
    started = anyio.current_time()
    report = await ask(settings, plan=base_plan(), targets=targets, deadline=2, clock=MonotonicClock())
    elapsed = anyio.current_time() - started
    assert elapsed < 2 + DEADLINE_GRACE_S + 2  # a bound on a hang, not a performance figure
    states = {task.id: task.state for task in report.tasks}
    assert states["tickets"] == "deadline" and states["orders"] == states["policies"] == "ok"
    (gap,) = report.gaps
    assert gap.task == "tickets" and gap.state == "deadline" and gap.next_step == "retry later"


@pytest.mark.subprocess
async def test_a_source_that_cannot_start_is_a_gap(settings: SourceSettings) -> None:
    targets = {**in_memory(settings), "kb": stdio_target("no_such_source", settings)}
    report = await ask(settings, plan=base_plan(), targets=targets)
    (gap,) = report.gaps
    assert gap.source == "kb" and gap.error_category == "transient" and gap.next_step == "retry later"
    assert "could not be reached" in gap.message
    assert {"customers", "orders", "tickets", "billing"} <= {finding.source for finding in report.findings}


async def test_valid_empty_results_are_findings_not_gaps(settings: SourceSettings) -> None:
    plan = base_plan(customer={"arguments": {"identifier": "new.customer@example.com"}})
    report = await ask(settings, plan=plan)
    states = {task.id: task.state for task in report.tasks}
    assert states["orders"] == "empty" and states["tickets"] == "empty"
    empty = [finding for finding in report.findings if finding.record_id == "none"]
    assert {finding.source for finding in empty} >= {"orders", "tickets"}
    assert all("executed successfully" in finding.text for finding in empty)
    assert report.gaps == [] and report.status == "complete"


@pytest.mark.subprocess
async def test_over_http_with_sources_already_running(settings: SourceSettings, http_source: Any) -> None:
    started = {source: http_source(source, wait=False) for source in MODULES}  # all five start at once
    urls = {source: running.ready().url for source, running in started.items()}
    config = Config(settings, demo_over="http", urls=urls)
    with anyio.fail_after(60):
        async with Coordinator(config, clock=FakeClock()) as coordinator:
            report = await coordinator.research(STORY, seed=1)
    states = {task.id: task.state for task in report.tasks}
    assert states == {
        "customer": "ok",
        "orders": "ok",
        "policies": "ok",
        "refund": "escalated",
        "tickets": "ok",
    }


@pytest.mark.subprocess
async def test_over_http_with_nothing_running_every_source_is_a_gap(settings: SourceSettings) -> None:
    config = Config(settings, demo_over="http", urls={source: "http://127.0.0.1:9/mcp" for source in MODULES})
    with anyio.fail_after(60):
        async with Coordinator(config, clock=FakeClock()) as coordinator:
            report = await coordinator.research(STORY, seed=1)
    states = {task.id: task.state for task in report.tasks}
    assert states == {
        "customer": "escalated",
        "orders": "blocked",
        "policies": "escalated",
        "refund": "escalated",  # it needs no customer: it tried billing itself
        "tickets": "blocked",
    }
    assert all(gap.next_step == "retry later" for gap in report.gaps)


async def test_over_http_a_source_without_a_url_is_dialled_where_the_fleet_has_it(
    settings: SourceSettings, tmp_path: Path
) -> None:
    """Where the fleet's state says, read when a session opens, never the default port (on which
    anything may listen): with no fleet, or none with the source, there is nothing to connect to."""
    private = dataclasses.replace(settings, data_dir=tmp_path)
    targets = Config(private, demo_over="http", urls={"kb": "http://127.0.0.1:9/mcp"}).targets()
    assert targets["kb"]() == "http://127.0.0.1:9/mcp"  # a URL given is used as given
    with pytest.raises(ConnectionRefusedError, match="research sources up"):
        targets["tickets"]()  # no fleet at all
    moved = Member("tickets", 43104, os.getpid(), time.time(), chaos_control=False)
    publish_file(Fleet(private).state_file, json.dumps({"tickets": dataclasses.asdict(moved)}), replace=True)
    assert targets["tickets"]() == "http://127.0.0.1:43104/mcp"  # as the fleet has it now
    with pytest.raises(ConnectionRefusedError) as refused:
        targets["orders"]()
    # The task's gap: the source could not be reached, and why, in the fleet's words.
    outcome = classify_exception(SourceUnavailable("orders", refused.value))
    assert outcome.error is not None and outcome.error_type == "connection_refused"
    assert outcome.error.description == (
        "The orders source could not be reached: Nothing accepted the connection to the source. "
        "(no source 'orders' in the fleet (tickets))"
    )


async def test_an_erased_customer_named_by_id_has_no_other_task_run_on_their_data(
    settings: SourceSettings,
) -> None:
    """The customer lookup answers first; its refusal (erased, data protection) stops the rest."""
    report = await ask(settings, "orders, open tickets and invoices of CUST-00013")
    tasks = by_task(report)
    assert tasks["customer"].state == "escalated"
    others = [task for task in report.tasks if task.id != "customer"]
    assert others and all(task.state == "blocked" and task.attempts == 0 for task in others)
    for gap in report.gaps:
        if gap.task != "customer":
            assert gap.blocked_by == "customer" and "erased" in gap.message
    assert not any(finding.record_id.startswith(("ORD-", "TCK-", "INV-")) for finding in report.findings)


async def test_the_answer_leads_with_what_the_question_named(settings: SourceSettings) -> None:
    report = await ask(settings)
    orders_line = next(line for line in report.answer.splitlines() if "[orders:search_orders:" in line)
    assert "ORD-10023" in orders_line.split("(+")[0] and orders_line.endswith(
        "[orders:search_orders:ORD-10023]"
    )


async def test_a_permission_gap_names_the_grant_that_allows_it(settings: SourceSettings) -> None:
    query = "list the invoices of CUST-00042"
    refused = await ask(settings, query)
    (gap,) = refused.gaps
    assert gap.error_category == "permission" and gap.required_scope == "billing:read"
    assert gap.way_out == "request access: ask again with --grant billing:read"
    assert "--grant billing:read" in refused.answer
    with anyio.fail_after(30):
        config = Config(settings, grants=(*DEFAULT_GRANTS, Grant("billing:read")))
        async with Coordinator(config, targets=in_memory(settings), clock=FakeClock()) as coordinator:
            granted = await coordinator.research(query, seed=1)
    assert granted.status == "complete" and granted.gaps == []


async def test_an_id_looked_for_among_the_records_found_is_listed_when_not_among_them(
    settings: SourceSettings,
) -> None:
    """No tool looks a ticket up by its id: one named beside its customer is looked for among the
    customer's tickets. Found there, the answer is complete and leads with it; not there (a wrong id,
    a short one), it is listed as not researched, never left to a note that says where it was looked
    for."""
    listed = await ask(settings, "tickets of CUST-00042")
    held = next(f.record_id for f in listed.findings if f.record_id.startswith("TCK-"))
    found = await ask(settings, f"what about {held} for CUST-00042?")
    assert found.status == "complete" and not found.unplanned, found.unplanned
    assert any(line.split(": ", 1)[-1].startswith(held) for line in found.answer.splitlines()), found.answer
    for absent in ("TCK-99999", "TCK-12"):
        report = await ask(settings, f"what about {absent} for CUST-00042?")
        assert absent not in {f.record_id for f in report.findings}
        (item,) = [u for u in report.unplanned if u.what == absent]
        assert "not among the records found" in item.why and report.status == "partial"
        assert any(absent in line for line in report.answer.splitlines()), report.answer


async def test_a_plan_made_elsewhere_calls_no_tool_on_a_record_the_question_leaves_out(
    settings: SourceSettings,
) -> None:
    """A plan handed in (a replay, a caller's own) is run under the question's hooks: its task on the
    order the question leaves out is blocked before anything is sent, and says why; the rest runs."""
    query = "what about ORD-10031? this is not about ORD-10134"
    plan = Plan.of(query, [
        PlannedTask("asked", "orders", "get_order", {"order_id": "ORD-10031"}),
        PlannedTask("other", "orders", "get_order", {"order_id": "ORD-10134"}),
    ])  # fmt: skip
    report = await ask(settings, query, plan=plan)
    tasks = by_task(report)
    assert tasks["asked"].state == "ok" and tasks["other"].state == "escalated"
    assert [decision.action for decision in tasks["other"].decisions] == ["hook_blocked"]
    (gap,) = [gap for gap in report.gaps if gap.task == "other"]
    assert "ORD-10134: the question names it only to leave it out ('not about ORD-10134')" in gap.message
    assert "ORD-10134" not in {finding.record_id for finding in report.findings}
