"""Every outcome of a call, mapped into the contract at one boundary, most specific first.

    a contract result        -> ok | empty | its own ToolError
    a per-call timeout       -> transient (timeout)                      session reopened before a retry
    connection refused       -> transient (connection_refused)           reopened
    the source died / closed -> transient (connection_closed)            respawned / reopened
    a JSON-RPC error         -> validation for bad requests and params, transient for server-side codes
    unstructured isError     -> classified from its text, default business (never retried blindly)
    garbage on the wire      -> transient (garbage)                      reopened

``classify_result`` reads a ``CallToolResult``; ``classify_exception`` reads whatever a call raised.
Both return an ``Outcome``: the contract model plus what the subagent needs to act (whether the
session must be reopened, and a short ``error_type`` for traces). Nothing is passed on raw.
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass
from typing import Any, Literal, Protocol

import anyio
import httpx2
import pydantic
from mcp.shared.exceptions import MCPError
from mcp.types import CallToolResult
from mcp_types import (
    CONNECTION_CLOSED,
    INTERNAL_ERROR,
    INVALID_PARAMS,
    INVALID_REQUEST,
    METHOD_NOT_FOUND,
    PARSE_ERROR,
    REQUEST_TIMEOUT,
)

from sources.contract import (
    AttemptedQuery,
    ContractViolation,
    EmptyResult,
    ErrorCategory,
    ResultPage,
    ToolError,
    parse_tool_result,
    result_text,
    to_call_tool_result,
)

__all__ = [
    "CONTRACT",
    "Classifier",
    "Outcome",
    "SourceUnavailable",
    "classify_exception",
    "classify_result",
    "with_attempted_query",
]

OutcomeKind = Literal["ok", "empty", "error"]


@dataclass(frozen=True)
class Outcome:
    """One call's outcome in the contract."""

    kind: OutcomeKind
    result: ResultPage[Any] | EmptyResult | ToolError
    error_type: str = ""  # short and stable: "tool_error", "timeout", "connection_closed", ...
    reopen: bool = False  # the session is dead or suspect: open a new one before calling again

    @property
    def error(self) -> ToolError | None:
        return self.result if isinstance(self.result, ToolError) else None


class SourceUnavailable(Exception):
    """A session could not be opened (the process would not start, nothing listens, the handshake failed)."""

    def __init__(self, source: str, cause: BaseException) -> None:
        super().__init__(f"{source}: {cause!r}")
        self.source = source
        self.cause = cause


# Unstructured error text from a server that does not speak the contract, most specific first.
_TEXT_RULES: list[tuple[re.Pattern[str], ErrorCategory]] = [
    (
        re.compile(r"permission|forbidden|unauthori[sz]ed|access denied|not allowed to|\b40[13]\b", re.I),
        ErrorCategory.PERMISSION,
    ),
    (
        re.compile(
            r"timed? ?out|temporar|unavailable|try again|rate.?limit|overload|busy|\b(429|50[234])\b", re.I
        ),
        ErrorCategory.TRANSIENT,
    ),
    (
        re.compile(
            r"invalid|malformed|must be|required|expected|validation|unknown (tool|argument)|\b400\b", re.I
        ),
        ErrorCategory.VALIDATION,
    ),
]


_SCHEMA_BREACH = re.compile(r"structured content|output schema|invalid schema for tool", re.I)


def _text_of(result: CallToolResult) -> str:
    return result_text(result).strip()


def _error(category: ErrorCategory, description: str, error_type: str, *, reopen: bool = False) -> Outcome:
    return Outcome("error", ToolError.of(category, description), error_type=error_type, reopen=reopen)


def classify_result(result: CallToolResult) -> Outcome:
    try:
        parsed = parse_tool_result(result)
    except ContractViolation:
        return _unstructured(result)
    if isinstance(parsed, ToolError):
        return Outcome("error", parsed, error_type="tool_error")
    if isinstance(parsed, EmptyResult):
        return Outcome("empty", parsed)
    return Outcome("ok", parsed)


