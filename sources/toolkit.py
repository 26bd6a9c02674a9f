"""What every source shares: its server, its middleware, its data, and the contract-tool decorator.

A source module reads as its tools and nothing else::

    source = open_source("orders", settings, instructions="...")

    @source.tool(Order, title="Search a customer's orders")
    def search_orders(customer_id: ..., limit: ... = 50) -> ResultPage[Order] | EmptyResult:
        ...

``Source.tool`` registers a plain function as an MCP tool whose output schema is
``ResultPage[record]``, with a human ``title`` and the tool annotations that say what it does (a
read, or a write, and whether repeating it is safe). The function returns a contract model or
raises ``ToolFailure``; the wrapper makes either a ``CallToolResult`` (``to_call_tool_result``),
fills in ``attempted_query`` where a raised error names none, and turns anything unexpected into a
transient contract error whose details stay in the source's log, never in the result (its
reference, which the log names, is the result's ``correlationId``).

Every call passes through the same middleware, outermost first: the SDK's own OpenTelemetry span,
the fault layer, the credential check, and the argument guard.
"""

from __future__ import annotations

import functools
import inspect
import logging
import secrets
import sqlite3
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Annotated, Any, TypeVar

import anyio
from mcp.server import MCPServer
from mcp.types import CallToolResult, ToolAnnotations
from pydantic import BaseModel

from sources.arguments import (
    MISSING,
    ArgumentGuard,
    echo_arguments,
    invalid_argument,
)
from sources.contract import (
    AnyPage,
    AttemptedQuery,
    EmptyResult,
    ErrorCategory,
    ResultPage,
    ToolError,
    ToolFailure,
)
from sources.faults import FaultLayer
from sources.formats import Format
from sources.registered import run_as_contract_tool
from sources.security.auth import CredentialCheck
from sources.settings import SourceSettings
from sources.store import Store
from sources.tool_failure import to_call_tool_result
from sources.wire import Wire
from sources.world import CHANGING, ensure_world

__all__ = ["Source", "invalid", "open_source", "page_of"]

logger = logging.getLogger(__name__)

RecordT = TypeVar("RecordT", bound=BaseModel)
ToolFn = TypeVar("ToolFn", bound=Callable[..., Any])

SOURCE_VERSION = "0.1.0"
EMPTY_RESULT_NOTE = "The query executed successfully and returned no matches."


@dataclass
class Source:
    """One source's server, data and settings.

    Where a tool's body runs: a tool that reads, on the event loop (its body is a few indexed
    queries on a kept connection, about a tenth of a millisecond, less than the hop to a worker thread
    and back, 0.2 ms); a tool that writes (``tool(..., writes=True)``), on a worker thread, so a
    call that waits for SQLite's write lock (another process's refund committing) never holds up
    the other calls. A read waits at most ``sources.store.READ_WAIT_S`` for a commit to end.
    """

    name: str
    server: MCPServer
    store: Store
    settings: SourceSettings

    def tool(
        self,
        record: type[BaseModel],
        *,
        title: str,
        description: str | None = None,
        writes: bool = False,
        idempotent: bool = False,
    ) -> Callable[[ToolFn], ToolFn]:
        """Register a function as a contract tool whose results are ``record``s.

        The tool's published description is the function's docstring, or ``description`` (indented
        like a docstring, and cleaned the same way) where the text is built from values, such as a
        domain limit that must be written in one place only. ``title`` is its short human name.
        What it does is said here and nowhere else: a read by default; ``writes=True`` for a tool
        that changes the shop's records, with ``idempotent=True`` only when calling it again with
        the same arguments has no additional effect. Its annotations follow (``_annotations``).
        """
        annotations = _annotations(title, writes=writes, idempotent=idempotent)

        def register(fn: ToolFn) -> ToolFn:
            tool_name = fn.__name__

            @functools.wraps(fn)
            async def run(**arguments: Any) -> CallToolResult:
                try:
                    if writes:
                        outcome = await anyio.to_thread.run_sync(functools.partial(fn, **arguments))
                    else:
                        outcome = fn(**arguments)
                except ToolFailure as failure:
                    outcome = failure.error
                    if outcome.attempted_query is None:
                        query = AttemptedQuery(tool=tool_name, arguments=echo_arguments(arguments))
                        outcome = outcome.model_copy(update={"attempted_query": query})
                except sqlite3.OperationalError:
                    logger.warning("data store busy in %s.%s", self.name, tool_name, exc_info=True)
                    outcome = ToolError.of(
                        ErrorCategory.TRANSIENT,
                        f"The {self.name} data store is busy; the request did not complete and should succeed on retry.",
                    )
                except (
                    Exception
                ):  # a real boundary: a bug must reach the caller as a contract error, not a traceback
                    reference = secrets.token_hex(4)
                    logger.exception(
                        "unexpected failure in %s.%s (reference %s)", self.name, tool_name, reference
                    )
                    outcome = ToolError.of(
                        ErrorCategory.TRANSIENT,
                        f"The {self.name} source failed unexpectedly (reference {reference}); "
                        "the request may succeed on retry.",
                    )
                    return to_call_tool_result(outcome, correlation_id=reference)
                return to_call_tool_result(outcome)

            signature = inspect.signature(fn, eval_str=True)
            run.__signature__ = signature.replace(  # type: ignore[attr-defined]  # read by the SDK's schema builder
                return_annotation=Annotated[CallToolResult, ResultPage[record]]  # type: ignore[valid-type]  # a generic parametrized at run time, by this tool's record
            )
            text = inspect.getdoc(fn) if description is None else inspect.cleandoc(description)
            self.server.add_tool(run, name=tool_name, title=title, description=text, annotations=annotations)
            # Its arguments are checked by the guard, its result by the contract: not again by the SDK.
            run_as_contract_tool(self.server, tool_name)
            return fn

        return register


