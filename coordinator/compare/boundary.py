"""The one substitution a comparison makes: what a subagent learns from a failed call.

Both modes classify every outcome with the contract's own classifier (``subagents.classify``) and
keep that as the truth, for the figures. The **structured** mode hands the subagent that outcome.
The **generic** mode hands it what the anti-pattern says of any failure, ``Operation failed``: no
category, no ``isRetryable``, no ``attempted_query``, no ``partial_results``, and a valid empty
result is a failure like any other. With nothing to tell one failure from another, the only policy
left is to try again: the outcome is passed on as a failure the recovery policy retries up to the
same cap and then gives up on (the policy's action for a transient fault). Everything else (planner,
breaker, deadline, hooks, recovery code) is the same code in both modes.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from typing import Any

from mcp.types import CallToolResult, TextContent

from sources.contract import EmptyResult, ErrorCategory, ResultPage, ToolError
from subagents.classify import CONTRACT, Outcome

__all__ = ["GENERIC_MESSAGE", "Boundary", "operation_failed"]

GENERIC_MESSAGE = "Operation failed"


def operation_failed(truth: Outcome) -> Outcome:
    """``truth`` as the anti-pattern reports it: a result stays a result; anything else is one message.

    The transport's own knowledge that a session died (``reopen``) is kept: that is the SDK's, below
    any message a tool returns, and a generic system reconnects too.
    """
    if truth.kind == "ok":
        return truth
    return Outcome(
        "error", ToolError.of(ErrorCategory.TRANSIENT, GENERIC_MESSAGE), "operation_failed", truth.reopen
    )


@dataclass
class Boundary:
    """A ``subagents.classify.Classifier`` that keeps every call's true outcome, in call order."""

    generic: bool
    truths: list[Outcome] = field(default_factory=list)

    def result(self, result: CallToolResult, *, source: str = "") -> Outcome:
        return self._seen(CONTRACT.result(result, source=source))

    def exception(self, exc: Exception, *, source: str = "") -> Outcome:
        return self._seen(CONTRACT.exception(exc, source=source))

    def for_model(self, answer: ResultPage[Any] | EmptyResult | ToolError) -> CallToolResult:
        """In Claude mode the model reads what the anti-pattern sends: ``{"isError": true, "message": ...}``."""
        if not self.generic or not isinstance(answer, ToolError):
            return CONTRACT.for_model(answer)
        text = json.dumps({"isError": True, "message": GENERIC_MESSAGE})
        return CallToolResult(content=[TextContent(type="text", text=text)], is_error=True)

    def _seen(self, truth: Outcome) -> Outcome:
        # A subagent runs its post-call hooks right after this, with no await between, so the n-th
        # truth here is the n-th call a post-call hook records (see figures.pair).
        self.truths.append(truth)
        return operation_failed(truth) if self.generic else truth
