"""A conversation with Claude as the lead agent, shared by its plan (``coordinator.llm``) and its
later rounds (``coordinator.lead_rounds``): one forced tool per conversation, every answer checked
by the code, an invalid one sent back once with the exact error, the model's time bounded and its
API's failures classified into the sources' contract, every response's tokens spent from the
query's budget."""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, TypeVar

import anyio
from pydantic import BaseModel, Field, ValidationError

from coordinator.planning.plan import PlanError
from coordinator.reporting.report import PlanningStep, PlanningSummary
from sources.contract import ErrorCategory
from sources.deferred import deferred
from subagents.claude import ClaudeSettings, TokenBudget, load_sdk, model_api_category

if TYPE_CHECKING:
    import anthropic
    from anthropic.types import Message, MessageParam, ToolParam, ToolUseBlock
else:
    anthropic = deferred("anthropic")  # the SDK takes seconds to import: only Claude mode asks it

__all__ = ["Conversation", "TaskInput", "Unanswered", "bounded", "first_error", "repaired_once", "tool_use"]


class TaskInput(BaseModel):
    """A task as the model submits it, in a plan or a later round."""

    id: str = Field(pattern=r"^[a-z_][a-z0-9_]*$")
    source: str
    tool: str
    arguments: dict[str, Any]
    depends_on: list[str] = Field(default_factory=list)
    purpose: str = "research"
    why: str = ""


_T = TypeVar("_T")


@dataclass(frozen=True)
class Unanswered:
    """Why the model gave no usable answer in time, in the contract's terms."""

    reason: str
    category: ErrorCategory | None


async def bounded(
    settings: ClaudeSettings,
    within_s: float,
    who: str,
    ask: Callable[[anthropic.AsyncAnthropic], Awaitable[_T]],
) -> _T | Unanswered:
    """``ask`` the model API within ``within_s``: its answer, or why there is none (the one place a
    model's time is bounded and its API's failures are classified, for the plan and the brief alike)."""
    client = None
    try:
        with anyio.move_on_after(within_s):
            await load_sdk()  # a cold SDK counts in the bound, and the loop runs while it loads
            client = settings.client()
            return await ask(client)
        return Unanswered(f"{who} did not answer within {within_s:g} s", ErrorCategory.TRANSIENT)
    except anthropic.AnthropicError as exc:
        return Unanswered(f"the model API failed: {type(exc).__name__}: {exc}", model_api_category(exc))
    finally:
        if client is not None:
            await client.close()


def tool_use(response: Message) -> ToolUseBlock | None:
    """The tool call a forced-tool response carries, if any."""
    return next((block for block in response.content if block.type == "tool_use"), None)


@dataclass
class Conversation:
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
        use = tool_use(response)
        if use is None:
            return "", None
        return use.id, use.input


async def repaired_once(conversation: Conversation, check: Callable[[Any], _T], what: str) -> _T | Unanswered:
    """The model's answer as ``check`` makes it (raising ``ValidationError`` or ``PlanError`` with the
    reason); an invalid one sent back once with the exact error; why there is none, else."""
    budget, summary = conversation.budget, conversation.summary
    for attempt in (1, 2):
        if budget.exhausted:
            return Unanswered(f"the token budget is spent ({budget.describe()})", None)
        use_id, raw = await conversation.ask()
        try:
            return check(raw)
        except (ValidationError, PlanError) as exc:
            problem = str(exc).splitlines()[0] if isinstance(exc, PlanError) else first_error(exc)
            if attempt == 2:
                return Unanswered(
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


def first_error(exc: ValidationError) -> str:
    error = exc.errors()[0]
    where = ".".join(str(part) for part in error["loc"])
    return f"{where}: {error['msg']}"
