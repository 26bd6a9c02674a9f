"""OpenTelemetry for a process, configured in one place.

``configure_tracing`` installs the SDK's tracer provider with the resource (``service.name``,
``service.version``, the run's id) and the exporters chosen by ``OTEL_TRACES_EXPORTER``, a comma
list of:

| value     | where spans go                                                                 |
|-----------|--------------------------------------------------------------------------------|
| `file`    | `<traces dir>/<service>-<pid>.jsonl`, read by `research traces` (the default)   |
| `otlp`    | OTLP over HTTP, to `OTEL_EXPORTER_OTLP_ENDPOINT` (Jaeger: http://localhost:4318) |
| `console` | stderr (never stdout: a stdio source's stdout is its protocol)                  |
| `none`    | nowhere                                                                         |

Spans are batched on a background thread and flushed on exit (batch delay `OTEL_BSP_SCHEDULE_DELAY`,
default here 250 ms). A source (``eager``) writes each span to its file as the span ends, before the
answer it belongs to is sent, so a source killed outright has already written everything it finished;
its OTLP spans go in batches of one, off the event loop.

Why a source writes its file synchronously, where the coordinator batches: a source ends one span
per call, and one compact line (``traces.files``) costs it about 0.07 ms of CPU per call, the span's
creation included. Handing each span to the batch processor's thread instead cost 0.27 ms of CPU per
call (waking the thread, its queue and locks) and, for calls that come back to back, as much again
in wall time, the two threads taking turns with the interpreter lock; holding spans back for a
millisecond to let the answer go first cost as much (a timer per call). Measured on a source answering
calls back to back (`benchmarks/source_cost.py`). The write is an append of one line to a local file.

OTLP fails fast and quietly when no collector is listening (see ``traces.otlp``): one warning line,
from the process that owns the terminal, and ``otlp_delivered()`` says whether the collector took
the spans. Server spans of MCP notifications that arrive without a trace context are not recorded
(see ``NoOrphanNotifications``): every trace is a query, a task or a call.
"""

from __future__ import annotations

import os
import sys
import uuid
from collections.abc import Sequence
from pathlib import Path

from opentelemetry import trace
from opentelemetry.context import Context
from opentelemetry.sdk.resources import Resource
from opentelemetry.sdk.trace import SpanProcessor, TracerProvider
from opentelemetry.sdk.trace.export import (
    BatchSpanProcessor,
    ConsoleSpanExporter,
    SimpleSpanProcessor,
    SpanExporter,
)
from opentelemetry.sdk.trace.sampling import ALWAYS_ON, Decision, ParentBased, Sampler, SamplingResult
from opentelemetry.trace import Link, SpanKind
from opentelemetry.util.types import Attributes

from traces.attributes import RUN_ID, SERVICE_NAME, SERVICE_VERSION
from traces.client_status import ClientSpanStatus
from traces.files import LinesAsSpansEnd, file_exporter
from traces.otlp import OtlpExport, otlp_exporter
from traces.redact import set_full_payloads

__all__ = [
    "configure_tracing",
    "ensure_tracing",
    "exporter_names",
    "flush_spans",
    "otlp_delivered",
    "sampler",
    "start_run",
    "tracer",
]

VERSION = "0.1.0"
_INSTRUMENTATION = "research-coordinator"
_DEFAULT_DELAY_MS = 250
_KNOWN = ("file", "otlp", "console", "none")


def exporter_names() -> list[str]:
    """The exporters ``OTEL_TRACES_EXPORTER`` asks for; an unknown name raises ``ValueError``."""
    asked = os.environ.get("OTEL_TRACES_EXPORTER", "file")
    names = [name.strip().lower() for name in asked.split(",") if name.strip()]
    unknown = [name for name in names if name not in _KNOWN]
    if unknown:
        raise ValueError(f"OTEL_TRACES_EXPORTER names {', '.join(unknown)}; choose among {', '.join(_KNOWN)}")
    return [name for name in names if name != "none"]


_otlp: OtlpExport | None = None  # this process's OTLP exporter, when it has one


def _exporter(name: str, traces_dir: Path, service_name: str, *, otlp_warning: bool) -> SpanExporter:
    global _otlp
    if name == "file":
        return file_exporter(traces_dir, service_name)
    if name == "otlp":
        _otlp = otlp_exporter(warn=otlp_warning)  # endpoint and headers from the standard OTEL_* variables
        return _otlp
    return ConsoleSpanExporter(service_name=service_name, out=sys.stderr)


def sampler() -> Sampler:
    """Every span, but the server spans of notifications that arrive with no trace context."""
    return ParentBased(root=NoOrphanNotifications())


def otlp_delivered() -> bool | None:
    """Whether the OTLP collector took this process's latest spans; None when OTLP is not configured.

    Flush first (``force_flush``): then the latest spans include the command's root span.
    """
    return None if _otlp is None else _otlp.delivered is True


