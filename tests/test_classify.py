"""The classifier: every outcome the mcp client can produce has a mapping into the contract."""

from __future__ import annotations

import asyncio
import json

import anyio
import httpx2
import pydantic
import pytest
from mcp.shared.exceptions import MCPError
from mcp.types import CallToolResult, TextContent
from mcp_types import INVALID_PARAMS, REQUEST_TIMEOUT

from coordinator.compare.boundary import Boundary
from sources.contract import EmptyResult, ErrorCategory, ResultPage, ToolError
from sources.tool_failure import to_call_tool_result
from subagents.classify import (
    _TEXT_RULES,
    CONTRACT,
    SourceUnavailable,
    TextRule,
    classify_exception,
    classify_result,
    contract_with_rules,
)


def _validation_error() -> pydantic.ValidationError:
    try:
        pydantic.TypeAdapter(int).validate_python("x")
    except pydantic.ValidationError as exc:
        return exc
    raise AssertionError("unreachable")


def _decode_error() -> UnicodeDecodeError:
    try:
        b"\xff".decode("utf-8")
    except UnicodeDecodeError as exc:
        return exc
    raise AssertionError("unreachable")


_REQUEST = httpx2.Request("POST", "http://127.0.0.1:1/mcp")

# Everything a call through the mcp client can raise on these paths, with the category and the
# error type it must map to. The paths: stdio and HTTP transports, timeouts, dead processes,
# JSON-RPC errors, schema checks, and a session that could not be opened at all.
EXCEPTIONS: list[tuple[BaseException, ErrorCategory, str, bool]] = [
    (TimeoutError(), ErrorCategory.TRANSIENT, "timeout", True),
    (MCPError(-32001, "Request 'tools/call' timed out"), ErrorCategory.TRANSIENT, "timeout", True),
    (MCPError(-32000, "Connection closed"), ErrorCategory.TRANSIENT, "connection_closed", True),
    (MCPError(-32602, "Invalid params"), ErrorCategory.VALIDATION, "jsonrpc_-32602", False),
    (MCPError(-32601, "Method not found"), ErrorCategory.VALIDATION, "jsonrpc_-32601", False),
    (MCPError(-32600, "Invalid request"), ErrorCategory.VALIDATION, "jsonrpc_-32600", False),
    (MCPError(-32700, "Failed to parse JSON response"), ErrorCategory.TRANSIENT, "garbage", True),
    (MCPError(-32603, "Internal error"), ErrorCategory.TRANSIENT, "jsonrpc_-32603", False),
    (MCPError(-32020, "Header mismatch"), ErrorCategory.TRANSIENT, "jsonrpc_-32020", False),
    (MCPError(4242, "Custom refusal"), ErrorCategory.BUSINESS, "jsonrpc_4242", False),
    (ConnectionRefusedError(111, "Connection refused"), ErrorCategory.TRANSIENT, "connection_refused", True),
    (httpx2.ConnectError("All connection attempts failed"), ErrorCategory.TRANSIENT, "connection_refused", True),
    (httpx2.ConnectTimeout("connect timed out"), ErrorCategory.TRANSIENT, "connection_refused", True),
    (httpx2.ReadTimeout("read timed out"), ErrorCategory.TRANSIENT, "timeout", True),
    (httpx2.RemoteProtocolError("Server disconnected"), ErrorCategory.TRANSIENT, "connection_closed", True),
    (httpx2.ReadError("read failed"), ErrorCategory.TRANSIENT, "connection_closed", True),
    (
        httpx2.HTTPStatusError("503", request=_REQUEST, response=httpx2.Response(503, request=_REQUEST)),
        ErrorCategory.TRANSIENT, "http_503", True,
    ),
    (
        httpx2.HTTPStatusError("403", request=_REQUEST, response=httpx2.Response(403, request=_REQUEST)),
        ErrorCategory.PERMISSION, "http_403", False,
    ),
    (
        httpx2.HTTPStatusError("404", request=_REQUEST, response=httpx2.Response(404, request=_REQUEST)),
        ErrorCategory.VALIDATION, "http_404", False,
    ),
    (anyio.ClosedResourceError(), ErrorCategory.TRANSIENT, "connection_closed", True),
    (anyio.BrokenResourceError(), ErrorCategory.TRANSIENT, "connection_closed", True),
    (anyio.EndOfStream(), ErrorCategory.TRANSIENT, "connection_closed", True),
    (BrokenPipeError(), ErrorCategory.TRANSIENT, "connection_closed", True),
    (ConnectionResetError(), ErrorCategory.TRANSIENT, "connection_closed", True),
    (FileNotFoundError(2, "No such file", "python9"), ErrorCategory.TRANSIENT, "spawn_failed", True),
    (_decode_error(), ErrorCategory.TRANSIENT, "garbage", True),
    (json.JSONDecodeError("Expecting value", "}{", 0), ErrorCategory.TRANSIENT, "garbage", True),
    (_validation_error(), ErrorCategory.TRANSIENT, "garbage", True),
    (
        RuntimeError("Invalid structured content returned by tool x: 'a' is a required property"),
        ErrorCategory.BUSINESS, "schema_violation", False,
    ),
    (RuntimeError("Tool x has an output schema but did not return structured content"), ErrorCategory.BUSINESS, "schema_violation", False),
    (OSError(113, "No route to host"), ErrorCategory.TRANSIENT, "os_error", True),
    (
        ExceptionGroup("unhandled errors in a TaskGroup", [ExceptionGroup("inner", [httpx2.RemoteProtocolError("gone")])]),
        ErrorCategory.TRANSIENT, "connection_closed", True,
    ),
    (SourceUnavailable("kb", ExceptionGroup("g", [httpx2.ConnectError("refused")])), ErrorCategory.TRANSIENT, "connection_refused", True),
]  # fmt: skip


