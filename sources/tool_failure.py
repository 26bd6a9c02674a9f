"""A contract model as an MCP result, and the draft MCP tool-failure metadata, written and read in this
one module.

**A draft, not the specification.** A proposal before the MCP maintainers would standardise a
``_meta`` key, ``io.modelcontextprotocol/toolFailure``, on an ``isError`` ``CallToolResult``::

    "_meta": {"io.modelcontextprotocol/toolFailure": {
        "class": "transient", "code": "transient", "retryable": true,
        "retryNotBefore": "2026-12-02T10:15:30.250Z", "correlationId": "3f9a0c1d",
        "agentGuidance": "Retry the same call after retryNotBefore; the request did not complete."}}

It says in a standard place what this project's error contract (``sources.contract.ToolError``)
already carries in the result's text. Until the draft is settled its names may change: this module
is the one place that knows them, so a change of the draft is one edit here.

``failure_meta`` writes it from a contract error (our sources add it beside the contract, in
``to_call_tool_result``, the one way a contract model becomes a ``CallToolResult``). ``read_failure_meta`` reads it from any server's result
(the classifier uses it for errors outside the contract); it never raises, whatever a lying or broken
server put there: what it cannot read is ``None``.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from typing import TYPE_CHECKING, Any

import pydantic_core

from sources.contract import EmptyResult, ErrorCategory, ResultPage, ToolError
from sources.deferred import deferred

if TYPE_CHECKING:
    import mcp.types
    from mcp.types import CallToolResult
else:
    mcp = deferred("mcp")  # loaded with the first result made

__all__ = ["TOOL_FAILURE_KEY", "ToolFailureMeta", "failure_meta", "read_failure_meta", "to_call_tool_result"]

TOOL_FAILURE_KEY = "io.modelcontextprotocol/toolFailure"

# What each of our categories tells an agent to do: one sentence each.
_GUIDANCE = {
    ErrorCategory.TRANSIENT: "Retry the same call later; the request did not complete.",
    ErrorCategory.VALIDATION: "Fix the arguments the description names and call again; do not retry unchanged.",
    ErrorCategory.BUSINESS: "Do not retry; a business rule refused the call, so escalate to a human.",
    ErrorCategory.PERMISSION: "Do not retry as is; request access to the scope needed, or escalate.",
}

# The draft's ``class`` values another server may send, mapped to our categories: ours, and the
# obvious synonyms. Anything else is unknown (``None``): the caller falls back on its own rules.
_SYNONYMS = {
    ErrorCategory.VALIDATION: "invalid invalid_input invalid_argument invalid_arguments invalid_params bad_request",
    ErrorCategory.TRANSIENT: "unavailable timeout timed_out rate_limited overloaded temporary",
    ErrorCategory.PERMISSION: "forbidden unauthorized unauthorised unauthenticated permission_denied access_denied",
    ErrorCategory.BUSINESS: "business_rule refused rejected",
}
_CLASSES: dict[str, ErrorCategory] = {
    **{category.value: category for category in ErrorCategory},
    **{word: category for category, words in _SYNONYMS.items() for word in words.split()},
}


@dataclass(frozen=True)
class ToolFailureMeta:
    """What a result's toolFailure metadata says, each field ``None`` where it says nothing readable."""

    category: ErrorCategory | None = None
    retryable: bool | None = None
    # From ``retryNotBefore``, relative to the reading's now; never negative.
    retry_after_ms: int | None = None
    guidance: str | None = None
    correlation_id: str | None = None


def _now(now: datetime | None) -> datetime:
    return datetime.now(UTC) if now is None else now


def _rfc3339(moment: datetime) -> str:
    """A moment as RFC 3339 in UTC, to the millisecond, with ``Z``."""
    return moment.astimezone(UTC).isoformat(timespec="milliseconds").replace("+00:00", "Z")


