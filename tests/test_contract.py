"""The wire contract: every shape parses back from the text block with json.loads, with the right types."""

from __future__ import annotations

import gc
import json
from typing import Any

import pytest
from mcp.types import CallToolResult, TextContent
from pydantic import BaseModel, ValidationError

from sources.contract import (
    AnyPage,
    AttemptedQuery,
    ContractViolation,
    EmptyResult,
    ErrorCategory,
    ResultPage,
    ToolError,
    parse_tool_result,
)
from sources.tool_failure import to_call_tool_result
from sources.toolkit import page_of
from subagents.decisions import Decision, Escalation


class Record(BaseModel):
    id: str


def text_of(result: CallToolResult) -> dict[str, Any]:
    (block,) = result.content
    assert isinstance(block, TextContent)
    payload = json.loads(block.text)
    assert result.structured_content == (None if result.is_error else payload)  # errors: text only
    return payload


def test_success_shape() -> None:
    result = to_call_tool_result(ResultPage[Record](result_count=2, results=[Record(id="a"), Record(id="b")]))
    payload = text_of(result)
    assert result.is_error is False
    assert payload == {"resultCount": 2, "results": [{"id": "a"}, {"id": "b"}], "truncated": False}
    assert isinstance(payload["resultCount"], int) and isinstance(payload["truncated"], bool)


def test_the_text_block_is_compact_json_with_text_as_written() -> None:
    """The text is written by pydantic's serializer, once per result: no spaces between items, and
    text outside ASCII as it is (a client reads the same values; a model reads fewer tokens)."""
    page = AnyPage(result_count=1, results=[{"name": "Zoë Ó Briain", "amount": 45.0, "tags": []}])
    (block,) = to_call_tool_result(page).content
    assert isinstance(block, TextContent)
    assert block.text == (
        '{"resultCount":1,"results":[{"name":"Zoë Ó Briain","amount":45.0,"tags":[]}],"truncated":false}'
    )


def test_success_with_next_page_names_the_cursor() -> None:
    page = ResultPage[Record](result_count=1, results=[Record(id="a")], truncated=True, next_cursor="50")
    assert text_of(to_call_tool_result(page))["nextCursor"] == "50"


def test_result_count_must_match_the_results() -> None:
    with pytest.raises(ValidationError, match="resultCount is 3"):
        ResultPage[Record](result_count=3, results=[Record(id="a")])


def test_valid_empty_result_is_a_success() -> None:
    result = to_call_tool_result(
        EmptyResult(message="No customer matches x. The query executed successfully.")
    )
    payload = text_of(result)
    assert result.is_error is False
    assert payload == {
        "resultCount": 0,
        "results": [],
        "message": "No customer matches x. The query executed successfully.",
    }


@pytest.mark.parametrize("category", list(ErrorCategory))
def test_error_shape_for_every_category(category: ErrorCategory) -> None:
    error = ToolError.of(
        category,
        "Something specific happened.",
        attempted_query=AttemptedQuery(tool="search_orders", arguments={"customer_id": "CUST-00042"}),
        partial_results=[{"id": "ORD-10023"}],
        retry_after_ms=1200 if category is ErrorCategory.TRANSIENT else None,
    )
    result = to_call_tool_result(error)
    payload = text_of(result)
    assert result.is_error is True
    assert payload["errorCategory"] == category.value
    assert payload["isRetryable"] is (category is ErrorCategory.TRANSIENT)
    assert isinstance(payload["description"], str)
    assert payload["attempted_query"] == {"tool": "search_orders", "arguments": {"customer_id": "CUST-00042"}}
    assert payload["partial_results"] == [{"id": "ORD-10023"}]
    assert ("retryAfterMs" in payload) is (category is ErrorCategory.TRANSIENT)


