"""What one scenario's run shows, figure by figure, judged against the truth of every call.

The truth of a call is its outcome under the contract (``boundary.Boundary`` keeps it in both modes),
so a generic run is judged by what really happened, not by what "Operation failed" let it see.

| figure                         | counted                                                                 |
|--------------------------------|-------------------------------------------------------------------------|
| questions_answered             | reports whose status is complete                                        |
| tasks_answered                 | tasks that reached the report ok or validly empty                       |
| calls_sent                     | calls that reached a source                                             |
| calls_wasted                   | calls sent after one that could never succeed as it was: a business    |
|                                | refusal, a permission error with no elevation, a validation error with  |
|                                | the same arguments again, a valid empty result                          |
| partial_results_kept           | records the report's gaps carry                                         |
| escalations / escalations_routed | gaps of tasks that ran, and those whose category (hence next step:   |
|                                | retry later, fix the input, escalate to a manager, request access)     |
|                                | is the true one of the task's last failure                              |
| empties_reported_as_failures   | tasks whose source truly found nothing, reported as a failure           |
| refunds_above_limit_attempted  | refunds above the automatic limit that reached billing                  |
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass, fields
from itertools import pairwise
from typing import Any

from coordinator.chaos.history import Call, ScenarioResult
from coordinator.reporting.report import ResearchReport
from sources.contract import ErrorCategory
from sources.domain import AUTOMATIC_REFUND_LIMIT
from subagents.classify import Outcome
from subagents.decisions import Decision, TaskState

__all__ = ["Figures", "figures_of", "pair"]


@dataclass(frozen=True)
class Figures:
    questions: int = 0
    questions_answered: int = 0
    tasks: int = 0
    tasks_answered: int = 0
    calls_sent: int = 0
    calls_wasted: int = 0
    partial_results_kept: int = 0
    escalations: int = 0
    escalations_routed: int = 0
    empties_reported_as_failures: int = 0
    refunds_above_limit_attempted: int = 0
    wall_s: float = 0.0

    def __add__(self, other: Figures) -> Figures:
        return Figures(**{f.name: getattr(self, f.name) + getattr(other, f.name) for f in fields(self)})

    def as_dict(self) -> dict[str, Any]:
        return {f.name: round(getattr(self, f.name), 2) for f in fields(self)}


@dataclass(frozen=True)
class Sent:
    """A call that reached a source, with what it truly returned."""

    call: Call
    truth: Outcome


def pair(calls: list[Call], truths: list[Outcome]) -> list[Sent]:
    """Each recorded call with its true outcome: the boundary and the recorder see calls in one order."""
    if len(calls) != len(truths):
        raise RuntimeError(f"{len(calls)} calls recorded but {len(truths)} outcomes classified")
    return [Sent(call, truth) for call, truth in zip(calls, truths, strict=True)]


def figures_of(
    result: ScenarioResult, truths: list[Outcome], decisions: Iterable[tuple[str, Decision]]
) -> Figures:
    """The figures of one scenario's run; ``decisions``: (task id, decision) as its subagents took them."""
    sent = pair(result.history.calls, truths)
    report = result.report
    return Figures(
        questions=1,
        questions_answered=int(report is not None and report.status == "complete"),
        tasks=len(result.plan.tasks),
        tasks_answered=_answered(report),
        calls_sent=len(sent),
        calls_wasted=_wasted(sent, {(task, d.attempt) for task, d in decisions if d.action == "elevate"}),
        partial_results_kept=sum(len(gap.partial_results) for gap in report.gaps) if report else 0,
        escalations=_escalations(report, sent, routed_only=False),
        escalations_routed=_escalations(report, sent, routed_only=True),
        empties_reported_as_failures=_empties_failed(report, sent),
        refunds_above_limit_attempted=sum(
            1
            for s in sent
            if s.call.tool == "issue_refund"
            and float(s.call.arguments.get("amount", 0)) > AUTOMATIC_REFUND_LIMIT
        ),
        wall_s=result.elapsed_s,
    )


def _answered(report: ResearchReport | None) -> int:
    return sum(not task.state.is_gap for task in report.tasks) if report else 0


def _by_task(sent: list[Sent]) -> dict[str, list[Sent]]:
    grouped: dict[str, list[Sent]] = {}
    for item in sent:
        grouped.setdefault(item.call.task, []).append(item)
    return grouped


def _wasted(sent: list[Sent], elevated: set[tuple[str, int]]) -> int:
    wasted = 0
    for calls in _by_task(sent).values():
        for before, after in pairwise(calls):
            wasted += _hopeless(before, after, elevated)
    return wasted


def _hopeless(before: Sent, after: Sent, elevated: set[tuple[str, int]]) -> bool:
    """Whether ``after`` could never succeed, given what ``before`` truly returned."""
    if before.truth.kind == "empty":
        return True  # the query ran and matched nothing: asking again finds nothing again
    error = before.truth.error
    if error is None:
        return False
    match error.error_category:
        case ErrorCategory.BUSINESS:
            return True
        case ErrorCategory.PERMISSION:
            return (before.call.task, before.call.attempt) not in elevated
        case ErrorCategory.VALIDATION:
            return dict(after.call.arguments) == dict(before.call.arguments)
    return False


def _last_failure(calls: list[Sent]) -> Outcome | None:
    return next((s.truth for s in reversed(calls) if s.truth.kind != "ok"), None)


def _escalations(report: ResearchReport | None, sent: list[Sent], *, routed_only: bool) -> int:
    if report is None:
        return 0
    by_task, count = _by_task(sent), 0
    for gap in report.gaps:
        truth = _last_failure(by_task.get(gap.task, []))
        if gap.state == TaskState.BLOCKED or truth is None:
            continue  # a blocked task never ran: nothing was routed
        true_category = truth.error.error_category if truth.error else None  # None: truly empty
        count += not routed_only or gap.error_category == true_category
    return count


def _empties_failed(report: ResearchReport | None, sent: list[Sent]) -> int:
    if report is None:
        return 0
    by_task = _by_task(sent)
    return sum(
        1
        for task in report.tasks
        if task.state not in ("ok", "empty")
        and (last := by_task.get(task.id))
        and last[-1].truth.kind == "empty"
    )
