"""The invariants a chaos scenario must keep, checked against its history and the plan that ran.

Invariants, checked after each scenario:

| invariant          | what must hold                                                                     |
|--------------------|------------------------------------------------------------------------------------|
| `terminal`         | every planned task ends in exactly one terminal state and appears in the report     |
| `nothing_lost`     | every result a source returned to a subagent appears in the report (a finding, or a gap's partial results) |
| `no_blind_repeat`  | after a non-retryable error the identical call is never repeated; attempts within bounds (the policy's, plus one for each pushback waited out) |
| `escalation_complete` | every escalation carries attempted_query and the partial results the source gave |
| `deadline`         | the query finished by its deadline plus a small grace                               |
| `no_leak`          | no source process or socket is left behind after the query                         |
| `refunds`          | no refund above the limit reached billing; no order refunded above it in total, nor any refund issued outside the refund window after delivery; no refund was executed twice |
| `writes_asked`     | every write that reached a source is one the question asked for (that action, on what it names positively, within its amount), one call each; the scenario's own side refund aside |

Each invariant is one function below, named in ``_INVARIANTS``. What billing refunded is read through
its ledger (``sources.refund_ledger``), never from its database here.
"""

from __future__ import annotations

import itertools
import json
from collections import Counter
from collections.abc import Callable, Iterator
from typing import TYPE_CHECKING

from coordinator.chaos.history import Call, ScenarioResult
from coordinator.reporting.report import ResearchReport
from coordinator.run import DEADLINE_GRACE_S
from sources.contract import ResultPage
from sources.deferred import deferred
from sources.domain import AUTOMATIC_REFUND_LIMIT, REFUND_WINDOW_DAYS, pounds, within_refund_window
from subagents.decisions import TaskState
from subagents.recovery import is_pushback

if TYPE_CHECKING:
    from coordinator.planning import writes
else:
    # Read only for a result that does not carry what its question asked (a batch question's does).
    writes = deferred("coordinator.planning.writes")

__all__ = ["check"]

_TERMINAL_STATES = tuple(TaskState)
_DEADLINE_SLACK_S = 1.0  # beyond the subagents' grace: the run's own bookkeeping on a busy machine

Invariant = Callable[[ScenarioResult, ResearchReport], Iterator[str]]


def check(result: ScenarioResult) -> list[tuple[str, str]]:
    """Every invariant violated by this scenario, as (invariant, what happened)."""
    report = result.report
    if report is None:
        return [("terminal", "the query produced no report")]
    return [(name, what) for name, invariant in _INVARIANTS.items() for what in invariant(result, report)]


def _terminal(result: ScenarioResult, report: ResearchReport) -> Iterator[str]:
    planned = result.plan.tasks
    states = Counter(task.id for task in report.tasks)
    if set(states) != set(planned) or any(count != 1 for count in states.values()):
        yield f"planned {sorted(planned)}, reported {sorted(states.elements())}"
    if any(task.state not in _TERMINAL_STATES for task in report.tasks):
        yield "a task ended in no terminal state"


def _nothing_lost(result: ScenarioResult, report: ResearchReport) -> Iterator[str]:
    # A result is kept when it is a finding, or (a planned call's result that a later unresolved error
    # superseded, in Claude mode) among the partial results of its task's gap.
    kept_in_gaps = [item for gap in report.gaps for item in gap.partial_results]
    for call in result.history.calls:
        if call.tool == "issue_refund" or not isinstance(call.outcome.result, ResultPage):
            continue
        cited = any(f.source == call.source and f.tool == call.tool for f in report.findings)
        if not cited and not all(record in kept_in_gaps for record in call.outcome.result.results):
            yield f"{call.source}.{call.tool} returned results the report does not have"


def _no_blind_repeat(result: ScenarioResult, report: ResearchReport) -> Iterator[str]:
    by_task = _calls_by_task(result)
    for task in report.tasks:
        # A pushback is waited out within the deadline, apart from the retry bound: one more call each.
        bound = result.policy.max_attempts + sum(
            is_pushback(call.outcome) for call in by_task.get(task.id, [])
        )
        if task.attempts > bound:
            yield f"{task.id} made {task.attempts} attempts; the bound is {bound}"
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
                yield f"{task_id}: {before.source}.{before.tool} repeated {before.arguments} after a {error.error_category} error"