def test_minimal_error_carries_exactly_the_three_fields() -> None:
    payload = text_of(to_call_tool_result(ToolError.of(ErrorCategory.TRANSIENT, "Timed out.")))
    assert payload == {"errorCategory": "transient", "isRetryable": True, "description": "Timed out."}


@pytest.mark.parametrize("category", [c for c in ErrorCategory if c is not ErrorCategory.TRANSIENT])
def test_only_transient_errors_may_be_retryable(category: ErrorCategory) -> None:
    with pytest.raises(ValidationError, match="isRetryable"):
        ToolError(errorCategory=category, isRetryable=True, description="x")


def test_escalation_has_every_field_even_when_empty() -> None:
    escalation = Escalation(
        error_category=ErrorCategory.BUSINESS,
        is_retryable=False,
        message="Refund of £750 exceeds the £500 automatic limit.",
        attempted_query=AttemptedQuery(
            tool="refund_eligibility", arguments={"order_id": "ORD-10023", "amount": 750}
        ),
        partial_results=[],
        source="billing",
        attempts=1,
        decisions=[
            Decision(action="escalate", category=ErrorCategory.BUSINESS, attempt=1, reason="business rule")
        ],
    )
    payload = json.loads(json.dumps(escalation.to_wire()))
    assert set(payload) == {
        "isError", "errorCategory", "isRetryable", "message", "attempted_query",
        "partial_results", "source", "attempts", "decisions",
    }  # fmt: skip
    assert payload["isError"] is True and payload["partial_results"] == []
    assert payload["decisions"] == [
        {
            "action": "escalate",
            "category": "business",
            "attempt": 1,
            "backoff_ms": 0,
            "reason": "business rule",
        }
    ]
    assert Escalation.model_validate(payload) == escalation


def test_escalation_without_partial_results_is_refused() -> None:
    with pytest.raises(ValidationError, match="partial_results"):
        Escalation.model_validate(
            {
                "errorCategory": "business", "isRetryable": False, "message": "m", "source": "billing",
                "attempted_query": {"tool": "t", "arguments": {}}, "attempts": 1, "decisions": [],
            }
        )  # fmt: skip


@pytest.mark.parametrize(
    "model",
    [
        ResultPage[Record](result_count=1, results=[Record(id="a")]),
        EmptyResult(message="nothing"),
        ToolError.of(ErrorCategory.VALIDATION, "bad sku"),
    ],
)
def test_parse_reads_back_what_was_written(model: Any) -> None:
    parsed = parse_tool_result(to_call_tool_result(model))
    assert parsed.to_wire() == model.to_wire()
    assert type(parsed).__name__.startswith(type(model).__name__.split("[")[0])


def test_parse_falls_back_to_the_text_block() -> None:
    result = CallToolResult(
        content=[
            TextContent(
                type="text", text='{"errorCategory": "permission", "isRetryable": false, "description": "no"}'
            )
        ],
        is_error=True,
    )
    parsed = parse_tool_result(result)
    assert isinstance(parsed, ToolError) and parsed.error_category is ErrorCategory.PERMISSION


@pytest.mark.parametrize("text", ["Operation failed", '{"status": "error"}', "[1, 2]"])
def test_results_outside_the_contract_are_named_as_such(text: str) -> None:
    with pytest.raises(ContractViolation) as caught:
        parse_tool_result(CallToolResult(content=[TextContent(type="text", text=text)], is_error=True))
    assert str(caught.value) == text


def test_a_page_of_any_records_is_one_class_that_outlives_a_collection() -> None:
    """pydantic keeps ``ResultPage[Any]`` only weakly: written in a function, the class was collected
    with the garbage and built again on a later call (a model class, 0.3 ms and more, on a call's path)."""
    record = {"id": "KB-REFUNDS"}
    first = type(page_of([record], empty_message=""))
    gc.collect()
    page = page_of([record], empty_message="")
    assert type(page) is first is AnyPage
    assert type(parse_tool_result(to_call_tool_result(page))) is AnyPage
