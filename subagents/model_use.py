"""What a model did in a subagent (Claude mode), kept apart from the core report.

The core ``SubagentReport`` says what a task found and every decision on the way, whoever chose the
calls. A Claude-mode report is that report plus what only a model leaves: its turns, its tokens, and
the records of the source's other tools it chose to read.
"""

from __future__ import annotations

from typing import Any

from pydantic import BaseModel, ConfigDict, Field

from subagents.decisions import SubagentReport

__all__ = ["ClaudeReport", "ModelUse"]


class ModelUse(BaseModel):
    """A model's share of one agent's work: its turns and the tokens they cost."""

    model_config = ConfigDict(frozen=True)

    turns: int = 0
    input_tokens: int = 0
    output_tokens: int = 0

    def plus(self, turns: int = 0, input_tokens: int = 0, output_tokens: int = 0) -> ModelUse:
        return ModelUse(
            turns=self.turns + turns,
            input_tokens=self.input_tokens + input_tokens,
            output_tokens=self.output_tokens + output_tokens,
        )


class ClaudeReport(SubagentReport):
    """A subagent's report in Claude mode: the core report, what the model used and what else it read."""

    model: ModelUse = ModelUse()
    other_results: dict[str, list[Any]] = Field(
        default_factory=dict
    )  # records of the source's other tools, by tool
