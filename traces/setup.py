"""OpenTelemetry setup in one place: one tracer provider per process.

The coordinator installs the SDK's provider before anything runs, so every query has a real trace
id (never all zeros). Exporters (files, OTLP, console) and the full span tree build on this.
"""

from __future__ import annotations

from opentelemetry import trace
from opentelemetry.sdk.resources import Resource
from opentelemetry.sdk.trace import TracerProvider

__all__ = ["SERVICE_VERSION", "install_tracing", "tracer"]

SERVICE_VERSION = "0.1.0"
_INSTRUMENTATION = "research-coordinator"


def install_tracing(service_name: str) -> TracerProvider:
    """Install this process's tracer provider once; later calls return the one installed."""
    current = trace.get_tracer_provider()
    if isinstance(current, TracerProvider):
        return current
    provider = TracerProvider(
        resource=Resource.create({"service.name": service_name, "service.version": SERVICE_VERSION})
    )
    trace.set_tracer_provider(provider)
    return provider


def tracer() -> trace.Tracer:
    return trace.get_tracer(_INSTRUMENTATION, SERVICE_VERSION)