@pytest.mark.parametrize(
    ("exc", "category", "error_type", "reopen"),
    EXCEPTIONS,
    ids=[f"{type(e).__name__}-{t}" for e, _, t, _ in EXCEPTIONS],
)
def test_every_exception_has_a_mapping(
    exc: BaseException, category: ErrorCategory, error_type: str, reopen: bool
) -> None:
    outcome = classify_exception(exc)
    assert outcome.kind == "error" and outcome.error is not None
    assert outcome.error.error_category is category
    assert outcome.error.is_retryable is (category is ErrorCategory.TRANSIENT)
    assert outcome.error_type == error_type and outcome.error_type != "unexpected"
    assert outcome.reopen is reopen
    assert outcome.error.description


def test_the_table_covers_every_exception_class_the_client_raises_here() -> None:
    """Each family the transports raise appears in the table above, so a new one cannot slip through."""
    covered = {type(exc) for exc, *_ in EXCEPTIONS}
    families = [
        TimeoutError, MCPError, ConnectionRefusedError, httpx2.ConnectError, httpx2.TimeoutException,
        httpx2.RemoteProtocolError, httpx2.ReadError, httpx2.HTTPStatusError, anyio.ClosedResourceError,
        anyio.BrokenResourceError, anyio.EndOfStream, BrokenPipeError, ConnectionResetError, FileNotFoundError,
        UnicodeDecodeError, json.JSONDecodeError, pydantic.ValidationError, RuntimeError, OSError,
        ExceptionGroup, SourceUnavailable,
    ]  # fmt: skip
    assert all(any(issubclass(kind, family) for kind in covered) for family in families)


@pytest.mark.parametrize(
    "status, retry_after, wait_ms",
    [
        (429, "2", 2000),
        (503, "0.5", 500),
        (429, None, None),
        (503, "Wed, 21 Oct 2026 07:28:00 GMT", None),
        (500, "2", None),
    ],
)
def test_an_http_429_or_503_saying_when_is_pushback(
    status: int, retry_after: str | None, wait_ms: int | None
) -> None:
    """Retry-After in seconds on a 429 or 503 is the source's pushback, kept as retryAfterMs (a date,
    or another status, is not: nothing this client can wait out exactly)."""
    headers = {"retry-after": retry_after} if retry_after is not None else {}
    response = httpx2.Response(status, request=_REQUEST, headers=headers)
    outcome = classify_exception(httpx2.HTTPStatusError(str(status), request=_REQUEST, response=response))
    assert outcome.error is not None and outcome.error.error_category is ErrorCategory.TRANSIENT
    assert outcome.error.retry_after_ms == wait_ms


