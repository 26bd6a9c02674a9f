"""The draft MCP tool-failure metadata (``io.modelcontextprotocol/toolFailure``), written and read.

Through the real protocol: a server of the test's own that sends it on an ``isError`` result outside
our contract, which the classifier reads instead of guessing from the text; garbage there, which the
classifier ignores for its text rules; and our own sources, whose every contract error carries it,
read back equal to the contract's fields.
"""

from __future__ import annotations

import dataclasses
import json
from collections.abc import Callable
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st
from mcp.server import MCPServer
from mcp.types import CallToolResult, TextContent

from sources.contract import ErrorCategory, ToolError, parse_tool_result
from sources.settings import SourceSettings
from sources.tool_failure import TOOL_FAILURE_KEY, ToolFailureMeta, failure_meta, read_failure_meta
from subagents.classify import TextRule, classify_result, contract_with_rules
from tests.conftest import call
from tests.test_tickets import ManualClock

NOW = datetime(2026, 12, 2, 10, 15, 30, 250_000, tzinfo=UTC)
# Text the built-in rules read as business (no rule matches it): only the metadata can make it otherwise.
PLAIN = "The operation could not be completed."


def failing_server(meta: Any, text: str = PLAIN) -> MCPServer:
    """A third-party server whose one tool answers ``isError`` with ``text`` and ``meta`` as its ``_meta``."""
    server = MCPServer("third-party")

    @server.tool()
    def act() -> CallToolResult:
        return CallToolResult(is_error=True, content=[TextContent(type="text", text=text)], _meta=meta)

    return server


async def answered(meta: Any, text: str = PLAIN) -> CallToolResult:
    return await call(failing_server(meta, text), "act", {})


@pytest.mark.anyio
@pytest.mark.parametrize(
    ("declared", "category"),
    [
        ("transient", ErrorCategory.TRANSIENT),
        ("validation", ErrorCategory.VALIDATION),
        ("business", ErrorCategory.BUSINESS),
        ("permission", ErrorCategory.PERMISSION),
        ("invalid_argument", ErrorCategory.VALIDATION),
        ("INVALID_INPUT", ErrorCategory.VALIDATION),
        ("rate_limited", ErrorCategory.TRANSIENT),
        ("unavailable", ErrorCategory.TRANSIENT),
        ("timeout", ErrorCategory.TRANSIENT),
        ("forbidden", ErrorCategory.PERMISSION),
        ("permission-denied", ErrorCategory.PERMISSION),
        ("unauthorized", ErrorCategory.PERMISSION),
    ],
)
async def test_the_classifier_takes_the_class_a_server_declares(
    declared: str, category: ErrorCategory
) -> None:
    result = await answered({TOOL_FAILURE_KEY: {"class": declared, "code": "X-1", "retryable": False}})
    assert result.is_error is True and result.meta is not None  # the _meta crossed the protocol
    outcome = classify_result(result, source="third-party")
    assert outcome.error is not None and outcome.error.error_category is category
    assert outcome.error.is_retryable is (category is ErrorCategory.TRANSIENT)
    assert "toolFailure metadata" in outcome.error.description and PLAIN in outcome.error.description
    assert outcome.error_type == "unstructured_error"


@pytest.mark.anyio
async def test_a_declared_wait_becomes_retry_after() -> None:
    later = (datetime.now(UTC) + timedelta(seconds=30)).isoformat().replace("+00:00", "Z")
    result = await answered({TOOL_FAILURE_KEY: {"class": "rate_limited", "retryNotBefore": later}})
    error = classify_result(result).error
    assert error is not None and error.error_category is ErrorCategory.TRANSIENT
    assert error.retry_after_ms is not None and 25_000 < error.retry_after_ms <= 30_000


@pytest.mark.anyio
@pytest.mark.parametrize(
    "meta",
    [
        None,
        {},
        {TOOL_FAILURE_KEY: "transient"},
        {TOOL_FAILURE_KEY: ["transient"]},
        {TOOL_FAILURE_KEY: None},
        {TOOL_FAILURE_KEY: {"class": "cosmic-rays"}},
        {TOOL_FAILURE_KEY: {"class": 42, "retryable": "yes", "retryNotBefore": "soon"}},
        {TOOL_FAILURE_KEY: {"class": {"nested": "transient"}, "retryNotBefore": 17}},
        {"io.modelcontextprotocol/toolfailure": {"class": "transient"}},  # not the key: keys are exact
    ],
)
async def test_garbage_metadata_falls_back_to_the_text_rules(meta: Any) -> None:
    for text, category in [
        (PLAIN, ErrorCategory.BUSINESS),  # the default
        ("Service unavailable, try again", ErrorCategory.TRANSIENT),
        ("Access denied", ErrorCategory.PERMISSION),
    ]:
        error = classify_result(await answered(meta, text)).error
        assert error is not None and error.error_category is category, (meta, text)
        assert "toolFailure" not in error.description


@pytest.mark.anyio
async def test_a_sources_own_rule_still_decides_before_the_metadata() -> None:
    """A rule the user registered for a server is deliberate: it outranks what the server claims."""
    result = await answered({TOOL_FAILURE_KEY: {"class": "transient"}}, "quota exhausted for this month")
    classifier = contract_with_rules({"third-party": [TextRule.of("quota exhausted", "business")]})
    error = classifier.result(result, source="third-party").error
    assert error is not None and error.error_category is ErrorCategory.BUSINESS
    assert "own rule" in error.description


@pytest.mark.anyio
async def test_a_contract_error_is_read_from_the_contract_not_the_metadata() -> None:
    """A server whose contract text and metadata disagree: the contract is ours, and it decides."""
    error = ToolError.of(ErrorCategory.VALIDATION, "Argument 'x' must be a number.")
    result = await answered({TOOL_FAILURE_KEY: {"class": "transient"}}, json.dumps(error.to_wire()))
    outcome = classify_result(result)
    assert outcome.error == error and outcome.error_type == "tool_error"