def _annotations(title: str, *, writes: bool, idempotent: bool) -> ToolAnnotations:
    """What a tool of the five sources does, as MCP's tool annotations (hints a host reads).

    Every tool touches only the shop's own data (``openWorldHint`` false). A read changes nothing:
    ``readOnlyHint``, never destructive, always safe to repeat. A write is destructive (a refund
    moves money that no call takes back) and ``idempotentHint`` only as the specification means
    it: the same arguments, an idempotency key among them, have no additional effect.
    """
    if idempotent and not writes:
        raise ValueError("a read is idempotent already: `idempotent` describes a write")
    return ToolAnnotations(
        title=title,
        read_only_hint=not writes,
        destructive_hint=writes,
        idempotent_hint=idempotent or not writes,
        open_world_hint=False,
    )


def open_source(
    name: str,
    settings: SourceSettings | None,
    *,
    instructions: str,
    wire: Wire | None = None,
) -> Source:
    """A source's server with the shared middleware, and its data (generated on first start)."""
    # A source keeps no private key, even one its environment carried by mistake: it verifies, never signs.
    settings = (settings or SourceSettings.from_environment()).without_signing_key()
    world = ensure_world(settings.data_dir, settings.seed)  # the data folder made private there
    server = MCPServer(
        name,
        instructions=instructions,
        version=SOURCE_VERSION,
        middleware=[
            FaultLayer(settings.faults, source=name, wire=wire),
            CredentialCheck(name, settings.verification_key),
        ],
        log_level="WARNING",
    )
    server.middleware.append(ArgumentGuard(server))
    store = Store(world / f"{name}.db", immutable=name not in CHANGING)
    return Source(name=name, server=server, store=store, settings=settings)


def page_of(
    records: Sequence[RecordT],
    *,
    empty_message: str,
    next_cursor: str | None = None,
    truncated: bool = False,
) -> ResultPage[RecordT] | EmptyResult:
    """Records as a success, or the valid empty result (a success too) when there are none.

    ``empty_message`` says what matched nothing ("No orders of CUST-00077 match."); the sentence
    that tells a caller not to retry is added here, the same for every tool. A page with a
    ``next_cursor`` is truncated; so is one that says so (``truncated``) where no cursor leads on.
    """
    if not records:
        return EmptyResult(message=f"{empty_message} {EMPTY_RESULT_NOTE}")
    return AnyPage(
        result_count=len(records),
        results=list(records),
        truncated=truncated or next_cursor is not None,
        next_cursor=next_cursor,
    )


def invalid(
    field: str,
    problem: str,
    *,
    received: Any = MISSING,
    form: Format | None = None,
    expected: str = "",
    example: Any = None,
) -> ToolFailure:
    """A validation failure found inside a tool body, in the same words the argument guard uses."""
    if form is not None:
        expected, example = form.expected, form.example
    return ToolFailure(invalid_argument(field, problem, expected, example, received=received))