def test_an_unforeseen_exception_is_kept_and_named() -> None:
    outcome = classify_exception(ZeroDivisionError("division by zero"))
    assert outcome.error_type == "unexpected" and outcome.error is not None
    assert "ZeroDivisionError: division by zero" in outcome.error.description


@pytest.mark.parametrize(
    "group",
    [
        BaseExceptionGroup("cancelled", [asyncio.CancelledError()]),
        BaseExceptionGroup("mixed", [ConnectionResetError("reset"), asyncio.CancelledError()]),
        BaseExceptionGroup("nested", [ExceptionGroup("inner", [OSError("x")]), asyncio.CancelledError()]),
    ],
)
def test_cancellation_in_a_group_is_not_an_answer_it_propagates(group: BaseExceptionGroup) -> None:
    with pytest.raises(BaseExceptionGroup) as raised:
        classify_exception(group)
    assert all(isinstance(leaf, asyncio.CancelledError) for leaf in raised.value.exceptions)


def test_a_group_of_errors_is_decided_by_the_one_a_retry_cannot_fix_and_names_them_all() -> None:
    timeout = MCPError(REQUEST_TIMEOUT, "slow")
    bad_params = MCPError(INVALID_PARAMS, "order_id is malformed")
    outcome = classify_exception(ExceptionGroup("two", [timeout, ExceptionGroup("inner", [bad_params])]))
    assert outcome.error is not None and outcome.error.error_category is ErrorCategory.VALIDATION
    assert "slow" in outcome.error.description and "order_id is malformed" in outcome.error.description
    assert outcome.reopen  # the timeout left the session suspect


def test_a_group_of_transient_errors_stays_transient() -> None:
    outcome = classify_exception(ExceptionGroup("two", [ConnectionResetError("a"), BrokenPipeError("b")]))
    assert outcome.error is not None and outcome.error.is_retryable and outcome.reopen


def test_contract_results_map_to_themselves() -> None:
    page = ResultPage[dict](result_count=1, results=[{"id": "x"}])  # type: ignore[type-var]
    assert classify_result(to_call_tool_result(page)).kind == "ok"
    assert classify_result(to_call_tool_result(EmptyResult(message="none"))).kind == "empty"
    error = ToolError.of(ErrorCategory.PERMISSION, "no", required_scope="billing:read")
    outcome = classify_result(to_call_tool_result(error))
    assert outcome.error == error and outcome.error_type == "tool_error"


def _text_result(text: str, *, is_error: bool = True) -> CallToolResult:
    return CallToolResult(content=[TextContent(type="text", text=text)], is_error=is_error)


@pytest.mark.parametrize(
    ("text", "category"),
    [
        ("Operation failed", ErrorCategory.BUSINESS),  # the generic error: never retried blindly
        ("Error: request timed out, please try again", ErrorCategory.TRANSIENT),
        ("HTTP 429 Too Many Requests", ErrorCategory.TRANSIENT),
        ("Service Unavailable", ErrorCategory.TRANSIENT),
        ("403 Forbidden: access denied", ErrorCategory.PERMISSION),
        ("Invalid date: expected YYYY-MM-DD", ErrorCategory.VALIDATION),
        ("Error executing tool x: 1 validation error", ErrorCategory.VALIDATION),
        ("Unknown tool: frobnicate", ErrorCategory.VALIDATION),
    ],
)
def test_unstructured_error_text_is_classified_and_kept(text: str, category: ErrorCategory) -> None:
    outcome = classify_result(_text_result(text))
    assert outcome.error is not None and outcome.error.error_category is category
    assert text in outcome.error.description and outcome.error_type == "unstructured_error"