def _unstructured(result: CallToolResult) -> Outcome:
    """A result outside the contract. Its text is kept whole in the description."""
    text = _text_of(result) or "(no text)"
    if not result.is_error:
        # A third-party success: keep what it said as one record rather than drop it.
        record: Any = result.structured_content if result.structured_content is not None else {"text": text}
        return Outcome("ok", ResultPage[Any](result_count=1, results=[record]), error_type="")
    category = next((cat for pattern, cat in _TEXT_RULES if pattern.search(text)), ErrorCategory.BUSINESS)
    # Business is the safe default: never retried, never "repaired" blindly, always seen by a human.
    return _error(category, f"The source answered outside the error contract: {text}", "unstructured_error")


# Foreign failures whose meaning does not depend on their details: (types, category, error type, what
# happened). Every one of them leaves the session dead or suspect, so it is reopened before a retry.
_FAILURES: list[tuple[tuple[type[BaseException], ...], ErrorCategory, str, str]] = [
    ((TimeoutError,), ErrorCategory.TRANSIENT, "timeout", "The call timed out; the source did not answer in time."),
    (
        (ConnectionRefusedError, httpx2.ConnectError, httpx2.ConnectTimeout),
        ErrorCategory.TRANSIENT, "connection_refused", "Nothing accepted the connection to the source.",
    ),
    ((httpx2.TimeoutException,), ErrorCategory.TRANSIENT, "timeout", "The HTTP exchange with the source timed out."),
    (
        (anyio.ClosedResourceError, anyio.BrokenResourceError, anyio.EndOfStream, BrokenPipeError, ConnectionResetError),
        ErrorCategory.TRANSIENT, "connection_closed", "The source closed the connection mid-call.",
    ),
    (
        (FileNotFoundError, PermissionError),
        ErrorCategory.TRANSIENT, "spawn_failed", "The source process could not be started.",
    ),
    (
        (UnicodeDecodeError, json.JSONDecodeError, pydantic.ValidationError),
        ErrorCategory.TRANSIENT, "garbage", "The source sent bytes that are not a valid MCP message.",
    ),
]  # fmt: skip


def classify_exception(exc: BaseException) -> Outcome:
    """Map what a call raised into the contract.

    Cancellation is not an answer: a group holding any (asyncio's or trio's, both ``BaseException``)
    has it split off and re-raised, so it propagates; the errors of a group are all classified.
    """
    if isinstance(exc, BaseExceptionGroup):
        return _from_group(exc)
    if isinstance(exc, SourceUnavailable):
        inner = classify_exception(exc.cause)
        cause = inner.error.description if inner.error is not None else type(exc.cause).__name__
        description = f"The {exc.source} source could not be reached: {cause}"
        return _error(ErrorCategory.TRANSIENT, description, inner.error_type or "unavailable", reopen=True)
    if isinstance(exc, MCPError):
        return _from_mcp_error(exc)
    for types, category, error_type, happened in _FAILURES:
        if isinstance(exc, types):
            detail = f" ({exc})" if str(exc) else ""
            return _error(category, happened + detail, error_type, reopen=True)
    if isinstance(exc, httpx2.HTTPStatusError):
        return _from_http_status(exc.response.status_code)
    if isinstance(exc, httpx2.HTTPError):
        return _error(
            ErrorCategory.TRANSIENT,
            f"The connection to the source failed: {exc}",
            "connection_closed",
            reopen=True,
        )
    if isinstance(exc, RuntimeError) and _SCHEMA_BREACH.search(str(exc)):
        # A source whose results break its own published schema has a bug: retrying will not fix it.
        return _error(
            ErrorCategory.BUSINESS,
            f"The source's result broke its own output schema: {exc}",
            "schema_violation",
        )
    if isinstance(exc, OSError):
        return _error(
            ErrorCategory.TRANSIENT, f"The connection to the source failed: {exc}", "os_error", reopen=True
        )
    # A failure nobody foresaw: kept and named, and retried within the bounds like an outage.
    return _error(
        ErrorCategory.TRANSIENT,
        f"The call failed unexpectedly: {type(exc).__name__}: {exc}",
        "unexpected",
        reopen=True,
    )


def _from_http_status(status: int) -> Outcome:
    category = ErrorCategory.TRANSIENT if status >= 500 or status == 429 else ErrorCategory.VALIDATION
    if status in (401, 403):
        category = ErrorCategory.PERMISSION
    reopen = category is ErrorCategory.TRANSIENT
    return _error(category, f"The source answered HTTP {status}.", f"http_{status}", reopen=reopen)


