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
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, TypeVar

import anyio
from pydantic import BaseModel, Field, ValidationError

from coordinator.planning.plan import Plan, PlanError, PlannedTask, Ref, Unplanned
from coordinator.planning.planner import account_for, plan_query
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
from subagents.claude import MISSING_KEY, ClaudeSettings, TokenBudget, load_sdk, model_api_category

if TYPE_CHECKING:
    import anthropic
    from anthropic.types import Message, MessageParam, ToolParam, ToolUseBlock
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


class _TaskInput(BaseModel):
    id: str = Field(pattern=r"^[a-z_][a-z0-9_]*$")
    source: str
    tool: str
    arguments: dict[str, Any]
    depends_on: list[str] = Field(default_factory=list)
    purpose: str = "research"
    why: str = ""


class _UnplannedInput(BaseModel):
    what: str = Field(min_length=1, max_length=300)
    why: str = Field(min_length=1, max_length=300)
    next_step: str = Field(min_length=1, max_length=300)


class _PlanInput(BaseModel):
    tasks: list[_TaskInput] = Field(min_length=1, max_length=12)
    unplanned: list[_UnplannedInput] = Field(default_factory=list, max_length=20)


_T = TypeVar("_T")


@dataclass(frozen=True)
class _Unanswered:
    """Why the model gave no usable answer in time, in the contract's terms."""

    reason: str
    category: ErrorCategory | None


async def _bounded(
    settings: ClaudeSettings,
    within_s: float,
    who: str,
    ask: Callable[[anthropic.AsyncAnthropic], Awaitable[_T]],
) -> _T | _Unanswered:
    """``ask`` the model API within ``within_s``: its answer, or why there is none (the one place a
    model's time is bounded and its API's failures are classified, for the plan and the brief alike)."""
    client = None
    try:
        with anyio.move_on_after(within_s):
            await load_sdk()  # a cold SDK counts in the bound, and the loop runs while it loads
            client = settings.client()
            return await ask(client)
        return _Unanswered(f"{who} did not answer within {within_s:g} s", ErrorCategory.TRANSIENT)
    except anthropic.AnthropicError as exc:
        return _Unanswered(f"the model API failed: {type(exc).__name__}: {exc}", model_api_category(exc))
    finally:
        if client is not None:
            await client.close()


def _tool_use(response: Message) -> ToolUseBlock | None:
    """The tool call a forced-tool response carries, if any."""
    return next((block for block in response.content if block.type == "tool_use"), None)


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
    # The model's plan is held to the same rule as the planner's: what the query names is used or listed.
    return account_for(Plan.of(query, tasks, unplanned, offered=catalog.plannable), catalog)


@dataclass
class _Conversation:
    """A conversation with one forced tool: each answer is that tool's input; its tokens are spent
    from the query's budget and counted on ``summary`` (the lead's plan and its later rounds alike)."""

    settings: ClaudeSettings
    client: anthropic.AsyncAnthropic
    budget: TokenBudget
    summary: PlanningSummary
    messages: list[MessageParam]
    system: str
    tool: ToolParam

    async def ask(self) -> tuple[str, Any]:
        """One model turn; returns the forced tool's use id and its input."""
        response = await self.client.messages.create(
            model=self.settings.model,
            max_tokens=self.settings.max_tokens,
            system=self.system,
            messages=self.messages,
            tools=[self.tool],
            tool_choice={"type": "tool", "name": self.tool["name"]},
        )
        input_tokens, output_tokens = self.budget.spend(response.usage)
        self.summary.input_tokens += input_tokens
        self.summary.output_tokens += output_tokens
        self.messages.append({"role": "assistant", "content": response.content})
        use = _tool_use(response)
        if use is None:
            return "", None
        return use.id, use.input


async def _repaired_once(
    conversation: _Conversation, check: Callable[[Any], _T], what: str
) -> _T | _Unanswered:
    """The model's answer as ``check`` makes it (raising ``ValidationError`` or ``PlanError`` with the
    reason); an invalid one sent back once with the exact error; why there is none, else."""
    budget, summary = conversation.budget, conversation.summary
    for attempt in (1, 2):
        if budget.exhausted:
            return _Unanswered(f"the token budget is spent ({budget.describe()})", None)
        use_id, raw = await conversation.ask()
        try:
            return check(raw)
        except (ValidationError, PlanError) as exc:
            problem = str(exc).splitlines()[0] if isinstance(exc, PlanError) else _first_error(exc)
            if attempt == 2:
                return _Unanswered(
                    f"the repaired {what} is still invalid: {problem}", ErrorCategory.VALIDATION
                )
            summary.steps.append(
                PlanningStep(action="repair", reason=problem, category=ErrorCategory.VALIDATION)
            )
            conversation.messages.append({
                "role": "user",
                "content": [{"type": "tool_result", "tool_use_id": use_id, "is_error": True,
                             "content": f"The {what} was refused: {problem}. Submit a corrected {what}."}],
            })  # fmt: skip
    raise AssertionError("unreachable: the loop returns on its second pass")


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

    async def converse(client: anthropic.AsyncAnthropic) -> Plan | _Unanswered:
        conversation = _Conversation(
            settings, client, spending, summary, [{"role": "user", "content": query}],
            system=_SYSTEM.format(tools=catalog.describe()), tool=_tool(),
        )  # fmt: skip
        return await _repaired_once(conversation, lambda raw: _to_plan(query, raw, catalog), "plan")

    answer = await _bounded(settings, within_s, "the lead agent", converse)
    if isinstance(answer, _Unanswered):
        return _fallback(query, summary, answer.reason, answer.category, catalog)
    summary.steps.append(
        PlanningStep(action="plan", reason=f"{len(answer.tasks)} tasks from {settings.model}")
    )
    return answer, summary


def _first_error(exc: ValidationError) -> str:
    error = exc.errors()[0]
    where = ".".join(str(part) for part in error["loc"])
    return f"{where}: {error['msg']}"


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

    response = await _bounded(settings, within_s, "the brief writer", write)
    if isinstance(response, _Unanswered):
        return _keep_answer(report, summary, response.reason, response.category)
    summary.input_tokens, summary.output_tokens = spending.spend(response.usage)
    use = _tool_use(response)
    try:
        brief = _BriefInput.model_validate(use.input if use is not None else None)
    except ValidationError as exc:
        reason = f"the brief was not in the expected form: {_first_error(exc)}"
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
