"""Every outcome of a call, mapped into the contract at one boundary, most specific first.

    a contract result        -> ok | empty | its own ToolError
    a per-call timeout       -> transient (timeout)                      session reopened before a retry
    connection refused       -> transient (connection_refused)           reopened
    the source died / closed -> transient (connection_closed)            respawned / reopened
    an answer over the bound -> validation (answer_too_large), not retried  session kept
    a JSON-RPC error         -> validation for bad requests and params, transient for server-side codes
    unstructured isError     -> classified from its text, default business (never retried blindly)
                                the source's own rules first (``contract_with_rules``), then the class of
                                the server's draft toolFailure metadata (``sources.tool_failure``), then
                                the built-in rules
    garbage on the wire      -> transient (garbage)                      reopened

``classify_result`` reads a ``CallToolResult``; ``classify_exception`` reads whatever a call raised.
Both return an ``Outcome``: the contract model plus what the subagent needs to act (whether the
session must be reopened, and a short ``error_type`` for traces). Nothing is passed on raw.

A third-party server speaks no contract: its errors are text. ``TextRule`` maps a pattern in that
text to a category; ``contract_with_rules`` gives a classifier that tries a source's own rules before
the built-in ones, on its ``isError`` text and on the message of a JSON-RPC error it sends. The
description always keeps the whole text and names the rule that decided (or the default).
"""

from __future__ import annotations

import json
import re
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, replace
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
    AnyPage,
    AttemptedQuery,
    ContractViolation,
    EmptyResult,
    ErrorCategory,
    ResultPage,
    ToolError,
    parse_tool_result,
    result_text,
)
from sources.tool_failure import TOOL_FAILURE_KEY, read_failure_meta, to_call_tool_result
from subagents.answer_limit import ANSWER_TOO_LARGE, too_large

