"""Status for the mcp SDK's own client spans, which it leaves unset on a lost connection and on isError.

The SDK opens a CLIENT span ``MCP send tools/call <tool>`` per request and ends it before it
returns, so by the time a subagent knows the outcome (an ``isError`` result, a dead session) the
span has ended. ``ClientSpanStatus`` wraps each span processor and holds back the client spans
ended inside a ``collect_client_spans()`` block; the subagent classifies the outcome inside the
block and calls ``failed(...)``; when the block ends, the held spans go on to the wrapped processor,
with status ``ERROR`` and ``error.type`` where the outcome was a failure. No second span per attempt,
no private SDK hook, and exact whichever processor (batch or simple) sits underneath.
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from contextvars import ContextVar
from dataclasses import dataclass, field

from opentelemetry.context import Context
from opentelemetry.sdk.trace import ReadableSpan, Span, SpanProcessor
from opentelemetry.trace import Status, StatusCode

from traces.attributes import ERROR_TYPE

__all__ = ["ClientSpanStatus", "ClientSpans", "collect_client_spans"]

_CLIENT_SPAN_PREFIX = "MCP send tools/call"


@dataclass
class ClientSpans:
    """The client spans of one call, held until its outcome is known."""

    span_ids: set[int] = field(default_factory=set)
    held: list[tuple[ClientSpanStatus, ReadableSpan]] = field(default_factory=list)
    failure: tuple[str, str] | None = None

    def failed(self, error_type: str, description: str) -> None:
        self.failure = (error_type, description)

    def _release(self) -> None:
        for processor, span in self.held:
            processor.inner.on_end(_with_failure(span, self.failure) if self.failure else span)
        self.held.clear()


_collecting: ContextVar[ClientSpans | None] = ContextVar("client_spans", default=None)


def _with_failure(span: ReadableSpan, failure: tuple[str, str]) -> ReadableSpan:
    if span.status.status_code is StatusCode.ERROR:
        return span  # the SDK already said why (a JSON-RPC error)
    error_type, description = failure
    return ReadableSpan(
        name=span.name,
        context=span.get_span_context(),
        parent=span.parent,
        resource=span.resource,
        attributes={**(span.attributes or {}), ERROR_TYPE: error_type},
        events=span.events,
        links=span.links,
        kind=span.kind,
        status=Status(StatusCode.ERROR, description[:300]),
        start_time=span.start_time,
        end_time=span.end_time,
        instrumentation_scope=span.instrumentation_scope,
    )


@contextmanager
def collect_client_spans() -> Iterator[ClientSpans]:
    """Hold the client spans the SDK ends inside this block; release them, marked, when it ends."""
    spans = ClientSpans()
    reset = _collecting.set(spans)
    try:
        yield spans
    finally:
        _collecting.reset(reset)
        spans._release()


class ClientSpanStatus(SpanProcessor):
    """Wraps a span processor: client spans of a collecting call wait for their outcome."""

    def __init__(self, inner: SpanProcessor) -> None:
        self.inner = inner

    def on_start(self, span: Span, parent_context: Context | None = None) -> None:
        self.inner.on_start(span, parent_context)
        collecting = _collecting.get()
        if collecting is not None and span.name.startswith(_CLIENT_SPAN_PREFIX):
            collecting.span_ids.add(span.get_span_context().span_id)

    def on_end(self, span: ReadableSpan) -> None:
        collecting = _collecting.get()
        context = span.get_span_context()
        if collecting is not None and context is not None and context.span_id in collecting.span_ids:
            collecting.held.append((self, span))
            return
        self.inner.on_end(span)

    def shutdown(self) -> None:
        self.inner.shutdown()

    def force_flush(self, timeout_millis: int = 30000) -> bool:
        return self.inner.force_flush(timeout_millis)
