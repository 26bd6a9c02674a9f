"""Run: the plan's ready tasks run concurrently under one deadline, each through a subagent.

Every planned task ends in exactly one terminal state:

    ok          the source answered with results
    empty       the source looked and found nothing (a finding, not a gap)
    escalated   the subagent could not recover; its escalation carries attempted_query and partial results
    blocked     an upstream task ended without the result this one needs; it names that task and why
    deadline    the query's deadline came first; whatever partial results exist are kept

The subagents watch the deadline themselves: every wait (opening a session, a call, a back-off) is
clipped to the time left, and a subagent still busy a grace after it is cut short and reports what
it did. Should a task still not have ended after that (a bug), the run cancels it and reports it as
``deadline``.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

import anyio

from coordinator.planning.plan import Plan, PlannedTask, Ref
from sources.contract import AttemptedQuery, ErrorCategory
from subagents.decisions import Decision, Escalation, TaskState
from subagents.model_use import ClaudeReport, ModelUse
from subagents.subagent import DEADLINE_GRACE_S, Runtime, SubagentReport, run_subagent
from traces.spans import end_subagent, subagent_span

__all__ = ["DEADLINE_GRACE_S", "TaskOutcome", "TaskState", "run_plan"]


@dataclass
class TaskOutcome:
    """How one planned task ended."""

    task: PlannedTask
    state: TaskState
    arguments: dict[str, Any]
    report: SubagentReport | None = None
    blocked_by: str | None = None
    reason: str = ""
    category: ErrorCategory | None = None
    partial_results: list[Any] = field(default_factory=list)

    @property
    def results(self) -> list[Any]:
        return self.report.results if self.report and self.state == TaskState.OK else []

    @property
    def other_results(self) -> dict[str, list[Any]]:
        """Claude mode: records of the source's other tools the model read."""
        return self.report.other_results if isinstance(self.report, ClaudeReport) else {}

    @property
    def model_use(self) -> ModelUse | None:
        """Claude mode: the turns and tokens the model spent on this task."""
        return self.report.model if isinstance(self.report, ClaudeReport) else None

    @property
    def attempts(self) -> int:
        return self.report.attempts if self.report else 0

    @property
    def decisions(self) -> list[Decision]:
        return self.report.decisions if self.report else []

    @property
    def escalation(self) -> Escalation | None:
        return self.report.escalation if self.report else None

    @property
    def attempted_query(self) -> AttemptedQuery:
        if self.report is not None:
            escalation = self.report.escalation
            return escalation.attempted_query if escalation else self.report.attempted_query
        return AttemptedQuery(tool=self.task.tool, arguments={k: str(v) for k, v in self.arguments.items()})


def _resolve(task: PlannedTask, outcomes: dict[str, TaskOutcome]) -> dict[str, Any] | TaskOutcome:
    """The task's arguments with upstream values filled in, or the ``blocked`` outcome that stops it."""
    resolved: dict[str, Any] = {}
    for name, value in task.arguments.items():
        if not isinstance(value, Ref):
            resolved[name] = value
            continue
        upstream = outcomes[value.task]
        records = upstream.results
        if len(records) == 1 and value.field in records[0]:
            resolved[name] = records[0][value.field]
            continue
        return _blocked(task, value.task, upstream)
    for upstream_id in task.depends_on:  # a dependency must have found what it looked for
        upstream = outcomes[upstream_id]
        if upstream.state != TaskState.OK:
            return _blocked(task, upstream_id, upstream)
    return resolved


