"""Claude as the lead agent: it plans, and the code keeps every guarantee of the deterministic path.

Claude answers with the plan as the input of a forced ``submit_plan`` tool (structured output). The
plan is validated by the same ``Plan.of`` the deterministic planner goes through; a plan that fails
is sent back once with the exact validation error; a second failure, or a model API that cannot be
reached, falls back to the deterministic planner, and the fallback is recorded in the report.

Failures of the model API are classified into the same contract as the sources' (see
``subagents.claude``); the anthropic SDK's own retries are the one retry layer: nothing retries above it.
Every response's tokens count against the query's ``TokenBudget``.

Claude also writes the brief (``claude_brief``) from the findings and gaps it is given, as claims
that each cite ``source:tool:record-id``; a claim without a citation, or citing a finding that does
not exist, is removed and the removal recorded. The gaps stay as the code built them.

The subagents' tool loops are ``subagents.tool_loop``.
"""

from __future__ import annotations

import math
import re
from typing import TYPE_CHECKING, Any

from pydantic import BaseModel, Field, ValidationError

from coordinator.lead_conversation import (
    Conversation,
    TaskInput,
    Unanswered,
    bounded,
    first_error,
    repaired_once,
    tool_use,
)
from coordinator.planning.plan import Plan, PlanError, PlannedTask, Ref, Unplanned
from coordinator.planning.planner import account_for, left_out, plan_query
from coordinator.planning.tools import Catalog, demo_catalog
from coordinator.reporting.report import (
    Finding,
    PlanningStep,
    PlanningSummary,
    ResearchReport,
    SynthesisStep,
    SynthesisSummary,
)
from sources.contract import ErrorCategory
from sources.deferred import deferred
from subagents.claude import MISSING_KEY, ClaudeSettings, TokenBudget, model_api_category
from subagents.hooks import named_among

if TYPE_CHECKING:
    import anthropic
    from anthropic.types import Message, ToolParam
else:
    anthropic = deferred("anthropic")  # the SDK takes seconds to import: only Claude mode asks it

__all__ = ["ClaudeSettings", "TokenBudget", "claude_brief", "claude_plan", "model_api_category"]

_REF = re.compile(r"^\{(?P<task>[a-z_][a-z0-9_]*)\.(?P<field>[a-z_][a-z0-9_]*)\}$")
_SYSTEM = (
    "You plan research across MCP sources. Call submit_plan exactly once with the tasks needed to "
    "answer the query, and nothing the query does not ask for. Sources and tools: {tools}. A customer "
    "named by email must be resolved first with customers.customer_lookup; later tasks then take its id "
    'as the string "{{customer.id}}" and list "customer" in depends_on. A CUST-NNNNN id can be used '
    'directly. Billing tasks about refunds take purpose "refund research". Plan a write (a refund, or '
    "any tool that is not read-only) only where the query asks for that action, never for a question of "
    "whether it is allowed; the code enforces this and a person approves every write. List in "
    "`unplanned` whatever the query asks or names that no task can research (for example a refund with "
    "no amount), with why and what the user should do."
)


class _UnplannedInput(BaseModel):
    what: str = Field(min_length=1, max_length=300)
    why: str = Field(min_length=1, max_length=300)
    next_step: str = Field(min_length=1, max_length=300)


class _PlanInput(BaseModel):
    tasks: list[TaskInput] = Field(min_length=1, max_length=12)
    unplanned: list[_UnplannedInput] = Field(default_factory=list, max_length=20)


def _tool() -> ToolParam:
    return {
        "name": "submit_plan",
        "description": "Submit the research plan: the tasks, their sources, tools, arguments and dependencies.",
        "input_schema": _PlanInput.model_json_schema(),
    }


def _to_plan(query: str, raw: Any, catalog: Catalog) -> Plan:
    """The model's plan as a checked ``Plan``; raises ``ValidationError`` or ``PlanError`` with the reason."""
    parsed = _PlanInput.model_validate(raw)
    tasks = []
    for task in parsed.tasks:
        arguments: dict[str, Any] = {}
        for name, value in task.arguments.items():
            match = _REF.match(value) if isinstance(value, str) else None
            arguments[name] = Ref(match["task"], match["field"]) if match else value
        tasks.append(PlannedTask(
            task.id, task.source, task.tool, arguments, purpose=task.purpose,
            depends_on=tuple(task.depends_on), why=task.why,
        ))  # fmt: skip
    unplanned = tuple(Unplanned(item.what, item.why, item.next_step) for item in parsed.unplanned)
    # Nothing the question leaves out is researched ("this is not about ORD-10134"); the repair turn
    # says which task named what, and why.
    leave_out = left_out(query, catalog)
    for planned in tasks:
        record = named_among(planned.arguments, leave_out)
        if record is not None:
            raise PlanError(
                f"task {planned.id!r} names {record}: {leave_out[record]}; plan no task on it "
                "(it is listed as not researched)"
            )
    # The model's plan is held to the same rule as the planner's: what the query names is used or listed.
    return account_for(Plan.of(query, tasks, unplanned, offered=catalog.plannable), catalog)


