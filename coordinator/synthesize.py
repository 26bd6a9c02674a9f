"""Synthesize: findings with citations, every gap annotated, a short deterministic brief.

Each record a source returned becomes a finding citing ``source:tool:record-id``; a valid empty
result is a finding too ("no open tickets"), never a gap. Each task without a full result becomes a
gap with what was tried, the partial results kept, and the next step its category calls for.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from typing import Any

from coordinator.plan import Plan, Ref
from coordinator.report import (
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
from sources.domain import pounds

__all__ = ["synthesize"]

_NEXT_STEP: dict[ErrorCategory | None, NextStep] = {
    ErrorCategory.TRANSIENT: "retry later",
    ErrorCategory.VALIDATION: "fix the input",
    ErrorCategory.BUSINESS: "escalate to a manager",
    ErrorCategory.PERMISSION: "request access",
    None: "retry later",
}


def _customer(record: dict[str, Any]) -> str:
    return (
        f"{record['name']} <{record['email']}>, {record['tier']} tier, customer since {record['created_on']}"
    )


def _order(record: dict[str, Any]) -> str:
    items = "; ".join(
        f"{item['quantity']} x {item['description']} ({item['sku']})" for item in record.get("items", [])
    )
    return f"placed {record['placed_on']}, {record['status'].replace('_', ' ')}, {pounds(record['total'])}: {items}"


def _ticket(record: dict[str, Any]) -> str:
    about = f" about {record['order_id']}" if record.get("order_id") else ""
    return f"{record['status']} {record['priority']}-priority ticket{about}, opened {record['opened_on']}: {record['subject']}"


def _invoice(record: dict[str, Any]) -> str:
    return (
        f"invoice for {record['order_id']}, {record['status']}, {pounds(record['amount'])}, "
        f"refunded {pounds(record['refunded'])}"
    )


def _assessment(record: dict[str, Any]) -> str:
    verdict = "may be refunded" if record["eligible"] else "may not be refunded automatically"
    return f"{pounds(record['requested'])} {verdict}: {record['reason']}"


def _policy(record: dict[str, Any]) -> str:
    return f"{record['title']}: {record['summary']}"


def _refund(record: dict[str, Any]) -> str:
    return f"refund of {pounds(record['amount'])} on {record['order_id']} issued{' (replayed)' if record['replayed'] else ''}"


_DESCRIBE: dict[str, Callable[[dict[str, Any]], str]] = {
    "customer_lookup": _customer,
    "search_orders": _order,
    "search_tickets": _ticket,
    "list_invoices": _invoice,
    "refund_eligibility": _assessment,
    "search_policies": _policy,
    "related_policies": _policy,
    "issue_refund": _refund,
}


def _describe(tool: str, record: Any) -> tuple[str, str]:
    if not isinstance(record, dict):
        return "-", json.dumps(record, ensure_ascii=False)[:300]
    record_id = str(record.get("id", "-"))
    text = _text_only(record)
    if text is not None:  # a server outside the contract answered in words (a file read, a listing)
        return record_id, text
    try:
        return record_id, _DESCRIBE[tool](record)
    except (KeyError, TypeError, ValueError):  # a record of another shape: shown as it came
        return record_id, json.dumps(record, ensure_ascii=False)[:300]


def _text_only(record: dict[str, Any]) -> str | None:
    """A record that is one text and nothing else (``{"content": ...}``, ``{"text": ...}``), as that text
    on one line (how long it may be is the post-call ``TrimResults``'s to say, and it says so)."""
    if len(record) != 1:
        return None
    text = next(iter(record.values()))
    return " ".join(text.split()) if isinstance(text, str) else None


def _findings(outcomes: list[TaskOutcome]) -> list[Finding]:
    findings = []
    for outcome in outcomes:
        task = outcome.task
        if outcome.state == "empty":
            message = (
                outcome.report.message if outcome.report and outcome.report.message else "nothing matched"
            )
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


def _gap(outcome: TaskOutcome) -> Gap | None:
    """The gap a task without a full result leaves; None for one that answered (ok, or a valid empty)."""
    match outcome.state:
        case "escalated" | "blocked" | "deadline" as state:
            return Gap(
                task=outcome.task.id,
                source=outcome.task.source,
                state=state,
                error_category=outcome.category,
                message=outcome.reason,
                attempted_query=outcome.attempted_query,
                partial_results=outcome.partial_results,
                next_step=_NEXT_STEP[outcome.category],
                blocked_by=outcome.blocked_by,
                required_scope=outcome.report.required_scope if outcome.report else None,
            )
        case _:
            return None


def _brief(
    query: str,
    outcomes: list[TaskOutcome],
    findings: list[Finding],
    gaps: list[Gap],
    unplanned: list[NotResearched],
) -> str:
    lines = []
    for outcome in outcomes:
        task = outcome.task
        if outcome.state == "ok":
            cited = [f for f in findings if f.source == task.source and f.tool == task.tool]
            # The line leads with what the question named (ORD-10023 among a customer's orders).
            head = next((f for f in cited if f.record_id.upper() in query.upper()), cited[0])
            more = f" (+{len(cited) - 1} more)" if len(cited) > 1 else ""
            lines.append(f"{task.why or task.id}: {head.record_id} {head.text}{more} [{head.citation}]")
        elif outcome.state == "empty":
            lines.append(f"{task.why or task.id}: none found [{task.source}:{task.tool}:none]")
    lines.extend(gap.answer_line for gap in gaps)
    lines.extend(item.answer_line for item in unplanned)
    return "\n".join(lines)


def _shown(value: Any) -> Any:
    return str(value) if isinstance(value, Ref) else value


def synthesize(
    plan: Plan, trace_id: str, outcomes: dict[str, TaskOutcome], planning: PlanningSummary | None = None
) -> ResearchReport:
    """The report of a plan's run: complete only when every task answered and nothing was left unplanned."""
    ordered = list(outcomes.values())
    findings = _findings(ordered)
    gaps = [gap for gap in map(_gap, ordered) if gap is not None]
    escalations = [outcome.escalation for outcome in ordered if outcome.escalation is not None]
    unplanned = [NotResearched(what=u.what, why=u.why, next_step=u.next_step) for u in plan.unplanned]
    return ResearchReport(
        query=plan.query,
        trace_id=trace_id,
        status="partial" if gaps or unplanned else "complete",
        answer=_brief(plan.query, ordered, findings, gaps, unplanned),
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