def test_a_third_party_success_is_kept_as_one_record() -> None:
    outcome = classify_result(_text_result("42 widgets in stock", is_error=False))
    assert outcome.kind == "ok" and outcome.result.results == [{"text": "42 widgets in stock"}]  # type: ignore[union-attr]


# Third-party servers: text rules, the source's own first.

ENOENT = "ENOENT: no such file or directory, open '/srv/docs/nope.md'"


def test_a_text_rule_is_built_from_strings_and_ignores_case() -> None:
    rule = TextRule.of("enoent|no such file", " Validation ")
    assert rule.category is ErrorCategory.VALIDATION and rule.pattern.search(ENOENT)
    assert TextRule.of("x", ErrorCategory.BUSINESS).category is ErrorCategory.BUSINESS


@pytest.mark.parametrize(
    ("pattern", "category", "named"),
    [
        ("ENOENT", "retry", "'retry'"),
        ("ENOENT(", "validation", "'ENOENT('"),
        ("  ", "validation", "empty pattern"),
    ],
)
def test_a_bad_text_rule_is_refused_in_one_line_that_names_it(
    pattern: str, category: str, named: str
) -> None:
    with pytest.raises(ValueError, match=r"e\.g\. pattern") as refused:
        TextRule.of(pattern, category)
    message = str(refused.value)
    assert "\n" not in message and named in message
    if "empty" not in named:
        assert all(member.value in message for member in ErrorCategory)


def test_a_sources_own_rule_decides_before_the_built_in_ones_and_says_so() -> None:
    classifier = contract_with_rules({"docs": (TextRule.of("ENOENT", "validation"),)})
    outcome = classifier.result(_text_result(ENOENT), source="docs")
    assert outcome.error is not None and outcome.error.error_category is ErrorCategory.VALIDATION
    assert outcome.error_type == "unstructured_error" and ENOENT in outcome.error.description
    assert "the docs source's own rule /ENOENT/ made it validation" in outcome.error.description
    # Another source, or a call that names none, is not touched by docs's rules.
    for other in ("time", ""):
        plain = classifier.result(_text_result(ENOENT), source=other)
        assert plain.error is not None and plain.error.error_category is ErrorCategory.BUSINESS


def test_an_own_rule_wins_over_a_built_in_rule_that_matches_too() -> None:
    text = "Access denied - path outside allowed directories: /etc/passwd not in /srv/docs"
    assert CONTRACT.result(_text_result(text)).error.error_category is ErrorCategory.PERMISSION  # type: ignore[union-attr]
    classifier = contract_with_rules({"docs": [TextRule.of("outside allowed directories", "business")]})
    outcome = classifier.result(_text_result(text), source="docs")
    assert outcome.error is not None and outcome.error.error_category is ErrorCategory.BUSINESS


@pytest.mark.parametrize(
    ("text", "category", "rule"),
    [
        ("MCP error -32602: Tool nosuch not found", ErrorCategory.VALIDATION, "the TypeScript SDK's invalid-params error"),
        (
            "MCP error -32602: Input validation error: Invalid arguments for tool read: expected string",
            ErrorCategory.VALIDATION, "the TypeScript SDK's invalid-params error",
        ),
        (
            "MCP error -32602: Output validation error: Invalid structured content for tool read: x",
            ErrorCategory.BUSINESS, "the TypeScript SDK's output validation error",
        ),
        (
            # The caller's input, quoted by pydantic, says "timed out": the SDK's own words decide first.
            "Error executing tool get_time: 1 validation error for get_timeArguments\nzone\n"
            "  Input should be a valid string [type=string_type, input_value='timed out', input_type=int]",
            ErrorCategory.VALIDATION, "the Python SDK's argument validation error",
        ),
        ("Service temporarily unavailable", ErrorCategory.TRANSIENT, "words of a passing failure"),
    ],
)  # fmt: skip
def test_what_the_official_sdks_write_is_a_built_in_rule(
    text: str, category: ErrorCategory, rule: str
) -> None:
    outcome = classify_result(_text_result(text))
    assert outcome.error is not None and outcome.error.error_category is category
    assert (
        f"the built-in rule for the {rule}" in outcome.error.description or rule in outcome.error.description
    )
    assert text in outcome.error.description