class NoOrphanNotifications(Sampler):
    """Drops the server span of an MCP notification that arrives without a trace context.

    The mcp SDK's server middleware opens a SERVER span for every inbound message, notifications
    included, parented from the ``traceparent`` in the message's ``_meta``. Its client injects that
    only into requests: ``notifications/cancelled`` (sent by the SDK itself when a call times out or
    its caller is cancelled, e.g. by a query's deadline) and ``notifications/initialized`` carry none,
    so each became a one-span trace of its own, listed as the latest trace. Propagating the context
    is not possible from here: the SDK writes those notifications itself with fixed params and has no
    outbound hook. Nor is re-parenting: a span's parent is fixed when it starts. And nothing is lost:
    the cancellation is already in the query's trace, on the SDK's client span of the abandoned call
    (its exception) and on the subagent's span (its decision and state).

    Used as the root sampler under ``ParentBased``: a notification that does carry a trace context
    (a future SDK, another client) still joins its trace; every other root span is recorded.
    """

    def should_sample(
        self,
        parent_context: Context | None,
        trace_id: int,
        name: str,
        kind: SpanKind | None = None,
        attributes: Attributes = None,
        links: Sequence[Link] | None = None,
        trace_state: trace.TraceState | None = None,
    ) -> SamplingResult:
        method = str((attributes or {}).get("mcp.method.name", ""))
        if kind is SpanKind.SERVER and method.startswith("notifications/"):
            return SamplingResult(Decision.DROP)
        return ALWAYS_ON.should_sample(parent_context, trace_id, name, kind, attributes, links, trace_state)

    def get_description(self) -> str:
        return "NoOrphanNotifications"


def _processor(
    name: str, traces_dir: Path, service_name: str, *, eager: bool, otlp_warning: bool
) -> SpanProcessor:
    """The processor of one exporter: written as each span ends (``eager``, a source's), or batched."""
    if eager and name == "file":  # a line to a local file
        return LinesAsSpansEnd(file_exporter(traces_dir, service_name))
    exporter = _exporter(name, traces_dir, service_name, otlp_warning=otlp_warning)
    if eager and name != "otlp":  # stderr
        return SimpleSpanProcessor(exporter)
    return BatchSpanProcessor(
        exporter,
        schedule_delay_millis=int(os.environ.get("OTEL_BSP_SCHEDULE_DELAY", _DEFAULT_DELAY_MS)),
        max_export_batch_size=1 if eager else 512,  # one: the worker wakes for every finished span
    )


def configure_tracing(
    service_name: str,
    *,
    traces_dir: Path,
    run_id: str | None = None,
    full_payloads: bool = False,
    exporters: list[str] | None = None,
    eager: bool = False,
) -> TracerProvider:
    """Install this process's tracer provider, once. Later calls return the installed one.

    The process warns (once) when the OTLP collector does not take its spans, unless it was started
    for a coordinator's run (its ``run_id`` came from ``RESEARCH_RUN_ID``, as a spawned source's
    does): that coordinator shares its terminal and warns for the run.
    """
    current = trace.get_tracer_provider()
    if isinstance(current, TracerProvider):
        return current
    set_full_payloads(full_payloads)
    attributes: dict[str, str] = {SERVICE_NAME: service_name, SERVICE_VERSION: VERSION}
    if run_id:
        attributes[RUN_ID] = run_id
    otlp_warning = not (run_id and os.environ.get("RESEARCH_RUN_ID") == run_id)
    provider = TracerProvider(resource=Resource.create(attributes), sampler=sampler())
    for name in exporter_names() if exporters is None else exporters:
        processor = _processor(name, traces_dir, service_name, eager=eager, otlp_warning=otlp_warning)
        # A source (eager) serves calls and makes none: no client span of its own waits for an outcome.
        provider.add_span_processor(processor if eager else ClientSpanStatus(processor))
    trace.set_tracer_provider(provider)
    return provider


def start_run(
    service_name: str, traces_dir: Path, *, full_payloads: bool = False, exporters: list[str] | None = None
) -> str:
    """Configure the tracing of a command that starts a run; returns the run's id, for its sources.

    ``exporters``: the command's choice (`research ask --otlp` adds OTLP); by default the ones
    ``OTEL_TRACES_EXPORTER`` names, and an unknown name there raises ``ValueError``.
    """
    exporters = exporter_names() if exporters is None else exporters
    run_id = uuid.uuid4().hex[:12]
    configure_tracing(
        service_name, traces_dir=traces_dir, run_id=run_id, full_payloads=full_payloads, exporters=exporters
    )
    return run_id


def ensure_tracing(service_name: str) -> TracerProvider:
    """A provider with no exporter, when none was configured: trace ids stay real, nothing is written."""
    return configure_tracing(service_name, traces_dir=Path(), exporters=[])


def flush_spans(timeout_ms: int) -> None:
    """Export what this process's provider still holds, within ``timeout_ms`` (a process about to end)."""
    flush = getattr(trace.get_tracer_provider(), "force_flush", None)
    if flush is not None:
        flush(timeout_ms)


def tracer() -> trace.Tracer:
    return trace.get_tracer(_INSTRUMENTATION, VERSION)
