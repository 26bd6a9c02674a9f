"""OTLP export that fails fast, says so once, and remembers whether the collector took the spans.

Left to its defaults, the SDK's OTLP/HTTP exporter retries an unreachable collector with back-off for
up to 10 s per batch and logs a multi-line warning per attempt. A query has six processes exporting
(a source exports each span as a batch of its own), so `research ask --otlp` with no collector took
11-13 s longer and printed 70-130 lines, then printed a Jaeger link to a trace nobody received.

``OtlpExport`` wraps the SDK's exporter:

- each export has a short timeout, 0.5 s unless ``OTEL_EXPORTER_OTLP_TRACES_TIMEOUT`` or
  ``OTEL_EXPORTER_OTLP_TIMEOUT`` says otherwise: a collector on this machine or the local network
  answers in milliseconds, and it is below the SDK's first back-off (1 s ± 20 %), so a failed export
  is one attempt and never a wait for a retry (at 1 s, about half the failures waited 0.8-1 s more);
- after a failed export it rests: batches are dropped at once for ``rest_s`` (10 s), then the next
  batch tries again, so a dead collector costs one failed attempt, not one per batch, and a collector
  started later (a long-lived fleet source) still gets the spans that follow;
- the SDK exporter's own log lines are silenced; instead one warning line per process, on the first
  failure, when ``warn`` (a source started for a coordinator's run leaves that to the coordinator,
  whose terminal it shares);
- ``delivered`` is the outcome of the last export: whether the collector took the latest spans (after
  a flush, the root span of the command), so the CLI prints a Jaeger link only when there is a trace.
"""

from __future__ import annotations

import logging
import os
import sys
import threading
import time
from collections.abc import Callable, Sequence
from typing import TextIO

from opentelemetry.sdk.trace import ReadableSpan
from opentelemetry.sdk.trace.export import SpanExporter, SpanExportResult

__all__ = ["DEFAULT_TIMEOUT_S", "OtlpExport", "otlp_exporter"]

DEFAULT_TIMEOUT_S = 0.5
REST_S = 10.0
_DEFAULT_ENDPOINT = "http://localhost:4318"
# The SDK exporter logs every retry and failure (a warning of five wrapped lines each); OtlpExport says it once.
_SDK_LOGGERS = ("opentelemetry.exporter.otlp.proto.http", "opentelemetry.exporter.otlp.common")


def otlp_endpoint() -> str:
    """Where the spans go, as the SDK resolves it from the standard variables (for messages)."""
    if os.environ.get("OTEL_EXPORTER_OTLP_TRACES_ENDPOINT"):
        return os.environ["OTEL_EXPORTER_OTLP_TRACES_ENDPOINT"]
    return os.environ.get("OTEL_EXPORTER_OTLP_ENDPOINT", _DEFAULT_ENDPOINT).rstrip("/") + "/v1/traces"


class OtlpExport(SpanExporter):
    """Wraps an OTLP exporter: rests after a failure, warns once, remembers the last outcome.

    ``make_inner`` builds the exporter at the first export, on the batch worker's thread: its
    imports (requests, protobuf; about 80 ms) stay off the start-up of the process.
    """

    def __init__(
        self,
        make_inner: Callable[[], SpanExporter],
        endpoint: str,
        *,
        warn: bool,
        rest_s: float = REST_S,
        clock: Callable[[], float] = time.monotonic,
        out: TextIO | None = None,
    ) -> None:
        self._make_inner = make_inner
        self._inner: SpanExporter | None = None
        self.endpoint = endpoint
        self.delivered: bool | None = None  # None: nothing exported yet
        self._warn = warn
        self._rest_s = rest_s
        self._clock = clock
        self._out = out
        self._resting_until: float | None = None
        self._warned = False
        self._lock = threading.Lock()  # the batch worker and a flush from another thread both export

    def export(self, spans: Sequence[ReadableSpan]) -> SpanExportResult:
        with self._lock:
            if self._resting_until is not None and self._clock() < self._resting_until:
                self.delivered = False
                return SpanExportResult.FAILURE  # dropped: the collector failed moments ago
            try:
                if self._inner is None:
                    self._inner = self._make_inner()
                result = self._inner.export(spans)
            except Exception:  # a foreign exporter's failure is a failed export, here as anywhere
                result = SpanExportResult.FAILURE
            self.delivered = result is SpanExportResult.SUCCESS
            if self.delivered:
                self._resting_until = None
                return result
            self._resting_until = self._clock() + self._rest_s
            if self._warn and not self._warned:
                self._warned = True
                print(
                    f"warning: no OTLP collector took the spans at {self.endpoint} (is one running?); "
                    "they are not sent there while it fails",
                    file=self._out or sys.stderr,  # looked up now: a live display may have redirected it
                    flush=True,
                )
            return result

    def shutdown(self) -> None:
        if self._inner is not None:
            self._inner.shutdown()

    def force_flush(self, timeout_millis: int = 30000) -> bool:
        return True if self._inner is None else self._inner.force_flush(timeout_millis)


def otlp_exporter(*, warn: bool) -> OtlpExport:
    """The SDK's OTLP/HTTP exporter (endpoint and headers from the standard ``OTEL_*`` variables), wrapped."""
    for name in _SDK_LOGGERS:
        logging.getLogger(name).setLevel(logging.CRITICAL)
    timeout_set = any(
        os.environ.get(name) for name in ("OTEL_EXPORTER_OTLP_TRACES_TIMEOUT", "OTEL_EXPORTER_OTLP_TIMEOUT")
    )

    def make_inner() -> SpanExporter:
        from opentelemetry.exporter.otlp.proto.http.trace_exporter import OTLPSpanExporter

        return OTLPSpanExporter(timeout=None if timeout_set else DEFAULT_TIMEOUT_S)

    return OtlpExport(make_inner, otlp_endpoint(), warn=warn)