def failure_meta(
    error: ToolError, correlation_id: str | None = None, *, now: datetime | None = None
) -> dict[str, Any]:
    """The toolFailure metadata of a contract error: the value to put under ``TOOL_FAILURE_KEY``.

    ``class`` and ``code`` are the error's category (the contract has no finer code); ``retryable``
    is its ``isRetryable``; ``retryNotBefore`` is ``now`` (aware; UTC by default) plus its
    ``retryAfterMs``, where it has one; ``agentGuidance`` is what its category tells an agent to do.
    """
    category = error.error_category
    meta: dict[str, Any] = {"class": category.value, "code": category.value, "retryable": error.is_retryable}
    if error.retry_after_ms is not None:
        meta["retryNotBefore"] = _rfc3339(_now(now) + timedelta(milliseconds=error.retry_after_ms))
    if correlation_id is not None:
        meta["correlationId"] = correlation_id
    meta["agentGuidance"] = _guidance(error)
    return meta


def to_call_tool_result(
    model: ResultPage[Any] | EmptyResult | ToolError, *, correlation_id: str | None = None
) -> CallToolResult:
    """The one way a contract model becomes an MCP result: its JSON as text; a success's also as
    structured content; an error's toolFailure metadata (the draft's) in ``_meta``, with
    ``correlation_id`` where the failure has a reference."""
    payload = model.to_wire()
    # pydantic's serializer (Rust) writes the text a third of the time json.dumps took (10 us for a page
    # of six policies, a call's largest piece of JSON): compact, UTF-8 as it is, the same values.
    text = pydantic_core.to_json(payload).decode()
    content: list[mcp.types.ContentBlock] = [mcp.types.TextContent(type="text", text=text)]
    if isinstance(model, ToolError):
        return mcp.types.CallToolResult(  # no structured content: an error is not the published page shape
            content=content, is_error=True, meta={TOOL_FAILURE_KEY: failure_meta(model, correlation_id)}
        )
    return mcp.types.CallToolResult(content=content, structured_content=payload, is_error=False)


def _guidance(error: ToolError) -> str:
    """One sentence: what the error's category tells an agent to do, with the wait or scope it names."""
    category = error.error_category
    if category is ErrorCategory.TRANSIENT and error.retry_after_ms is not None:
        return "Retry the same call after retryNotBefore; the request did not complete."
    if category is ErrorCategory.PERMISSION and error.required_scope:
        return f"Do not retry as is; request the scope {error.required_scope}, or escalate."
    return _GUIDANCE[category]


def _text(value: object) -> str | None:
    return value.strip() if isinstance(value, str) and value.strip() else None


def _category(value: object) -> ErrorCategory | None:
    text = _text(value)
    if text is None:
        return None
    return _CLASSES.get(text.lower().replace("-", "_").replace(" ", "_"))


def _wait_ms(value: object, now: datetime) -> int | None:
    """Milliseconds from ``now`` to an RFC 3339 moment (0 when it has passed); None if it is not one."""
    text = _text(value)
    if text is None:
        return None
    try:
        moment = datetime.fromisoformat(text)
        if moment.tzinfo is None:  # RFC 3339 requires an offset; a bare moment is read as UTC
            moment = moment.replace(tzinfo=UTC)
        waited = (moment - now).total_seconds() * 1000
    except (ValueError, TypeError, OverflowError):
        return None
    return max(0, math.ceil(waited)) if math.isfinite(waited) else None


def read_failure_meta(
    meta: Mapping[str, Any] | None, *, now: datetime | None = None
) -> ToolFailureMeta | None:
    """What a result's ``_meta`` says under ``TOOL_FAILURE_KEY``; None when it holds no such object.

    Never raises: a server may send anything there, and a field that is not what the draft says is
    read as ``None`` (a ``class`` this module does not know among them). ``now`` (aware, UTC by
    default) is what ``retryNotBefore`` is measured from.
    """
    try:
        failure = meta.get(TOOL_FAILURE_KEY) if isinstance(meta, Mapping) else None
        if not isinstance(failure, Mapping):
            return None
        retryable = failure.get("retryable")
        return ToolFailureMeta(
            category=_category(failure.get("class")),
            retryable=retryable if isinstance(retryable, bool) else None,
            retry_after_ms=_wait_ms(failure.get("retryNotBefore"), _now(now)),
            guidance=_text(failure.get("agentGuidance")),
            correlation_id=_text(failure.get("correlationId")),
        )
    except Exception:  # a mapping of a server's (or a caller's) making may fail as it likes: nothing read
        return None