def _from_mcp_error(exc: MCPError) -> Outcome:
    code = exc.error.code
    message = exc.error.message
    if code == REQUEST_TIMEOUT:
        return _error(ErrorCategory.TRANSIENT, f"The call timed out: {message}.", "timeout", reopen=True)
    if code == CONNECTION_CLOSED:
        return _error(
            ErrorCategory.TRANSIENT,
            "The source closed the connection mid-call (it may have died).",
            "connection_closed",
            reopen=True,
        )
    if code in (INVALID_PARAMS, INVALID_REQUEST, METHOD_NOT_FOUND):
        return _error(
            ErrorCategory.VALIDATION,
            f"The source rejected the request (JSON-RPC {code}): {message}",
            f"jsonrpc_{code}",
        )
    if code == PARSE_ERROR:
        # Our client sends well-formed JSON-RPC, so a parse error is the client failing to read the
        # source's answer (over HTTP the SDK reports a corrupt body so): garbage on the wire.
        return _error(
            ErrorCategory.TRANSIENT,
            f"The source's answer could not be read as an MCP message (JSON-RPC {code}): {message}",
            "garbage",
            reopen=True,
        )
    if code == INTERNAL_ERROR or -32099 <= code <= -32000:
        return _error(
            ErrorCategory.TRANSIENT,
            f"The source failed to handle the request (JSON-RPC {code}): {message}",
            f"jsonrpc_{code}",
        )
    return _error(
        ErrorCategory.BUSINESS,
        f"The source refused the request (JSON-RPC {code}): {message}",
        f"jsonrpc_{code}",
    )


def _from_group(group: BaseExceptionGroup[BaseException]) -> Outcome:
    errors, cancellation = group.split(Exception)
    if cancellation is not None:
        raise cancellation
    assert errors is not None  # split leaves every leaf on one side or the other
    return _group_outcome([classify_exception(leaf) for leaf in _leaves(errors)])


def _group_outcome(outcomes: list[Outcome]) -> Outcome:
    """Several failures of one call: the first a retry cannot fix decides, else the first; all are named."""
    decisive = next((o for o in outcomes if o.error is not None and not o.error.is_retryable), outcomes[0])
    descriptions = list(dict.fromkeys(o.error.description for o in outcomes if o.error is not None))
    if len(descriptions) < 2 or decisive.error is None:
        return decisive
    error = decisive.error.model_copy(update={"description": " Also: ".join(descriptions)})
    return Outcome("error", error, decisive.error_type, any(o.reopen for o in outcomes))


def _leaves(group: BaseExceptionGroup[BaseException]) -> list[BaseException]:
    found: list[BaseException] = []
    for exc in group.exceptions:
        found.extend(_leaves(exc) if isinstance(exc, BaseExceptionGroup) else [exc])
    return found


def with_attempted_query(outcome: Outcome, query: AttemptedQuery) -> Outcome:
    """The outcome's error with ``attempted_query`` filled in where the source gave none."""
    error = outcome.error
    if error is None or error.attempted_query is not None:
        return outcome
    return Outcome(
        outcome.kind, error.model_copy(update={"attempted_query": query}), outcome.error_type, outcome.reopen
    )


class Classifier(Protocol):
    """The classification boundary as a subagent sees it: what came back, or what was raised, as an outcome.

    ``CONTRACT`` is the one a coordinator runs with. The boundary is a value so that one substitution
    can show what a subagent does with less: ``research compare`` replaces it with a boundary that
    turns every failure into "Operation failed" and runs everything else unchanged.
    """

    def result(self, result: CallToolResult) -> Outcome: ...

    def exception(self, exc: Exception) -> Outcome: ...

    def for_model(self, answer: ResultPage[Any] | EmptyResult | ToolError) -> CallToolResult:
        """How an answer reads to a model that called the tool (Claude mode)."""
        ...


class _Contract:
    def result(self, result: CallToolResult) -> Outcome:
        return classify_result(result)

    def exception(self, exc: Exception) -> Outcome:
        return classify_exception(exc)

    def for_model(self, answer: ResultPage[Any] | EmptyResult | ToolError) -> CallToolResult:
        return to_call_tool_result(answer)


CONTRACT: Classifier = _Contract()