async def claude_plan(
    query: str,
    settings: ClaudeSettings,
    budget: TokenBudget | None = None,
    *,
    within_s: float = math.inf,
    catalog: Catalog | None = None,
) -> tuple[Plan, PlanningSummary]:
    """Claude's plan for ``query``, or the deterministic one when Claude's cannot be used (recorded).

    ``within_s`` bounds the whole conversation (the query's deadline covers planning too); ``catalog``
    is every tool the model may plan (the demo sources' by default, with the registered sources').
    """
    summary = PlanningSummary(planner="claude")
    catalog = catalog or demo_catalog()
    if not settings.api_key:  # the model cannot be asked at all
        return _fallback(query, summary, MISSING_KEY, ErrorCategory.PERMISSION, catalog)
    spending = budget or TokenBudget(settings.token_budget)

    async def converse(client: anthropic.AsyncAnthropic) -> Plan | Unanswered:
        conversation = Conversation(
            settings, client, spending, summary, [{"role": "user", "content": query}],
            system=_SYSTEM.format(tools=catalog.describe()), tool=_tool(),
        )  # fmt: skip
        return await repaired_once(conversation, lambda raw: _to_plan(query, raw, catalog), "plan")

    answer = await bounded(settings, within_s, "the lead agent", converse)
    if isinstance(answer, Unanswered):
        return _fallback(query, summary, answer.reason, answer.category, catalog)
    summary.steps.append(
        PlanningStep(action="plan", reason=f"{len(answer.tasks)} tasks from {settings.model}")
    )
    return answer, summary


def _fallback(
    query: str, summary: PlanningSummary, reason: str, category: ErrorCategory | None, catalog: Catalog
) -> tuple[Plan, PlanningSummary]:
    summary.steps.append(
        PlanningStep(action="fallback", reason=f"{reason}; used the deterministic planner", category=category)
    )
    return plan_query(query, catalog), summary


# --- the brief ------------------------------------------------------------------------------------

_BRIEF_SYSTEM = (
    "You write the brief of a research report. Use only the findings given. Call submit_brief once with "
    "short claims; every claim must cite, in `citations`, the exact citation strings of the findings it "
    "rests on (source:tool:record-id). Do not restate the gaps: they are reported separately."
)


class _Claim(BaseModel):
    text: str = Field(min_length=1, max_length=500)
    citations: list[str] = Field(default_factory=list)


class _BriefInput(BaseModel):
    claims: list[_Claim] = Field(max_length=30)


_BRIEF_TOOL: ToolParam = {
    "name": "submit_brief",
    "description": "Submit the brief as cited claims.",
    "input_schema": _BriefInput.model_json_schema(),
}


async def claude_brief(
    report: ResearchReport,
    settings: ClaudeSettings,
    budget: TokenBudget | None = None,
    *,
    within_s: float = math.inf,
) -> ResearchReport:
    """The report with Claude's cited brief as its answer; uncited claims removed; gaps untouched.

    ``within_s`` bounds the model's answer; past it the deterministic brief stays (recorded). The
    answer ends with the report's gaps, stated as the code states them (``ResearchReport.gap_lines``).
    """
    summary = SynthesisSummary(writer="claude")
    if not settings.api_key:
        return _keep_answer(report, summary, MISSING_KEY, ErrorCategory.PERMISSION)
    spending = budget or TokenBudget(settings.token_budget)
    if spending.exhausted:
        return _keep_answer(report, summary, f"the token budget is spent ({spending.describe()})", None)

    async def write(client: anthropic.AsyncAnthropic) -> Message:
        return await client.messages.create(
            model=settings.model,
            max_tokens=settings.max_tokens,
            system=_BRIEF_SYSTEM,
            messages=[{"role": "user", "content": _brief_prompt(report)}],
            tools=[_BRIEF_TOOL],
            tool_choice={"type": "tool", "name": "submit_brief"},
        )

    response = await bounded(settings, within_s, "the brief writer", write)
    if isinstance(response, Unanswered):
        return _keep_answer(report, summary, response.reason, response.category)
    summary.input_tokens, summary.output_tokens = spending.spend(response.usage)
    use = tool_use(response)
    try:
        brief = _BriefInput.model_validate(use.input if use is not None else None)
    except ValidationError as exc:
        reason = f"the brief was not in the expected form: {first_error(exc)}"
        return _keep_answer(report, summary, reason, ErrorCategory.VALIDATION)
    kept = _cited_claims(brief.claims, report.findings, summary)
    answer = "\n".join([*kept, *report.gap_lines()])
    return report.model_copy(update={"answer": answer, "synthesis": summary})


def _brief_prompt(report: ResearchReport) -> str:
    """What the brief writer is given: the query, every finding with its citation, the gaps."""
    findings = [f"[{finding.citation}] {finding.text}" for finding in report.findings]
    gaps = [
        f"{gap.task} ({gap.source}): {gap.state}, {gap.error_category}, next step: {gap.next_step}"
        for gap in report.gaps
    ]
    return (
        f"Query: {report.query}\n\nFindings:\n"
        + "\n".join(findings)
        + "\n\nGaps:\n"
        + ("\n".join(gaps) or "none")
    )


def _cited_claims(claims: list[_Claim], findings: list[Finding], summary: SynthesisSummary) -> list[str]:
    """Each claim that cites only findings that exist, with its citations; the others removed (recorded)."""
    valid = {finding.citation for finding in findings}
    kept = []
    for claim in claims:
        unknown = [citation for citation in claim.citations if citation not in valid]
        if not claim.citations or unknown:
            why = (
                "cites nothing"
                if not claim.citations
                else f"cites {', '.join(unknown)}, which no finding has"
            )
            summary.steps.append(SynthesisStep(action="remove_claim", reason=f"{claim.text!r} {why}"))
            continue
        kept.append(f"{claim.text} [{', '.join(claim.citations)}]")
    summary.steps.append(
        SynthesisStep(action="write", reason=f"{len(kept)} cited claims kept of {len(claims)}")
    )
    return kept


def _keep_answer(
    report: ResearchReport, summary: SynthesisSummary, reason: str, category: ErrorCategory | None
) -> ResearchReport:
    summary.steps.append(
        SynthesisStep(action="fallback", reason=f"{reason}; kept the deterministic brief", category=category)
    )
    return report.model_copy(update={"synthesis": summary})