__all__ = [
    "CONTRACT",
    "Classifier",
    "Outcome",
    "SourceUnavailable",
    "TextRule",
    "classify_exception",
    "classify_result",
    "contract_with_rules",
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
    # The request provably never reached the tool (nothing accepted the connection, the session could
    # not be opened, the call was stopped before it was sent): sending it again cannot repeat an effect.
    unsent: bool = False
    answered: bool = False  # the source answered it (a result came back), rather than the call failing

    @property
    def error(self) -> ToolError | None:
        return self.result if isinstance(self.result, ToolError) else None


class SourceUnavailable(Exception):
    """A session could not be opened (the process would not start, nothing listens, the handshake failed)."""

    def __init__(self, source: str, cause: BaseException) -> None:
        super().__init__(f"{source}: {cause!r}")
        self.source = source
        self.cause = cause


_RULE_EXAMPLE = "e.g. pattern 'ENOENT|no such file' with category 'validation'"


@dataclass(frozen=True)
class TextRule:
    """Where ``pattern`` is found in an error's text, the error is ``category``.

    ``TextRule.of`` builds one from strings (a user's registration) and says in one line what is
    wrong with them. ``label`` names a built-in rule in descriptions; a source's own rule is named
    by its pattern.
    """

    pattern: re.Pattern[str]
    category: ErrorCategory
    label: str = ""

    @classmethod
    def of(cls, pattern: str, category: str | ErrorCategory) -> TextRule:
        """A rule from strings: the pattern a regular expression, matched anywhere, ignoring case.

        Raises ``ValueError`` (one line, naming the bad part, the categories and an example).
        """
        accepted = ", ".join(member.value for member in ErrorCategory)
        try:
            chosen = ErrorCategory(str(category).strip().lower())
        except ValueError:
            raise ValueError(
                f"unknown error category {str(category)!r} for pattern {pattern!r}: "
                f"use one of {accepted} ({_RULE_EXAMPLE})"
            ) from None
        if not pattern.strip():
            # An empty pattern matches every text: almost always a slip, so the catch-all must be said.
            raise ValueError(
                f"an empty pattern for {chosen.value}: write '.' to match every text ({_RULE_EXAMPLE})"
            )
        try:
            compiled = re.compile(pattern, re.IGNORECASE)
        except re.error as exc:
            where = "" if exc.pos is None else f" at position {exc.pos}"
            raise ValueError(
                f"the pattern {pattern!r} is not a regular expression ({exc.msg}{where}); "
                f"categories: {accepted} ({_RULE_EXAMPLE})"
            ) from None
        return cls(compiled, chosen)


def _builtin(label: str, pattern: str, category: ErrorCategory) -> TextRule:
    return TextRule(re.compile(pattern, re.IGNORECASE), category, label)


# Unstructured error text from a server that does not speak the contract, most specific first. The
# first three are what the official SDKs themselves write, anchored at the start so that a caller's
# input quoted further on (pydantic quotes it) cannot decide. None makes unknown text retryable: only
# words that say so ("timed out", "unavailable", 503...) do; everything else falls to business.
_TEXT_RULES: tuple[TextRule, ...] = (
    # TypeScript SDK: a result that breaks the tool's own output schema is a server bug, whatever its code.
    _builtin(
        "the TypeScript SDK's output validation error", r"^MCP error -32602: Output validation error",
        ErrorCategory.BUSINESS,
    ),
    # TypeScript SDK: its McpServer turns a protocol error in tools/call into a result "MCP error CODE:
    # ..."; -32602 is an unknown or disabled tool, or arguments failing the input schema.
    _builtin("the TypeScript SDK's invalid-params error", r"^MCP error -32602: ", ErrorCategory.VALIDATION),
    # Python SDK (MCPServer, formerly FastMCP): arguments failing the input schema.
    _builtin(
        "the Python SDK's argument validation error",
        r"^(?:Error executing tool \S+: )?\d+ validation errors? for \w*Arguments\b", ErrorCategory.VALIDATION,
    ),
    _builtin(
        "words of permission", r"permission|forbidden|unauthori[sz]ed|access denied|not allowed to|\b40[13]\b",
        ErrorCategory.PERMISSION,
    ),
    _builtin(
        "words of a passing failure",
        r"timed? ?out|temporar|unavailable|try again|rate.?limit|overload|busy|\b(429|50[234])\b",
        ErrorCategory.TRANSIENT,
    ),
    _builtin(
        "words of bad input",
        r"invalid|malformed|must be|required|expected|validation|unknown (tool|argument)|\b400\b",
        ErrorCategory.VALIDATION,
    ),
)  # fmt: skip
_DEFAULT = "no rule matched, so business (never retried blindly)"


def _own_rule(text: str, source: str, rules: Iterable[TextRule]) -> tuple[ErrorCategory, str] | None:
    """The category the source's own rules give ``text``, and which rule gave it; None when none matches."""
    for rule in rules:
        if rule.pattern.search(text):
            whose = f"the {source} source's" if source else "the source's"
            return rule.category, f"{whose} own rule /{rule.pattern.pattern}/ made it {rule.category.value}"
    return None


def _text_category(text: str, source: str, rules: Iterable[TextRule]) -> tuple[ErrorCategory, str]:
    """The category of an error text and which rule decided: the source's own, a built-in, or the default."""
    own = _own_rule(text, source, rules)
    if own is not None:
        return own
    for rule in _TEXT_RULES:
        if rule.pattern.search(text):
            return rule.category, f"the built-in rule for {rule.label} made it {rule.category.value}"
    # Business is the safe default: never retried, never "repaired" blindly, always seen by a human.
    return ErrorCategory.BUSINESS, _DEFAULT


_SCHEMA_BREACH = re.compile(r"structured content|output schema|invalid schema for tool", re.I)


def _error(
    category: ErrorCategory, description: str, error_type: str, *, reopen: bool = False, unsent: bool = False,
    retry_after_ms: int | None = None,
) -> Outcome:  # fmt: skip
    error = ToolError.of(category, description, retry_after_ms=retry_after_ms)
    return Outcome("error", error, error_type=error_type, reopen=reopen, unsent=unsent)


# The failures that prove the request never left for the tool: nothing took the connection, or the
# process that would run it never started.
_NEVER_SENT = frozenset({"connection_refused", "spawn_failed"})


def classify_result(
    result: CallToolResult,
    *,
    source: str = "",
    rules: Iterable[TextRule] = (),
    empty: Iterable[re.Pattern[str]] = (),
) -> Outcome:
    """Map what came back into the contract; ``rules``, the source's own, decide text outside it first,
    and ``empty``, the source's ways of saying it found nothing ("No matches found"), make a success
    whose whole text one of them matches a valid empty result."""
    try:
        parsed = parse_tool_result(result)
    except ContractViolation:
        return _unstructured(result, source, rules, empty)
    if isinstance(parsed, ToolError):
        return Outcome("error", parsed, error_type="tool_error")
    if isinstance(parsed, EmptyResult):
        return Outcome("empty", parsed)
    return Outcome("ok", parsed)


def _unstructured(
    result: CallToolResult, source: str, rules: Iterable[TextRule], empty: Iterable[re.Pattern[str]]
) -> Outcome:
    """A result outside the contract. Its text is kept whole in the description, with the rule that decided."""
    text = result_text(result).strip() or "(no text)"
    nothing = None if result.is_error else next((said for said in empty if said.fullmatch(text)), None)
    if nothing is not None:  # "looked and found nothing", in the source's own words: a success, not a record
        whose = f"the {source} source's" if source else "the source's"
        message = f"{text} ({whose} own words for nothing found, /{nothing.pattern}/)"
        return Outcome("empty", EmptyResult(message=message))
    if not result.is_error:
        # A third-party success: keep what it said as one record rather than drop it.
        record: Any = result.structured_content if result.structured_content is not None else {"text": text}
        return Outcome("ok", AnyPage(result_count=1, results=[record]), error_type="")
    own = _own_rule(text, source, rules)
    declared = None if own is not None else read_failure_meta(result.meta)
    if declared is not None and declared.category is not None:  # the server said what failed: no guess
        category = declared.category
        description = (
            "The source answered outside the error contract; its toolFailure metadata (the draft MCP "
            f"{TOOL_FAILURE_KEY}) made it {category.value}: {text}"
        )
        wait = declared.retry_after_ms if category is ErrorCategory.TRANSIENT else None
        return Outcome(
            "error", ToolError.of(category, description, retry_after_ms=wait), error_type="unstructured_error"
        )
    category, decided = own or _text_category(text, source, rules)
    description = f"The source answered outside the error contract; {decided}: {text}"
    return _error(category, description, "unstructured_error")


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


def classify_exception(exc: BaseException, *, source: str = "", rules: Iterable[TextRule] = ()) -> Outcome:
    """Map what a call raised into the contract; ``rules``, the source's own, decide a JSON-RPC error's message first.

    Cancellation is not an answer: a group holding any (asyncio's or trio's, both ``BaseException``)
    has it split off and re-raised, so it propagates; the errors of a group are all classified.
    """
    rules = tuple(rules)  # read once per leaf of a group
    if isinstance(exc, BaseExceptionGroup):
        return _from_group(exc, source, rules)
    if isinstance(exc, SourceUnavailable):
        inner = classify_exception(exc.cause, source=source, rules=rules)
        cause = inner.error.description if inner.error is not None else type(exc.cause).__name__
        description = f"The {exc.source} source could not be reached: {cause}"
        # The session never opened, so no request was sent on it.
        return _error(
            ErrorCategory.TRANSIENT, description, inner.error_type or "unavailable", reopen=True, unsent=True
        )
    if isinstance(exc, MCPError):
        return _from_mcp_error(exc, source, rules)
    for types, category, error_type, happened in _FAILURES:
        if isinstance(exc, types):
            detail = f" ({exc})" if str(exc) else ""
            return _error(
                category, happened + detail, error_type, reopen=True, unsent=error_type in _NEVER_SENT
            )
    if isinstance(exc, httpx2.HTTPStatusError):
        return _from_http_status(exc.response.status_code, exc.response.headers.get("retry-after"))
    if isinstance(exc, RuntimeError) and _SCHEMA_BREACH.search(str(exc)):
        # A source whose results break its own published schema has a bug: retrying will not fix it.
        return _error(
            ErrorCategory.BUSINESS,
            f"The source's result broke its own output schema: {exc}",
            "schema_violation",
        )
    if isinstance(exc, httpx2.HTTPError | OSError):
        error_type = "os_error" if isinstance(exc, OSError) else "connection_closed"
        description = f"The connection to the source failed: {exc}"
        return _error(ErrorCategory.TRANSIENT, description, error_type, reopen=True)
    # A failure nobody foresaw: kept and named, and retried within the bounds like an outage.
    return _error(
        ErrorCategory.TRANSIENT,
        f"The call failed unexpectedly: {type(exc).__name__}: {exc}",
        "unexpected",
        reopen=True,
    )


def _from_http_status(status: int, retry_after: str | None = None) -> Outcome:
    category = ErrorCategory.TRANSIENT if status >= 500 or status == 429 else ErrorCategory.VALIDATION
    if status in (401, 403):
        category = ErrorCategory.PERMISSION
    reopen = category is ErrorCategory.TRANSIENT
    # 429 and 503 with Retry-After (seconds): the source's pushback, waited out as it asks.
    seconds = retry_after if status in (429, 503) and _SECONDS.fullmatch(retry_after or "") else None
    wait = None if seconds is None else int(float(seconds) * 1000)
    said = f", retry after {retry_after} s" if wait is not None else ""
    return _error(
        category,
        f"The source answered HTTP {status}{said}.",
        f"http_{status}",
        reopen=reopen,
        retry_after_ms=wait,
    )


_SECONDS = re.compile(r"\d{1,6}(\.\d+)?")


def _from_mcp_error(exc: MCPError, source: str, rules: Iterable[TextRule]) -> Outcome:
    code = exc.error.code
    message = exc.error.message
    over = _over_the_limit(code, message)
    if over is not None:
        # Refused while read, the session kept: the same call would answer the same size.
        description = (
            f"The source's answer was refused: {over}, the limit of one tool result; it was dropped "
            "unread and the session kept. Ask for less: a narrower query or a smaller limit."
        )
        # The source did answer (a write's outcome is known: it ran); its answer was not kept.
        return replace(_error(ErrorCategory.VALIDATION, description, "answer_too_large"), answered=True)
    if code in _CLIENT_SIDE_CODES:  # our own client's, about the transport: no source's rule may reword those
        error_type, description = _CLIENT_SIDE_CODES[code]
        return _error(
            ErrorCategory.TRANSIENT, description.format(code=code, message=message), error_type, reopen=True
        )
    # The source sent this error itself: its own rules read the message before its code is mapped.
    own = _own_rule(message, source, rules)
    if own is not None:
        category, decided = own
        return _error(
            category, f"The source answered JSON-RPC {code}; {decided}: {message}", f"jsonrpc_{code}"
        )
    if code in (INVALID_PARAMS, INVALID_REQUEST, METHOD_NOT_FOUND):
        category, did = ErrorCategory.VALIDATION, "rejected"
    elif code == INTERNAL_ERROR or -32099 <= code <= -32000:
        category, did = ErrorCategory.TRANSIENT, "failed to handle"
    else:
        category, did = ErrorCategory.BUSINESS, "refused"
    return _error(category, f"The source {did} the request (JSON-RPC {code}): {message}", f"jsonrpc_{code}")


# An answer over the bound (``subagents.answer_limit``) as each transport reports it: a stdio line
# with our own code; over HTTP the SDK's words for an SSE event over its bound (a closed stream) and
# ours for a JSON body cut off (in its "Failed to parse JSON response").
_SSE_OVER = re.compile(r"Server-sent event exceeded the (\d+) byte limit")
_BODY_OVER = re.compile(r"the answer was larger than [\d.]+ MB")


def _over_the_limit(code: int, message: str) -> str | None:
    """The words of an answer over the bound ("the answer was larger than 8 MB"), else None."""
    if code == ANSWER_TOO_LARGE:
        return message
    if code == CONNECTION_CLOSED and (sse := _SSE_OVER.search(message)) is not None:
        return too_large(int(sse.group(1)))
    if code == PARSE_ERROR and (body := _BODY_OVER.search(message)) is not None:
        return body.group(0)
    return None


# The codes our own client raises about the transport: (error type, description). Each is transient
# and leaves the session suspect.
_CLIENT_SIDE_CODES = {
    REQUEST_TIMEOUT: ("timeout", "The call timed out: {message}."),
    CONNECTION_CLOSED: ("connection_closed", "The source closed the connection mid-call (it may have died)."),
    # Our client sends well-formed JSON-RPC, so a parse error is the client failing to read the
    # source's answer (over HTTP the SDK reports a corrupt body so): garbage on the wire.
    PARSE_ERROR: (
        "garbage",
        "The source's answer could not be read as an MCP message (JSON-RPC {code}): {message}",
    ),
}


def _from_group(
    group: BaseExceptionGroup[BaseException], source: str, rules: tuple[TextRule, ...]
) -> Outcome:
    """Several failures of one call: the first a retry cannot fix decides, else the first; all are named."""
    errors, cancellation = group.split(Exception)
    if cancellation is not None:
        raise cancellation
    assert errors is not None  # split leaves every leaf on one side or the other
    outcomes = [classify_exception(leaf, source=source, rules=rules) for leaf in _leaves(errors)]
    decisive = next((o for o in outcomes if o.error is not None and not o.error.is_retryable), outcomes[0])
    descriptions = list(dict.fromkeys(o.error.description for o in outcomes if o.error is not None))
    if len(descriptions) < 2 or decisive.error is None:
        return decisive
    error = decisive.error.model_copy(update={"description": " Also: ".join(descriptions)})
    unsent = all(o.unsent for o in outcomes)  # a group proves nothing was sent only if each failure does
    return Outcome("error", error, decisive.error_type, any(o.reopen for o in outcomes), unsent)


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
    return replace(outcome, result=error.model_copy(update={"attempted_query": query}))


class Classifier(Protocol):
    """The classification boundary as a subagent sees it: what came back, or what was raised, as an outcome.

    ``CONTRACT`` is the one a coordinator runs with; ``contract_with_rules`` gives one that also knows
    how third-party sources word their errors (``source`` names the source called). The boundary is a
    value so that one substitution can show what a subagent does with less: ``research compare``
    replaces it with a boundary that turns every failure into "Operation failed" and runs everything
    else unchanged.
    """

    def result(self, result: CallToolResult, *, source: str = "") -> Outcome: ...

    def exception(self, exc: Exception, *, source: str = "") -> Outcome: ...

    def for_model(self, answer: ResultPage[Any] | EmptyResult | ToolError) -> CallToolResult:
        """How an answer reads to a model that called the tool (Claude mode)."""
        ...


@dataclass(frozen=True, eq=False)  # a classifier is one boundary: the same only as itself (``is CONTRACT``)
class _Contract:
    rules: Mapping[str, tuple[TextRule, ...]]  # by source
    empty: Mapping[str, tuple[re.Pattern[str], ...]]  # by source: its words for nothing found

    def result(self, result: CallToolResult, *, source: str = "") -> Outcome:
        return classify_result(
            result, source=source, rules=self.rules.get(source, ()), empty=self.empty.get(source, ())
        )

    def exception(self, exc: Exception, *, source: str = "") -> Outcome:
        return classify_exception(exc, source=source, rules=self.rules.get(source, ()))

    def for_model(self, answer: ResultPage[Any] | EmptyResult | ToolError) -> CallToolResult:
        return to_call_tool_result(answer)


CONTRACT: Classifier = _Contract({}, {})


def contract_with_rules(
    rules: Mapping[str, Iterable[TextRule]], empty: Mapping[str, Iterable[str]] | None = None
) -> Classifier:
    """The contract's classifier, with each source's own rules tried before the built-in ones.

    ``rules`` maps a source name (``ToolCall.source``) to its rules, first match wins. They read the
    text of an ``isError`` result outside the contract and the message of a JSON-RPC error the source
    sent; never a contract result, nor what the client itself reports (timeouts, a closed connection).
    ``empty`` maps a source name to the texts (patterns, matching the whole text, ignoring case) with
    which it answers a search that found nothing.
    """
    if "" in rules or "" in (empty or {}):
        raise ValueError("text rules must name the source they are for (got the empty name)")
    said = {
        source: tuple(re.compile(text, re.IGNORECASE) for text in texts)
        for source, texts in (empty or {}).items()
    }
    return _Contract({source: tuple(own) for source, own in rules.items()}, said)
