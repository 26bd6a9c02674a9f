"""What a subagent decided, step by step, and what it hands its coordinator: its report.

These are the subagents' shapes, not a source's: a source answers one call in the contract
(``sources.contract``) and knows nothing of retries, repairs or models. A subagent records each step
as a ``Decision``; one that cannot recover reports an ``Escalation``: the full contract with every
field present, including the ordered decisions that led there.

The actions of the code's own recovery come first; the model's (Claude mode) are kept apart, so a
reader sees which steps exist only when a model drives a subagent.
"""

from __future__ import annotations

from enum import StrEnum
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field

from sources.contract import AttemptedQuery, ErrorCategory, WireModel

__all__ = ["Decision", "DecisionAction", "Escalation", "SubagentReport", "TaskState"]


class TaskState(StrEnum):
    """How a task ended: the one list every module reads (a subagent reports the first three, the
    coordinator the other two)."""

    OK = "ok"  # answered, with records
    EMPTY = "empty"  # answered: looked, and found nothing (resultCount 0); not a gap
    ESCALATED = "escalated"  # the subagent could not recover: a gap, its partial results attached
    BLOCKED = "blocked"  # never ran: what it needed from an upstream task is missing or ambiguous
    DEADLINE = "deadline"  # the query's deadline came first

    @property
    def is_gap(self) -> bool:
        """Whether the task leaves a gap in the answer (everything but an answer, or a valid empty one)."""
        return self not in (TaskState.OK, TaskState.EMPTY)


CodeAction = Literal[
    "retry", "repair", "elevate", "escalate", "accept_empty", "give_up", "breaker_open", "hook_blocked",
    "outcome_unknown", "approved", "not_approved",
]  # fmt: skip
# outcome_unknown: a write failed after it may have acted and is not sent again; approved and
# not_approved: a person's yes to a write (given up front or at a prompt), or its absence.
# Claude mode's: an error handed to the model to act on, a call the code would not send (identical to
# one that failed for good, or over the call budget), the code taking over the task from a model that
# could not carry on, and the code ending the model's loop (turns, tokens, deadline).
ModelAction = Literal["to_model", "refused", "fallback", "stop_model"]
DecisionAction = CodeAction | ModelAction


class Decision(WireModel):
    """One step a subagent's recovery took, in order."""

    action: DecisionAction
    category: ErrorCategory | None = None
    attempt: int = Field(ge=1)
    backoff_ms: int = Field(default=0, ge=0)
    reason: str


class Escalation(WireModel):
    """What a subagent hands its coordinator when it cannot recover. Every field is always present."""

    is_error: Literal[True] = Field(default=True, alias="isError")
    error_category: ErrorCategory = Field(alias="errorCategory")
    is_retryable: bool = Field(alias="isRetryable")
    message: str = Field(min_length=1)
    attempted_query: AttemptedQuery
    partial_results: list[Any]
    source: str
    attempts: int = Field(ge=0)
    decisions: list[Decision]

    def to_wire(self) -> dict[str, Any]:
        # All fields always present: partial_results is [] when none, never missing.
        return self.model_dump(mode="json", by_alias=True)


class SubagentReport(BaseModel):
    """What a subagent hands its coordinator."""

    model_config = ConfigDict(frozen=True)

    task: str
    source: str
    tool: str
    state: Literal[TaskState.OK, TaskState.EMPTY, TaskState.ESCALATED]
    results: list[Any] = []
    truncated: bool = False
    message: str | None = None
    attempts: int
    decisions: list[Decision]
    attempted_query: AttemptedQuery
    escalation: Escalation | None = None
    # Escalated on a permission error: the scope the source said would allow the call (the way out).
    required_scope: str | None = None
    out_of_time: bool = False  # escalated because the deadline came, not because recovery ran out