@pytest.mark.parametrize(
    "text",
    [
        ENOENT,
        "EISDIR: illegal operation on a directory, read",
        "Destination already exists: /a",
        "",
        "Operation failed",
    ],
)
def test_text_no_rule_knows_is_business_and_never_retried_blindly(text: str) -> None:
    outcome = contract_with_rules({"docs": (TextRule.of("EACCES", "transient"),)}).result(
        _text_result(text), source="docs"
    )
    assert outcome.error is not None and outcome.error.error_category is ErrorCategory.BUSINESS
    assert not outcome.error.is_retryable and not outcome.reopen
    assert "no rule matched, so business (never retried blindly)" in outcome.error.description


def test_no_built_in_rule_for_an_sdk_makes_text_retryable() -> None:
    """Only words that say a failure passes make unknown text transient; a format never does."""
    transient = [rule.label for rule in _TEXT_RULES if rule.category is ErrorCategory.TRANSIENT]
    assert transient == ["words of a passing failure"]


def test_an_own_rule_reads_the_message_of_a_json_rpc_error_the_source_sent() -> None:
    unknown = MCPError(INVALID_PARAMS, "Unknown tool: nosuch")
    assert CONTRACT.exception(unknown, source="time").error.error_category is ErrorCategory.VALIDATION  # type: ignore[union-attr]
    classifier = contract_with_rules({"time": (TextRule.of("^Unknown tool", "business"),)})
    outcome = classifier.exception(unknown, source="time")
    assert outcome.error is not None and outcome.error.error_category is ErrorCategory.BUSINESS
    assert outcome.error_type == f"jsonrpc_{INVALID_PARAMS}" and not outcome.reopen
    assert "Unknown tool: nosuch" in outcome.error.description
    assert "the time source's own rule /^Unknown tool/ made it business" in outcome.error.description


@pytest.mark.parametrize(
    "exc",
    [MCPError(REQUEST_TIMEOUT, "timed out"), MCPError(-32000, "Connection closed"), MCPError(-32700, "x")],
)
def test_what_the_client_itself_reports_is_beyond_any_rule(exc: MCPError) -> None:
    everything = contract_with_rules({"docs": (TextRule.of(".", "business"),)})
    assert everything.exception(exc, source="docs") == CONTRACT.exception(exc)


def test_a_contract_error_is_beyond_any_rule() -> None:
    error = ToolError.of(ErrorCategory.PERMISSION, "ENOENT, but in the contract", required_scope="docs:read")
    everything = contract_with_rules({"docs": (TextRule.of(".", "transient"),)})
    assert everything.result(to_call_tool_result(error), source="docs").error == error


def test_own_rules_reach_into_groups_and_unopened_sessions() -> None:
    classifier = contract_with_rules({"docs": (TextRule.of("quota", "business"),)})
    quota = MCPError(-32603, "daily quota spent")
    grouped = classifier.exception(ExceptionGroup("g", [ConnectionResetError("x"), quota]), source="docs")
    assert grouped.error is not None and grouped.error.error_category is ErrorCategory.BUSINESS
    unopened = classifier.exception(SourceUnavailable("docs", quota), source="docs")
    assert unopened.error is not None and "own rule /quota/" in unopened.error.description


def test_rules_must_name_their_source() -> None:
    with pytest.raises(ValueError, match="name the source"):
        contract_with_rules({"": (TextRule.of("x", "business"),)})


def test_the_compare_boundary_takes_the_source_too() -> None:
    truth = Boundary(generic=False)
    outcome = truth.result(_text_result(ENOENT), source="docs")
    assert outcome.error is not None and truth.truths == [outcome]
    assert Boundary(generic=True).exception(TimeoutError(), source="docs").error_type == "operation_failed"
