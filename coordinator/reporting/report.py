"""The research report: the stable interface `research ask --json` prints for scripts.

    {"query": "...", "trace_id": "32 hex", "status": "complete" | "partial",
     "answer": "...",
     "findings":    [{"source", "tool", "record_id", "text"}],
     "tasks":       [{"id", "source", "tool", "arguments", "why", "depends_on", "state", "attempts",
                      "decisions": [...], "turns", "input_tokens", "output_tokens"}],
     "gaps":        [{"task", "source", "state", "errorCategory", "message", "attempted_query",
                      "partial_results", "next_step"}],
     "unplanned":   [{"what", "why", "next_step"}]   what the query asked that no task researched
     "notes":       ["read 'polcy' as 'policy'", ...]  how the query was read
     "escalations": [ the subagent escalation contract ],
     "planning": {"planner", "steps", tokens}, "synthesis": {"writer", "steps", tokens},
     "tokens": {"limit", "used"} in Claude mode, else null}

Field names follow DESIGN section 5; scripts and checks rely on them.
"""

from __future__ import annotations

from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field

from sources.contract import AttemptedQuery, ErrorCategory
from subagents.decisions import Decision, Escalation, TaskState
from subagents.model_use import ModelUse

__all__ = [
    "REPORT_FORMAT",
    "Finding",
    "Gap",
    "NextStep",
    "NotResearched",
    "PlanningStep",
    "PlanningSummary",
    "ResearchReport",
    "SynthesisStep",
    "SynthesisSummary",
    "TaskSummary",
    "TokenUse",
]

# What every report says it is, so a reader (a batch resuming its folder) tells this project's reports
# from any other JSON; a change of the report's meaning that old readers would misread takes a new one.
ReportFormat = Literal["research-report/1"]
REPORT_FORMAT: ReportFormat = "research-report/1"

NextStep = Literal[
    "retry later", "fix the input", "escalate to a manager", "request access",
    "check whether it happened",  # a write whose outcome is unknown: never resent blindly
    "approve it",  # a write nobody approved: --approve, or yes at the prompt
]  # fmt: skip


class _Model(BaseModel):
    model_config = ConfigDict(populate_by_name=True, frozen=True)


class Finding(_Model):
    source: str
    tool: str
    record_id: str
    text: str

    @property
    def citation(self) -> str:
        return f"{self.source}:{self.tool}:{self.record_id}"


class TaskSummary(_Model):
    id: str
    source: str
    tool: str
    # The arguments it ran with (an upstream value it never received shows as "{task.field}").
    arguments: dict[str, Any] = Field(default_factory=dict)
    why: str = ""
    follows: str = Field(
        default="",
        description="A task a later round added: the finding it follows, as task:record (orders:ORD-10074).",
    )
    depends_on: list[str] = Field(default_factory=list)
    state: TaskState
    attempts: int
    decisions: list[Decision]
    # Claude mode: the model turns this task's subagent took, and its tokens (absent in deterministic mode).
    model: ModelUse | None = None


class Gap(_Model):
    task: str
    source: str
    state: Literal[TaskState.ESCALATED, TaskState.BLOCKED, TaskState.DEADLINE]  # a gap's
    error_category: ErrorCategory | None = Field(alias="errorCategory")
    message: str
    attempted_query: AttemptedQuery
    partial_results: list[Any]
    next_step: NextStep
    blocked_by: str | None = None
    # A permission gap: the scope that would allow the call; `--grant SCOPE` lets the broker grant it.
    required_scope: str | None = Field(default=None, alias="requiredScope")

    @property
    def way_out(self) -> str:
        """The next step, with the option that takes it where there is one."""
        if self.required_scope:
            return f"{self.next_step}: ask again with --grant {self.required_scope}"
        return self.next_step

    @property
    def answer_line(self) -> str:
        """The gap as the answer states it, whoever wrote the rest of the answer."""
        category = self.error_category or "n/a"
        return f"GAP {self.task} ({self.source}, {self.state}, {category}): {self.message} -> {self.way_out}"


class NotResearched(_Model):
    """Something the query named or asked that no task researched: the report cannot be complete."""

    what: str
    why: str
    next_step: str

    @property
    def answer_line(self) -> str:
        """What was not researched, as the answer states it."""
        return f"GAP not researched: {self.what}: {self.why} -> {self.next_step}"


class _Step(_Model):
    """One step a model-driven part took; ``action`` is narrowed by each kind of step."""

    reason: str
    category: ErrorCategory | None = None


class _ModelUse(BaseModel):
    """What a model-driven part cost (tokens stay 0 when the code did the work)."""

    input_tokens: int = 0
    output_tokens: int = 0


class PlanningStep(_Step):
    """One step of making the plan: the lead agent's plan, a repair of it, or the fallback; in later
    rounds (``coordinator.lead_rounds``), the tasks it added (``round``), one it added that the code
    refused (``refuse``), or why the rounds ended (``stop``)."""

    action: Literal["plan", "repair", "fallback", "round", "refuse", "stop"]


class PlanningSummary(_ModelUse):
    """How the plan was made: by which planner, through which steps, at what token cost."""

    planner: Literal["claude", "deterministic"]
    steps: list[PlanningStep] = Field(default_factory=list)


class SynthesisStep(_Step):
    """One step of writing the answer: the model's brief, a claim removed for want of a citation, a fallback."""

    action: Literal["write", "remove_claim", "fallback"]


class SynthesisSummary(_ModelUse):
    """Who wrote the answer; every claim removed for want of a valid citation is listed here."""

    writer: Literal["claude", "deterministic"]
    steps: list[SynthesisStep] = Field(default_factory=list)


class TokenUse(_Model):
    """The query's token budget in Claude mode, and how much of it every agent together used."""

    limit: int
    used: int


class ResearchReport(_Model):
    format: ReportFormat = Field(
        default=REPORT_FORMAT, description="What this JSON is: a research coordinator's report, version 1."
    )
    query: str
    trace_id: str = Field(pattern=r"^[0-9a-f]{32}$")
    status: Literal["complete", "partial"]
    answer: str
    findings: list[Finding]
    tasks: list[TaskSummary]
    gaps: list[Gap]
    escalations: list[Escalation]
    unplanned: list[NotResearched] = Field(default_factory=list)
    notes: list[str] = Field(default_factory=list)
    planning: PlanningSummary = Field(default_factory=lambda: PlanningSummary(planner="deterministic"))
    synthesis: SynthesisSummary = Field(default_factory=lambda: SynthesisSummary(writer="deterministic"))
    tokens: TokenUse | None = None  # Claude mode only

    def gap_lines(self) -> list[str]:
        """What the answer states of every gap and of what was not researched, in the code's words."""
        return [*(gap.answer_line for gap in self.gaps), *(item.answer_line for item in self.unplanned)]

    def to_json(self) -> str:
        return self.model_dump_json(by_alias=True, indent=2)