def _escalation_complete(result: ScenarioResult, report: ResearchReport) -> Iterator[str]:
    by_task = _calls_by_task(result)
    for gap in report.gaps:  # a gap's partial results are its escalation's
        if gap.state == TaskState.BLOCKED:
            continue
        if not gap.attempted_query.tool or not isinstance(gap.partial_results, list):
            yield f"{gap.task} escalated without attempted_query or partial_results"
        given = [item for call in by_task.get(gap.task, []) if call.outcome.error
                 for item in (call.outcome.error.partial_results or [])]  # fmt: skip
        missing = [item for item in given if item not in gap.partial_results]
        if missing:
            yield f"{gap.task} dropped partial results {json.dumps(missing)[:120]}"


def _deadline(result: ScenarioResult, report: ResearchReport) -> Iterator[str]:
    deadline_s = result.deadline_s
    if result.elapsed_s > deadline_s + DEADLINE_GRACE_S + _DEADLINE_SLACK_S:
        yield f"the query took {result.elapsed_s:.2f} s; the deadline is {deadline_s:g} s"


def _no_leak(result: ScenarioResult, report: ResearchReport) -> Iterator[str]:
    if result.leaked_processes:
        yield f"source processes still running: {result.leaked_processes}"
    if result.leaked_sockets > 0:
        yield f"{result.leaked_sockets} more sockets open than before the query"


def _refunds(result: ScenarioResult, report: ResearchReport) -> Iterator[str]:
    limit = AUTOMATIC_REFUND_LIMIT
    reached = [call for call in result.history.calls if call.tool == "issue_refund" and _amount(call) > limit]
    if reached:
        yield f"a refund of {pounds(_amount(reached[0]))} reached billing; the limit is £{limit:,.0f}"
    totals: dict[str, float] = {}
    for refund in result.refunds:
        totals[refund.order_id] = totals.get(refund.order_id, 0.0) + refund.amount
    over_limit = sorted(order for order, total in totals.items() if total > limit)
    if over_limit:
        yield f"orders refunded above the £{limit:,.0f} limit in total: {over_limit}"
    late = sorted(
        f"{refund.id} on {refund.order_id} ({refund.issued_on}, delivered {refund.delivered_on})"
        for refund in result.refunds
        if not within_refund_window(refund.delivered_on, refund.issued_on)
    )
    if late:
        yield f"refunds issued outside the {REFUND_WINDOW_DAYS}-day window after delivery: {late}"
    mine = [refund for refund in result.refunds if refund.idempotency_key == result.refund_key]
    if len(mine) > 1:
        yield f"the refund with key {result.refund_key} was executed {len(mine)} times"


def _writes_asked(result: ScenarioResult, report: ResearchReport) -> Iterator[str]:
    asked = writes.asked_writes(result.plan.query).writes if result.asked is None else result.asked
    made: dict[int, str] = {}
    for call in result.history.calls:
        if call.tool != "issue_refund" or call.arguments.get("idempotency_key") == result.refund_key:
            continue  # a read, or the scenario's own side refund (approved as a task is)
        allowing = [index for index, ask in enumerate(asked) if ask.allows(call.tool, call.arguments)]
        by_value = json.dumps(dict(call.arguments), sort_keys=True, default=str)
        if not allowing:
            yield f"a write the question did not ask for reached {call.source}: {call.tool} {by_value}"
        elif any(made.setdefault(index, by_value) != by_value for index in allowing):
            yield f"an asked write was made by a second call: {call.tool} {by_value}"


# The invariants, in the order their violations are reported (the table above says what each holds).
_INVARIANTS: dict[str, Invariant] = {
    "terminal": _terminal,
    "nothing_lost": _nothing_lost,
    "no_blind_repeat": _no_blind_repeat,
    "escalation_complete": _escalation_complete,
    "deadline": _deadline,
    "no_leak": _no_leak,
    "refunds": _refunds,
    "writes_asked": _writes_asked,
}


def _calls_by_task(result: ScenarioResult) -> dict[str, list[Call]]:
    by_task: dict[str, list[Call]] = {}
    for call in result.history.calls:
        by_task.setdefault(call.task, []).append(call)
    return by_task


def _amount(call: Call) -> float:
    amount = call.arguments.get("amount")
    return float(amount) if isinstance(amount, int | float) else 0.0
