"""The Messages API as this project uses it: settings and limits, the query's token budget, and the
classification of the API's own failures into the contract.

One place for all three, because the lead agent (``coordinator.llm``) and the subagents
(``subagents.tool_loop``) use the same model under the same limits.

Failures of the model API are classified like the sources' (rate limit, overload, timeout,
connection: transient; bad request: validation; authentication: permission). The anthropic SDK's
own retries (``max_retries``) are the one retry layer for the model API: nothing retries above it.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

import anyio
from pydantic import Field
from pydantic_settings import SettingsConfigDict

from sources.contract import ErrorCategory
from sources.deferred import deferred, load
from sources.environment import Environment, variable

if TYPE_CHECKING:
    import anthropic
    from anthropic.lib.tools import mcp as anthropic_mcp
else:
    anthropic = deferred("anthropic")  # the SDK takes seconds to import: loaded by ``load_sdk``
    anthropic_mcp = deferred("anthropic.lib.tools.mcp")  # its MCP helpers, which the subagents use

__all__ = ["MISSING_KEY", "SET_THE_KEY", "ClaudeSettings", "TokenBudget", "load_sdk", "model_api_category"]

# What Claude mode cannot do without, and how to give it: what a command asked for Claude says when
# the model cannot be asked at all (and what the lead agent's and the brief's fallbacks record).
MISSING_KEY = "no ANTHROPIC_API_KEY is set"
SET_THE_KEY = "export ANTHROPIC_API_KEY=<your key>"


@dataclass(frozen=True)
class ClaudeSettings:
    """Model, limits and where the Messages API is. ``base_url`` and the key come from the environment."""

    model: str = "claude-sonnet-4-6"  # the model every agent of a query asks
    max_tokens: int = 2048  # per model turn
    max_turns: int = 6  # model turns per subagent
    token_budget: int = 200_000  # input + output tokens per query, across every agent
    max_retries: int = 2  # the SDK's own retries: the one retry layer for the model API
    timeout_s: float = 30.0
    api_key: str | None = None
    base_url: str | None = None

    @classmethod
    def from_environment(cls) -> ClaudeSettings:
        """Settings from ``ANTHROPIC_*`` and ``RESEARCH_CLAUDE_*``; a bad number raises ``ValueError``."""
        return cls(**_ClaudeEnvironment.read().model_dump())  # the variables are named as the fields

    def client(self) -> anthropic.AsyncAnthropic:
        # The SDK's OpenTelemetry spans are on by default and use the global tracer provider, so its
        # API calls and tool-runner spans join the query's trace with nothing more to do here.
        return anthropic.AsyncAnthropic(
            api_key=self.api_key, base_url=self.base_url, max_retries=self.max_retries, timeout=self.timeout_s
        )


async def load_sdk() -> None:
    """The anthropic SDK and its MCP helpers loaded on a worker thread, before a client is made.

    A cold load takes seconds (2 to 12 s measured on this 2-core machine under load). Loaded by the
    first attribute read, as it was, it ran on the event loop, where nothing else ran and no time
    bound could end it: it spent the query's deadline outside the planning share that bounds the
    lead agent, and the subagents started with nothing left. Awaited here, the loop runs on and the
    caller's bound ends the wait (the load finishes in the background; the import system's locks
    make any other reader wait for it, never see it half done).
    """
    await anyio.to_thread.run_sync(load, anthropic, anthropic_mcp, abandon_on_cancel=True)


_POSITIVE = "a positive whole number"


class _ClaudeEnvironment(Environment):
    """The variables ``ClaudeSettings`` reads: ``RESEARCH_CLAUDE_*``, and the SDK's own ``ANTHROPIC_*``."""

    model_config = SettingsConfigDict(env_prefix="RESEARCH_CLAUDE_")

    model: str = ClaudeSettings.model
    max_tokens: int = variable(ClaudeSettings.max_tokens, _POSITIVE, ge=1)
    max_turns: int = variable(ClaudeSettings.max_turns, _POSITIVE, ge=1)
    token_budget: int = variable(ClaudeSettings.token_budget, _POSITIVE, ge=1)
    api_key: str | None = Field(default=None, validation_alias="ANTHROPIC_API_KEY")
    base_url: str | None = Field(default=None, validation_alias="ANTHROPIC_BASE_URL")


@dataclass
class TokenBudget:
    """The tokens one query may spend, shared by its lead agent, its subagents and its brief writer."""

    limit: int
    used: int = 0

    def spend(self, usage: Any) -> tuple[int, int]:
        """Count a response's ``usage``; returns its (input, output) tokens."""
        tokens = (usage.input_tokens or 0, usage.output_tokens or 0)
        self.used += sum(tokens)
        return tokens

    @property
    def exhausted(self) -> bool:
        return self.used >= self.limit

    def describe(self) -> str:
        return f"{self.used:,} of {self.limit:,} tokens used"


def model_api_category(exc: anthropic.AnthropicError) -> ErrorCategory:
    """A model API failure in the contract's terms."""
    if isinstance(exc, anthropic.APIStatusError):
        if exc.status_code in (401, 403):
            return ErrorCategory.PERMISSION
        if exc.status_code == 429 or exc.status_code >= 500:
            return ErrorCategory.TRANSIENT
        return ErrorCategory.VALIDATION
    return ErrorCategory.TRANSIENT  # no answer: a connection failure (timeouts included), or any other
