"""Export a source's spans just after the answer they belong to, not on its way out.

A source exports every span soon after it ends, so that a source killed outright has already
written what it finished (``traces.setup``, ``eager``). Handing each span to the batch processor the
moment it ends woke the export thread exactly when the event loop was writing the answer: the two
threads took turns with the interpreter lock, and tracing cost about 0.3 ms per call, more than a
tool's own work (``benchmarks/source_cost.py``). The server span of a call ends just before its
answer is serialized and written, so ``ExportAfterTheAnswer`` holds finished spans for
``DELAY_S`` on the event loop and then hands them over together: the export thread then runs
while the source waits for its next request. Spans that end off an event loop's thread pass
straight through; ``force_flush`` and ``shutdown`` hand over what is held first, so a source that
leaves (its client hung up, SIGTERM, the crash fault) still writes everything it finished.

What a source killed from outside (SIGKILL) can lose: the spans of about its last millisecond, as
before a span was lost that ended while the export thread waited for the interpreter lock.
"""

from __future__ import annotations

import asyncio
import threading

from opentelemetry.context import Context
from opentelemetry.sdk.trace import ReadableSpan, Span, SpanProcessor

__all__ = ["DELAY_S", "ExportAfterTheAnswer"]

DELAY_S = 0.001  # longer than writing an answer takes; shorter than a client takes to send the next call


class ExportAfterTheAnswer(SpanProcessor):
    """Wraps a span processor: spans ended on an event loop reach it ``DELAY_S`` later, together."""

    def __init__(self, inner: SpanProcessor, delay_s: float = DELAY_S) -> None:
        self.inner = inner
        self._delay_s = delay_s
        self._held: list[ReadableSpan] = []
        self._lock = threading.Lock()  # spans may end on several threads (a tool body's, the loop's)

    def on_start(self, span: Span, parent_context: Context | None = None) -> None:
        self.inner.on_start(span, parent_context)

    def on_end(self, span: ReadableSpan) -> None:
        try:
            loop = asyncio.get_running_loop()
        except RuntimeError:  # no event loop on this thread: no answer being written here to wait for
            self.inner.on_end(span)
            return
        with self._lock:
            self._held.append(span)
            first = len(self._held) == 1
        if first:
            loop.call_later(self._delay_s, self._hand_over)

    def _hand_over(self) -> None:
        with self._lock:
            held, self._held = self._held, []
        for span in held:
            self.inner.on_end(span)

    def force_flush(self, timeout_millis: int = 30000) -> bool:
        self._hand_over()
        return self.inner.force_flush(timeout_millis)

    def shutdown(self) -> None:
        self._hand_over()
        self.inner.shutdown()