def test_failure_meta_is_the_contract_error_in_the_drafts_names() -> None:
    error = ToolError.of(ErrorCategory.TRANSIENT, "Rate limited.", retry_after_ms=1500)
    meta = failure_meta(error, "ref-1", now=NOW)
    assert meta == {
        "class": "transient",
        "code": "transient",
        "retryable": True,
        "retryNotBefore": "2026-12-02T10:15:31.750Z",
        "correlationId": "ref-1",
        "agentGuidance": "Retry the same call after retryNotBefore; the request did not complete.",
    }
    assert read_failure_meta({TOOL_FAILURE_KEY: meta}, now=NOW) == ToolFailureMeta(
        category=ErrorCategory.TRANSIENT,
        retryable=True,
        retry_after_ms=1500,
        guidance=meta["agentGuidance"],
        correlation_id="ref-1",
    )
    gone = read_failure_meta({TOOL_FAILURE_KEY: meta}, now=NOW + timedelta(minutes=1))
    assert gone is not None and gone.retry_after_ms == 0  # a moment passed is no wait, never a negative one


@pytest.mark.parametrize(
    ("category", "words"),
    [
        (ErrorCategory.TRANSIENT, "Retry the same call later"),
        (ErrorCategory.VALIDATION, "Fix the arguments"),
        (ErrorCategory.BUSINESS, "escalate to a human"),
        (ErrorCategory.PERMISSION, "request access"),
    ],
)
def test_each_category_has_its_one_sentence_of_guidance(category: ErrorCategory, words: str) -> None:
    meta = failure_meta(ToolError.of(category, "It failed."), now=NOW)
    assert words in meta["agentGuidance"] and meta["agentGuidance"].count(".") == 1
    assert meta["retryable"] is (category is ErrorCategory.TRANSIENT)
    assert "retryNotBefore" not in meta and "correlationId" not in meta


JSON = st.recursive(
    st.none() | st.booleans() | st.integers() | st.floats() | st.text(max_size=40),
    lambda inner: st.lists(inner, max_size=4) | st.dictionaries(st.text(max_size=20), inner, max_size=4),
    max_leaves=20,
)
FIELDS = st.fixed_dictionaries(
    {},
    optional={
        name: JSON
        | st.sampled_from(["transient", "2026-12-02T10:15:30Z", "9999-12-31T23:59:59+14:00", "0001-01-01"])
        for name in ("class", "code", "retryable", "retryNotBefore", "correlationId", "agentGuidance")
    },
)


@given(st.one_of(JSON, st.dictionaries(st.just(TOOL_FAILURE_KEY), JSON | FIELDS, min_size=1)))
def test_reading_never_raises_whatever_a_server_sends(meta: Any) -> None:
    read = read_failure_meta(meta, now=NOW)
    if read is not None:
        assert read.category is None or isinstance(read.category, ErrorCategory)
        assert read.retryable is None or isinstance(read.retryable, bool)
        assert read.retry_after_ms is None or (
            isinstance(read.retry_after_ms, int) and read.retry_after_ms >= 0
        )
        assert read.guidance is None or isinstance(read.guidance, str)
        assert read.correlation_id is None or isinstance(read.correlation_id, str)


def _read_back(result: CallToolResult) -> tuple[ToolError, ToolFailureMeta]:
    error = parse_tool_result(result)
    assert isinstance(error, ToolError)
    read = read_failure_meta(result.meta)
    assert read is not None, result.meta
    assert read.category is error.error_category and read.retryable is error.is_retryable
    assert read.guidance
    return error, read


@pytest.mark.anyio
@pytest.mark.parametrize("mode", ["timeout", "invalid", "business", "permission"])
async def test_our_sources_errors_carry_the_metadata(server_for: Callable[..., MCPServer], mode: str) -> None:
    result = await call(
        server_for("customers"), "customer_lookup", {"identifier": "CUST-00042", "mode": mode}
    )
    error, read = _read_back(result)
    assert error.error_category.value == mode.replace("timeout", "transient").replace("invalid", "validation")
    assert read.retry_after_ms is None and read.correlation_id is None


@pytest.mark.anyio
async def test_a_permission_errors_metadata_names_the_scope(server_for: Callable[..., MCPServer]) -> None:
    result = await call(
        server_for("billing"), "list_invoices", {"customer_id": "CUST-00042"}
    )  # no credential
    error, read = _read_back(result)
    assert error.error_category is ErrorCategory.PERMISSION and error.required_scope == "billing:read"
    assert read.guidance is not None and "billing:read" in read.guidance


@pytest.mark.anyio
async def test_a_sources_retry_after_is_its_retry_not_before(
    settings: SourceSettings, tmp_path: Path
) -> None:
    from sources import kb

    warming = dataclasses.replace(settings, data_dir=tmp_path, kb_warmup_ms=1500)  # its index not built
    server = kb.create_server(warming, clock=ManualClock())
    before = datetime.now(UTC)
    result = await call(server, "search_policies", {"query": "refunds"})
    after = datetime.now(UTC)
    error, _ = _read_back(result)
    assert error.retry_after_ms == 1500
    # The source stamped its own now, between the two: read from either side, the wait brackets 1500 ms.
    early, late = read_failure_meta(result.meta, now=before), read_failure_meta(result.meta, now=after)
    assert early is not None and late is not None
    assert early.retry_after_ms is not None and late.retry_after_ms is not None
    assert late.retry_after_ms <= 1500 <= early.retry_after_ms
