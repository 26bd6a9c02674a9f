"""The error contract: the wire shapes every source speaks and every subagent reads.

Three shapes travel from a source to its caller, one model each:

    ResultPage   isError false   {"resultCount": 2, "results": [...], "truncated": false}
    EmptyResult  isError false   {"resultCount": 0, "results": [], "message": "...matched nothing..."}
    ToolError    isError true    {"errorCategory": ..., "isRetryable": ..., "description": ...,
                                  "attempted_query"?, "partial_results"?, "retryAfterMs"?}

What a subagent makes of these (its decisions, and the escalation it hands its coordinator) is the
subagents' own (``subagents.decisions``): a source knows nothing of retries or models.

Wire names are camelCase where the contract has them (``errorCategory``, ``isRetryable``,
``retryAfterMs``, ``resultCount``) and snake_case where it has them (``attempted_query``,
``partial_results``). Python code uses snake_case attributes throughout; the aliases are the wire.

``sources.tool_failure.to_call_tool_result`` is the one way a model becomes an MCP ``CallToolResult``. Every result carries
its JSON in one text block, the form every client can read. A success (a page, or the valid empty
result, which is a page with no records) also carries it as ``structuredContent``, which conforms to
the tool's published ``outputSchema`` (``ResultPage`` of its record). An error travels in the text
block only: clients such as the official TypeScript SDK validate any ``structuredContent`` against the
``outputSchema`` even on ``isError`` (the spec says structured results MUST conform to it), and an
error is not a page, so sent there it would reach them as an opaque protocol error instead of data.
``parse_tool_result`` is its inverse, reading the text where there is no structured copy.

An error also carries the draft MCP tool-failure metadata in its ``_meta``
(``io.modelcontextprotocol/toolFailure``, written there too, the one module that knows the draft):
the same facts in the place the proposal would standardise, beside the contract.
"""

from __future__ import annotations

import json
from enum import StrEnum
from typing import TYPE_CHECKING, Any, Generic, Literal, TypeVar

from pydantic import BaseModel, ConfigDict, Field, ValidationError, model_validator

from sources.deferred import deferred

# The mcp SDK loads with the first result made or read: the CLI and the planner read the models only.
if TYPE_CHECKING:
    import mcp.types
    from mcp.types import CallToolResult
else:
    mcp = deferred("mcp")

__all__ = [
    "AnyPage",
    "AttemptedQuery",
    "ContractViolation",
    "EmptyResult",
    "ErrorCategory",
    "ResultPage",
    "ToolError",
    "ToolFailure",
    "WireModel",
    "parse_tool_result",
    "result_text",
]

RecordT = TypeVar("RecordT", bound=BaseModel)


class ErrorCategory(StrEnum):
    """Which branch of the recovery tree a failure takes."""

    TRANSIENT = "transient"  # the call did not execute; the identical call may succeed later
    VALIDATION = "validation"  # the input was wrong; fix the arguments and call again
    BUSINESS = "business"  # a rule refused it; retrying cannot help, a human decides
    PERMISSION = "permission"  # the caller lacks a scope; elevate or escalate


class WireModel(BaseModel):
    """Base for wire models: accept Python names and wire aliases, reject unknown fields."""

    model_config = ConfigDict(populate_by_name=True, extra="forbid", frozen=True)

    def to_wire(self) -> dict[str, Any]:
        """The JSON object this model is on the wire (aliases, optional fields left out when unset)."""
        return self.model_dump(mode="json", by_alias=True, exclude_none=True)


class AttemptedQuery(WireModel):
    """The exact call that was made: a tool and the arguments it ran with."""

    tool: str
    arguments: dict[str, Any]


class ResultPage(WireModel, Generic[RecordT]):
    """A successful result. Also the output schema of every tool, so it admits the empty shape."""

    result_count: int = Field(alias="resultCount", ge=0)
    results: list[RecordT]
    truncated: bool = False
    next_cursor: str | None = Field(
        default=None, alias="nextCursor", description="Pass as `cursor` to fetch the next page."
    )
    message: str | None = None

    @model_validator(mode="after")
    def _count_matches(self) -> ResultPage[RecordT]:
        if self.result_count != len(self.results):
            raise ValueError(
                f"resultCount is {self.result_count} but {len(self.results)} results are present"
            )
        return self


# A page of any records, as a source builds its answers and a subagent reads any server's. Held here:
# pydantic keeps a parametrized generic only weakly, so ``ResultPage[Any]`` written in a function was
# collected with the garbage every few calls and built again, a whole model class (0.3 ms and more).
AnyPage = ResultPage[Any]


class EmptyResult(WireModel):
    """The query executed and matched nothing: a success, never an error, never worth a retry."""

    result_count: Literal[0] = Field(default=0, alias="resultCount")
    results: list[Any] = Field(default_factory=list, max_length=0)
    message: str


class ToolError(WireModel):
    """A tool failure in the contract. ``isRetryable`` is true for transient failures only."""

    error_category: ErrorCategory = Field(alias="errorCategory")
    is_retryable: bool = Field(alias="isRetryable")
    description: str = Field(min_length=1)
    attempted_query: AttemptedQuery | None = None
    partial_results: list[Any] | None = None
    retry_after_ms: int | None = Field(default=None, alias="retryAfterMs", ge=0)
    required_scope: str | None = Field(
        default=None,
        alias="requiredScope",
        description="For a permission error: the scope that would allow the call.",
    )

    @model_validator(mode="after")
    def _retryable_only_when_transient(self) -> ToolError:
        if self.is_retryable != (self.error_category is ErrorCategory.TRANSIENT):
            raise ValueError(
                "isRetryable must be true for transient errors and false for every other category"
            )
        return self

    @classmethod
    def of(cls, category: ErrorCategory, description: str, **fields: Any) -> ToolError:
        """Build an error whose ``isRetryable`` follows from its category."""
        return cls(
            error_category=category,
            is_retryable=category is ErrorCategory.TRANSIENT,
            description=description,
            **fields,
        )


class ContractViolation(ValueError):
    """A tool result that does not speak this contract (a third-party server, or garbage)."""


def result_text(result: CallToolResult) -> str:
    """A result's text blocks, joined: where every result's JSON is (an error's only copy)."""
    return "".join(block.text for block in result.content if isinstance(block, mcp.types.TextContent))


def parse_tool_result(result: CallToolResult) -> ResultPage[Any] | EmptyResult | ToolError:
    """Read a ``CallToolResult`` back into the contract, from structured content or else its text block.

    Raises ``ContractViolation`` when the result is not in the contract; the caller decides how to
    classify such a result (its text is kept on the exception).
    """
    payload = result.structured_content
    text = result_text(result)
    if payload is None:
        try:
            payload = json.loads(text)
        except json.JSONDecodeError as exc:
            raise ContractViolation(text) from exc
    if not isinstance(payload, dict):
        raise ContractViolation(text)
    try:
        if result.is_error:
            return ToolError.model_validate(payload)
        if payload.get("resultCount") == 0 and not payload.get("results"):
            return EmptyResult.model_validate(payload)
        return AnyPage.model_validate(payload)
    except ValidationError as exc:
        raise ContractViolation(text) from exc


class ToolFailure(Exception):
    """Raised inside a tool body to end the call with a contract error.

    The tool wrapper turns it into the result; where the error names no ``attempted_query``, the
    wrapper fills in the call's own tool and arguments.
    """

    def __init__(self, error: ToolError) -> None:
        super().__init__(error.description)
        self.error = error
