"""Synthesize: findings with citations, every gap annotated, a short deterministic brief.

Each record a source returned becomes a finding citing ``source:tool:record-id``; a valid empty
result is a finding too ("no open tickets"), never a gap. Each task without a full result becomes a
gap with what was tried, the partial results kept, and the next step its category calls for.
"""

from __future__ import annotations

from typing import Any

from coordinator.planning.plan import Plan, Ref
from coordinator.reporting import sentences
from coordinator.reporting.report import (
    Finding,
    Gap,
    NextStep,
    NotResearched,
    PlanningSummary,
    ResearchReport,
    TaskSummary,
)
from coordinator.run import TaskOutcome
from sources.contract import ErrorCategory
from subagents.decisions import TaskState

__all__ = ["synthesize"]

_NEXT_STEP: dict[ErrorCategory | None, NextStep] = {
    ErrorCategory.TRANSIENT: "retry later",
    ErrorCategory.VALIDATION: "fix the input",
    ErrorCategory.BUSINESS: "escalate to a manager",
    ErrorCategory.PERMISSION: "request access",
    None: "retry later",
}


def _describe(tool: str, record: Any) -> tuple[str, str]:
    """A record's id and its sentence (``coordinator.reporting.sentences``): never the record as JSON."""
    return sentences.record_id(record), sentences.describe(tool, record)


def _findings(outcome: TaskOutcome) -> list[Finding]:
    """The findings of one task: each record it returned (its tool's sentence), or what its valid empty
    result said; in Claude mode, the records its model read with the source's other tools too."""
    task = outcome.task
    findings = []
    if outcome.state == TaskState.EMPTY:
        message = outcome.report.message if outcome.report and outcome.report.message else "nothing matched"
        findings.append(Finding(source=task.source, tool=task.tool, record_id="none", text=message))
    for record in outcome.results:
        record_id, text = _describe(task.tool, record)
        if record_id == "-" and len(outcome.results) == 1:  # a record with no id: cited by what was asked
            record_id = ",".join(str(value) for value in outcome.arguments.values()) or "-"
        findings.append(Finding(source=task.source, tool=task.tool, record_id=record_id, text=text))
    for tool, records in outcome.other_results.items():  # Claude mode: the source's other tools
        for record in records:
            record_id, text = _describe(tool, record)
            findings.append(Finding(source=task.source, tool=tool, record_id=record_id, text=text))
    return findings


# A write's own endings, whose way out is not its category's: its outcome unknown, or not approved.
_WRITE_NEXT_STEP: dict[str, NextStep] = {
    "outcome_unknown": "check whether it happened",
    "not_approved": "approve it",
}


def _next_step(outcome: TaskOutcome) -> NextStep:
    decisions = outcome.report.decisions if outcome.report else []
    ending = decisions[-1].action if decisions else ""
    return _WRITE_NEXT_STEP.get(ending, _NEXT_STEP[outcome.category])


def _gap(outcome: TaskOutcome) -> Gap | None:
    """The gap a task without a full result leaves; None for one that answered (ok, or a valid empty)."""
    match outcome.state:
        case TaskState.ESCALATED | TaskState.BLOCKED | TaskState.DEADLINE as state:
            return Gap(
                task=outcome.task.id,
                source=outcome.task.source,
                state=state,
                error_category=outcome.category,
                message=outcome.reason,
                attempted_query=outcome.attempted_query,
                partial_results=outcome.partial_results,
                next_step=_next_step(outcome),
                blocked_by=outcome.blocked_by,
                required_scope=outcome.report.required_scope if outcome.report else None,
            )
        case _:
            return None


def _brief(
    query: str,
    outcomes: list[TaskOutcome],
    findings: dict[str, list[Finding]],
    gaps: list[Gap],
    unplanned: list[NotResearched],
) -> str:
    """One line per task that answered, in its why's words, with its first finding (``findings``:
    each task's own, by task id); then the gaps and what was not researched."""
    lines = []
    for outcome in outcomes:
        task = outcome.task
        cited = [f for f in findings[task.id] if f.tool == task.tool and f.record_id != "none"]
        if outcome.state == TaskState.OK and cited:
            # The line leads with what the question named (ORD-10023 among a customer's orders).
            head = next((f for f in cited if f.record_id.upper() in query.upper()), cited[0])
            more = f" (+{len(cited) - 1} more)" if len(cited) > 1 else ""
            lines.append(f"{task.why or task.id}: {head.record_id} {head.text}{more} [{head.citation}]")
        elif not outcome.state.is_gap:
            lines.append(f"{task.why or task.id}: none found [{task.source}:{task.tool}:none]")
    lines.extend(gap.answer_line for gap in gaps)
    lines.extend(item.answer_line for item in unplanned)
    return "\n".join(lines)


def _not_found(plan: Plan, findings: list[Finding]) -> list[NotResearched]:
    """Each id the plan looked for among the records found (no tool looks it up by its id) that is not
    among them: listed, never left to a note that says where it was looked for."""
    found = {finding.record_id.upper() for finding in findings}
    return [
        NotResearched(
            what=identifier,
            why=f"no tool looks {identifier} up by its id, and it is not among the records found",
            next_step="check the id, or say which records hold it, e.g. 'the tickets of CUST-00042'",
        )
        for identifier in plan.looked_for
        if identifier.upper() not in found
    ]


def _shown(value: Any) -> Any:
    return str(value) if isinstance(value, Ref) else value


def synthesize(
    plan: Plan, trace_id: str, outcomes: dict[str, TaskOutcome], planning: PlanningSummary | None = None
) -> ResearchReport:
    """The report of a plan's run: complete only when every task answered and nothing was left unplanned."""
    ordered = list(outcomes.values())
    found = {outcome.task.id: _findings(outcome) for outcome in ordered}
    findings = [finding for task_findings in found.values() for finding in task_findings]
    gaps = [gap for gap in map(_gap, ordered) if gap is not None]
    escalations = [outcome.escalation for outcome in ordered if outcome.escalation is not None]
    unplanned = [NotResearched(what=u.what, why=u.why, next_step=u.next_step) for u in plan.unplanned]
    unplanned += _not_found(plan, findings)
    return ResearchReport(
        query=plan.query,
        trace_id=trace_id,
        status="partial" if gaps or unplanned else "complete",
        answer=_brief(plan.query, ordered, found, gaps, unplanned),
        findings=findings,
        unplanned=unplanned,
        notes=list(plan.notes),
        tasks=[
            TaskSummary(
                id=o.task.id,
                source=o.task.source,
                tool=o.task.tool,
                arguments={name: _shown(value) for name, value in o.arguments.items()},
                why=o.task.why,
                follows=o.task.follows,
                depends_on=list(o.task.depends_on),
                state=o.state,
                attempts=o.attempts,
                decisions=o.decisions,
                model=o.model_use,
            )
            for o in ordered
        ],
        gaps=gaps,
        escalations=escalations,
        planning=planning or PlanningSummary(planner="deterministic"),
    )