def _blocked(task: PlannedTask, upstream_id: str, upstream: TaskOutcome) -> TaskOutcome:
    """The outcome of a task whose upstream did not give the one record it needs, and why.

    A lookup that found nothing, or several candidates, asks the user to fix the input (the named
    customer does not exist as written, or the name is ambiguous); a failed one carries its category.
    """
    records = upstream.results
    category = upstream.category
    if upstream.state == TaskState.EMPTY:
        category = ErrorCategory.VALIDATION
        why = upstream.reason or "nothing matched"
    elif upstream.state == TaskState.OK and len(records) > 1:
        category = ErrorCategory.VALIDATION
        candidates = ", ".join(_candidate(record) for record in records[:10])
        why = f"{len(records)} records match, so which one is meant is ambiguous: {candidates}; name one of them"
    else:
        why = upstream.reason or f"{upstream_id} ended {upstream.state}"
    return TaskOutcome(
        task, TaskState.BLOCKED, dict(task.arguments), blocked_by=upstream_id, category=category,
        reason=f"blocked by {upstream_id} ({upstream.state}): {why}",
    )  # fmt: skip


def _candidate(record: Any) -> str:
    if not isinstance(record, dict):
        return str(record)[:60]
    label = record.get("name") or record.get("email") or record.get("title")
    return f"{record.get('id', '?')} ({label})" if label else str(record.get("id", "?"))


def _outcome_of(task: PlannedTask, arguments: dict[str, Any], report: SubagentReport) -> TaskOutcome:
    escalation = report.escalation
    if report.state != TaskState.ESCALATED or escalation is None:
        return TaskOutcome(task, report.state, arguments, report=report, reason=report.message or "")
    return TaskOutcome(
        task, TaskState.DEADLINE if report.out_of_time else TaskState.ESCALATED, arguments, report=report,
        reason=escalation.message, category=escalation.error_category, partial_results=escalation.partial_results,
    )  # fmt: skip


async def run_plan(
    plan: Plan, runtime: Runtime, deadline_s: float, earlier: Mapping[str, TaskOutcome] | None = None
) -> dict[str, TaskOutcome]:
    """Run every task of the plan; return how each ended, in plan order. ``earlier``: how the tasks
    an earlier round ran ended (a grown plan runs only the tasks it added)."""
    deadline = runtime.clock.now() + deadline_s
    outcomes: dict[str, TaskOutcome] = dict(earlier or {})
    done = {task_id: anyio.Event() for task_id in plan.tasks}
    for task_id in outcomes:
        done[task_id].set()
    gates = plan.gates  # tasks that wait for a customer lookup without using its output

    async def carry(task: PlannedTask) -> None:
        try:
            gated = gates.get(task.id, ())
            for upstream in (*task.depends_on, *gated):
                await done[upstream].wait()
            gate = next((lookup for lookup in gated if outcomes[lookup].state != TaskState.OK), None)
            resolved = _blocked(task, gate, outcomes[gate]) if gate else _resolve(task, outcomes)
            if isinstance(resolved, TaskOutcome):  # one span per task, run or not
                with subagent_span(task.id, task.source, task.tool, {}, follows=task.follows) as span:
                    end_subagent(
                        span,
                        state=TaskState.BLOCKED,
                        attempts=0,
                        category=resolved.category,
                        message=resolved.reason,
                    )
                outcomes[task.id] = resolved
                return
            report = await run_subagent(task.resolved(resolved), runtime, deadline)
            outcomes[task.id] = _outcome_of(task, resolved, report)
        finally:
            done[task.id].set()
            if task.id in outcomes:
                ended = outcomes[task.id]
                runtime.observer.ended(task.id, ended.state, ended.attempts, ended.decisions)

    with anyio.move_on_after(max(deadline_s, 0.0) + 2 * DEADLINE_GRACE_S):  # after the subagents' own
        async with anyio.create_task_group() as group:
            for task in plan.order():
                if task.id not in outcomes:
                    group.start_soon(carry, task)
    for task in plan.order():
        if task.id not in outcomes:
            outcomes[task.id] = TaskOutcome(
                task, TaskState.DEADLINE, dict(task.arguments), category=ErrorCategory.TRANSIENT,
                reason=f"the query's deadline of {deadline_s:g} s passed before {task.source} answered",
            )  # fmt: skip
    return {task.id: outcomes[task.id] for task in plan.order()}
