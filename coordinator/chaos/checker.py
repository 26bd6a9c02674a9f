"""The invariants a chaos scenario must keep, checked against its history and the plan that ran.

Invariants, checked after each scenario:

| invariant          | what must hold                                                                     |
|--------------------|------------------------------------------------------------------------------------|
| `terminal`         | every planned task ends in exactly one terminal state and appears in the report     |
| `nothing_lost`     | every result a source returned to a subagent appears in the report (a finding, or a gap's partial results) |
| `no_blind_repeat`  | after a non-retryable error the identical call is never repeated; attempts within bounds |
| `escalation_complete` | every escalation carries attempted_query and the partial results the source gave |
| `deadline`         | the query finished by its deadline plus a small grace                               |
| `no_leak`          | no source process or socket is left behind after the query                         |
| `refunds`          | no refund above the limit reached billing; no order refunded above it in total, nor any refund issued outside the 60-day window after delivery; no refund was executed twice |
"""

from __future__ import annotations

import itertools
import json
from collections import Counter
from datetime import date

from coordinator.chaos.history import Call, ScenarioResult
from coordinator.run import DEADLINE_GRACE_S
from sources.contract import ResultPage
from sources.domain import AUTOMATIC_REFUND_LIMIT, REFUND_WINDOW_DAYS, pounds, within_refund_window


def check(result: ScenarioResult) -> list[tuple[str, str]]:
    """Every invariant violated by this scenario, as (invariant, what happened)."""
    found: list[tuple[str, str]] = []
    report = result.report
    if report is None:
        return [("terminal", "the query produced no report")]
    plan = result.plan
    states = Counter(task.id for task in report.tasks)
    if set(states) != set(plan.tasks) or any(count != 1 for count in states.values()):
        found.append(("terminal", f"planned {sorted(plan.tasks)}, reported {sorted(states.elements())}"))
    if any(task.state not in ("ok", "empty", "escalated", "blocked", "deadline") for task in report.tasks):
        found.append(("terminal", "a task ended in no terminal state"))

    # A result is kept when it is a finding, or (a planned call's result that a later unresolved error
    # superseded, in Claude mode) among the partial results of its task's gap.
    kept_in_gaps = [item for gap in report.gaps for item in gap.partial_results]
    query_calls = [call for call in result.history.calls if call.tool != "issue_refund"]
    for call in query_calls:
        if not isinstance(call.outcome.result, ResultPage):
            continue
        cited = any(f.source == call.source and f.tool == call.tool for f in report.findings)
        if not cited and not all(record in kept_in_gaps for record in call.outcome.result.results):
            found.append(
                ("nothing_lost", f"{call.source}.{call.tool} returned results the report does not have")
            )

    bound = result.policy.max_attempts
    for task in report.tasks:
        if task.attempts > bound:
            found.append(
                ("no_blind_repeat", f"{task.id} made {task.attempts} attempts; the bound is {bound}")
            )
    by_task: dict[str, list[Call]] = {}
    for call in result.history.calls:
        by_task.setdefault(call.task, []).append(call)
    decisions = {task.id: task.decisions for task in report.tasks}
    for task_id, calls in by_task.items():
        for before, after in itertools.pairwise(calls):
            error = before.outcome.error
            if (
                error is None
                or error.is_retryable
                or (after.tool, after.arguments) != (before.tool, before.arguments)
            ):
                continue
            between = [d.action for d in decisions.get(task_id, []) if d.attempt == before.attempt]
            if "elevate" not in between:
                found.append((
                    "no_blind_repeat",
                    f"{task_id}: {before.source}.{before.tool} repeated {before.arguments} after a {error.error_category} error",
                ))  # fmt: skip

    for gap in report.gaps:  # a gap's partial results are its escalation's
        if gap.state == "blocked":
            continue
        if not gap.attempted_query.tool or not isinstance(gap.partial_results, list):
            found.append(
                ("escalation_complete", f"{gap.task} escalated without attempted_query or partial_results")
            )
        given = [item for call in by_task.get(gap.task, []) if call.outcome.error
                 for item in (call.outcome.error.partial_results or [])]  # fmt: skip
        missing = [item for item in given if item not in gap.partial_results]
        if missing:
            found.append(
                ("escalation_complete", f"{gap.task} dropped partial results {json.dumps(missing)[:120]}")
            )

    deadline_s = result.scenario.deadline_s
    if result.elapsed_s > deadline_s + DEADLINE_GRACE_S + 1.0:
        found.append(
            ("deadline", f"the query took {result.elapsed_s:.2f} s; the deadline is {deadline_s:g} s")
        )
    if result.leaked_processes:
        found.append(("no_leak", f"source processes still running: {result.leaked_processes}"))
    if result.leaked_sockets > 0:
        found.append(("no_leak", f"{result.leaked_sockets} more sockets open than before the query"))

    limit = AUTOMATIC_REFUND_LIMIT
    reached = [call for call in result.history.calls if call.tool == "issue_refund" and _amount(call) > limit]
    if reached:
        found.append(
            (
                "refunds",
                f"a refund of {pounds(_amount(reached[0]))} reached billing; the limit is £{limit:,.0f}",
            )
        )
    totals: dict[str, float] = {}
    for row in result.refund_rows:
        totals[row["order_id"]] = totals.get(row["order_id"], 0.0) + row["amount"]
    over_limit = sorted(order for order, total in totals.items() if total > limit)
    if over_limit:
        found.append(("refunds", f"orders refunded above the £{limit:,.0f} limit in total: {over_limit}"))
    late = sorted(
        f"{row['id']} on {row['order_id']} ({row['issued_on']}, delivered {row['delivered_on']})"
        for row in result.refund_rows
        if not within_refund_window(row.get("delivered_on"), date.fromisoformat(row["issued_on"]))
    )
    if late:
        found.append(
            ("refunds", f"refunds issued outside the {REFUND_WINDOW_DAYS}-day window after delivery: {late}")
        )
    mine = [row for row in result.refund_rows if row["idempotency_key"] == result.refund_key]
    if len(mine) > 1:
        found.append(("refunds", f"the refund with key {result.refund_key} was executed {len(mine)} times"))
    return found


def _amount(call: Call) -> float:
    amount = call.arguments.get("amount")
    return float(amount) if isinstance(amount, int | float) else 0.0
