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
default here 250 ms). A source exports each span as soon as it ends (``eager``: a batch of one, still
off the event loop), so a source killed outright has already exported everything it finished.
"""

from __future__ import annotations

import os
import sys
from pathlib import Path

from opentelemetry import trace
from opentelemetry.sdk.resources import Resource
from opentelemetry.sdk.trace import TracerProvider
from opentelemetry.sdk.trace.export import BatchSpanProcessor, ConsoleSpanExporter, SpanExporter

from traces.attributes import RUN_ID, SERVICE_NAME, SERVICE_VERSION
from traces.client_status import ClientSpanStatus
from traces.files import file_exporter
from traces.redact import set_full_payloads

__all__ = ["VERSION", "configure_tracing", "ensure_tracing", "exporter_names", "tracer"]

VERSION = "0.1.0"
_INSTRUMENTATION = "research-coordinator"
_DEFAULT_DELAY_MS = 250
_KNOWN = ("file", "otlp", "console", "none")


def exporter_names(environ: dict[str, str] | None = None) -> list[str]:
    """The exporters ``OTEL_TRACES_EXPORTER`` asks for; an unknown name raises ``ValueError``."""
    env = os.environ if environ is None else environ
    names = [
        name.strip().lower() for name in env.get("OTEL_TRACES_EXPORTER", "file").split(",") if name.strip()
    ]
    unknown = [name for name in names if name not in _KNOWN]
    if unknown:
        raise ValueError(f"OTEL_TRACES_EXPORTER names {', '.join(unknown)}; choose among {', '.join(_KNOWN)}")
    return [name for name in names if name != "none"]


def _exporter(name: str, traces_dir: Path, service_name: str) -> SpanExporter:
    if name == "file":
        return file_exporter(traces_dir, service_name)
    if name == "otlp":
        from opentelemetry.exporter.otlp.proto.http.trace_exporter import OTLPSpanExporter

        return OTLPSpanExporter()  # endpoint, headers and timeout from the standard OTEL_* variables
    return ConsoleSpanExporter(service_name=service_name, out=sys.stderr)


def configure_tracing(
    service_name: str,
    *,
    traces_dir: Path,
    run_id: str | None = None,
    full_payloads: bool = False,
    exporters: list[str] | None = None,
    eager: bool = False,
) -> TracerProvider:
    """Install this process's tracer provider, once. Later calls return the installed one."""
    current = trace.get_tracer_provider()
    if isinstance(current, TracerProvider):
        return current
    set_full_payloads(full_payloads)
    attributes: dict[str, str] = {SERVICE_NAME: service_name, SERVICE_VERSION: VERSION}
    if run_id:
        attributes[RUN_ID] = run_id
    provider = TracerProvider(resource=Resource.create(attributes))
    delay = int(os.environ.get("OTEL_BSP_SCHEDULE_DELAY", _DEFAULT_DELAY_MS))
    for name in exporter_names() if exporters is None else exporters:
        batch = BatchSpanProcessor(
            _exporter(name, traces_dir, service_name),
            schedule_delay_millis=delay,
            max_export_batch_size=1 if eager else 512,  # one: the worker wakes for every finished span
        )
        provider.add_span_processor(ClientSpanStatus(batch))
    trace.set_tracer_provider(provider)
    return provider


def ensure_tracing(service_name: str) -> TracerProvider:
    """A provider with no exporter, when none was configured: trace ids stay real, nothing is written."""
    return configure_tracing(service_name, traces_dir=Path(), exporters=[])


def tracer() -> trace.Tracer:
    return trace.get_tracer(_INSTRUMENTATION, VERSION)
