"""End to end over OTLP: the real CLI, five real stdio sources, a real OTLP/HTTP receiver on 127.0.0.1.

All six processes export to the receiver; the test decodes what arrived and checks one trace id
across six services, parent links intact across the process boundary, one recovery.decision per
decision in the report, and no credential or raw email in any attribute. A cancelled call leaves no
trace of its own; `--otlp` with no collector is one warning line and no Jaeger link.
"""

from __future__ import annotations

import io
import json
import os
import socket
import subprocess
import sys
from collections.abc import Iterator

import pytest
from opentelemetry.exporter.otlp.proto.http.trace_exporter import OTLPSpanExporter
from opentelemetry.sdk.trace import ReadableSpan, TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor, SpanExportResult
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter

from sources.settings import SourceSettings
from tests.conftest import PROJECT_ROOT, TESTING
from tests.otlp_receiver import OtlpReceiver
from traces import attributes as names
from traces.otlp import DEFAULT_TIMEOUT_S, OtlpExport

pytestmark = pytest.mark.subprocess

STORY = "Investigate jane.doe@example.com: recent orders, open tickets, and whether a £750 refund on ORD-10023 is allowed"
SIX = {
    "research-coordinator",
    *(f"research-source-{s}" for s in ("customers", "orders", "billing", "tickets", "kb")),
}
SERVER, CLIENT = 2, 3  # OTLP span kinds
# The receiver answers from a thread of this test process; on a loaded machine an answer can take
# longer than the exporters' 0.5 s default, and a timed-out export makes that process rest (drop its
# spans) for 10 s, so a whole source went missing from the trace once. The product's fast failure is
# tested on its own below; here every export waits long enough to be answered.
PATIENT_EXPORT = {"OTEL_EXPORTER_OTLP_TIMEOUT": "10"}


@pytest.fixture
def receiver() -> Iterator[OtlpReceiver]:
    running = OtlpReceiver()
    yield running
    running.close()


def ask(
    settings: SourceSettings, receiver: OtlpReceiver, *args: str, **env: str
) -> subprocess.CompletedProcess[str]:
    environment = {
        **os.environ, **settings.child_environment(),
        "OTEL_TRACES_EXPORTER": "otlp", "OTEL_EXPORTER_OTLP_ENDPOINT": receiver.endpoint,
        **PATIENT_EXPORT, **env,
    }  # fmt: skip
    return subprocess.run(
        [sys.executable, "-c", "from coordinator.cli import app; app()", "ask", *args, "--json"],
        env=environment, cwd=PROJECT_ROOT, capture_output=True, text=True, timeout=180,
    )  # fmt: skip


def test_one_trace_across_six_services(settings: SourceSettings, receiver: OtlpReceiver) -> None:
    done = ask(settings, receiver, STORY, "--faults", "tickets:transient=0.5,seed=13", "--seed", "1")
    assert done.returncode == 3, done.stderr
    report = json.loads(done.stdout)
    trace_spans = [span for span in receiver.spans if span.trace_id == report["trace_id"]]
    assert {span.service for span in trace_spans} == SIX
    assert {span.trace_id for span in receiver.spans if span.name != "research"} >= {report["trace_id"]}

    by_id = {span.span_id: span for span in trace_spans}
    tool_servers = [
        span for span in trace_spans if span.kind == SERVER and span.name.startswith("tools/call")
    ]
    assert tool_servers, "every source's server span is in the trace"
    for server in tool_servers:
        parent = by_id[server.parent_span_id]  # the link crosses the process boundary intact
        assert parent.kind == CLIENT and parent.service == "research-coordinator"
        assert parent.name == f"MCP send {server.name}"
        subagent = by_id[parent.parent_span_id]
        assert subagent.name == f"subagent {server.service.removeprefix('research-source-')}"

    decisions = [
        (name, attrs)
        for span in trace_spans
        for name, attrs in span.events
        if name == names.RECOVERY_DECISION
    ]
    assert len(decisions) == sum(len(task["decisions"]) for task in report["tasks"])
    assert {attrs[names.RECOVERY_ACTION] for _, attrs in decisions} >= {"retry", "elevate", "escalate"}

    failed_clients = [span for span in trace_spans if span.kind == CLIENT and span.status_code == 2]
    assert {span.attributes.get(names.ERROR_TYPE) for span in failed_clients} == {"tool_error"}

    everything = json.dumps([[s.attributes, s.events, s.resource] for s in receiver.spans], default=str)
    assert "@example.com" not in everything and "Jane Doe" not in everything
    assert "eyJ" not in everything  # no credential, ever
    run_ids = {span.resource.get(names.RUN_ID) for span in trace_spans}
    assert len(run_ids) == 1 and None not in run_ids  # one run, named in all six services


def test_a_source_killed_mid_query_still_leaves_a_complete_trace(
    settings: SourceSettings, receiver: OtlpReceiver
) -> None:
    done = ask(
        settings,
        receiver,
        "Orders of CUST-00042?",
        "--faults",
        "orders:crash=1",
        "--deadline",
        "20",
        **TESTING,  # orders spends every retry: back-offs of 0 s
    )
    assert done.returncode == 3, done.stderr
    report = json.loads(done.stdout)
    (gap,) = report["gaps"]
    assert (
        gap["source"] == "orders"
        and gap["errorCategory"] == "transient"
        and gap["next_step"] == "retry later"
    )
    trace_spans = [span for span in receiver.spans if span.trace_id == report["trace_id"]]
    names_seen = {span.name for span in trace_spans}
    assert {"research", "plan", "subagent customers", "subagent orders", "synthesize"} <= names_seen
    (subagent,) = [span for span in trace_spans if span.name == "subagent orders"]
    actions = [
        attrs[names.RECOVERY_ACTION] for name, attrs in subagent.events if name == names.RECOVERY_DECISION
    ]
    assert actions == ["retry", "retry", "retry", "give_up"]
    lost = [
        span
        for span in trace_spans
        if span.kind == CLIENT and span.name == "MCP send tools/call search_orders"
    ]
    assert len(lost) == 4 and all(
        span.attributes.get(names.ERROR_TYPE) == "connection_closed" for span in lost
    )
    assert "research-source-customers" in {span.service for span in trace_spans}


def test_a_cancelled_call_leaves_no_orphan_trace(settings: SourceSettings, receiver: OtlpReceiver) -> None:
    # orders hangs: its call times out (and is retried) or the query's deadline cuts it; either way the
    # mcp SDK sends notifications/cancelled, which carries no trace context to the source.
    done = ask(settings, receiver, "Orders of CUST-00042?", "--faults", "orders:hang=1", "--deadline", "10")
    assert done.returncode == 3, done.stderr
    report = json.loads(done.stdout)
    assert {task["source"]: task["state"] for task in report["tasks"]}["orders"] == "deadline"
    by_id = {span.span_id: span for span in receiver.spans}
    cut = [
        span
        for span in receiver.spans
        if span.service == "research-source-orders" and span.name == "tools/call search_orders"
    ]
    assert cut, "the orders source exported the server span of the call that was cut"
    assert all(by_id[span.parent_span_id].service == "research-coordinator" for span in cut)
    orphans = [
        span for span in receiver.spans if span.name.startswith("notifications/") and not span.parent_span_id
    ]
    assert orphans == []
    assert {span.trace_id for span in receiver.spans} == {report["trace_id"]}  # one trace, nothing else


def closed_port() -> int:
    """A loopback port nothing listens on: bound, then released."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def ask_with_otlp_flag(settings: SourceSettings, endpoint: str) -> subprocess.CompletedProcess[str]:
    """`research ask --otlp` as a user types it: the file exporter by default, OTLP added by the flag."""
    environment = {
        **os.environ, **settings.child_environment(), "OTEL_EXPORTER_OTLP_ENDPOINT": endpoint, "COLUMNS": "200",
        **PATIENT_EXPORT,
    }  # fmt: skip
    environment.pop("OTEL_TRACES_EXPORTER", None)
    return subprocess.run(
        [sys.executable, "-c", "from coordinator.cli import app; app()", "ask", "Orders of CUST-00042?", "--otlp"],
        env=environment, cwd=PROJECT_ROOT, capture_output=True, text=True, timeout=180,
    )  # fmt: skip


def test_otlp_with_no_collector_is_one_warning_and_no_jaeger_link(settings: SourceSettings) -> None:
    endpoint = f"http://127.0.0.1:{closed_port()}"
    done = ask_with_otlp_flag(settings, endpoint)
    assert done.returncode == 0, done.stderr
    warnings = [line for line in done.stderr.splitlines() if "warning" in line.lower()]
    assert len(warnings) == 1, done.stderr  # six processes, one line: the coordinator's
    assert warnings[0].startswith("warning: no OTLP collector") and endpoint in warnings[0]
    assert "Traceback" not in done.stderr and "Transient error" not in done.stderr
    assert "Jaeger:" not in done.stdout and "research traces show" in done.stdout  # the files have it


def test_otlp_with_a_collector_prints_the_jaeger_link(
    settings: SourceSettings, receiver: OtlpReceiver
) -> None:
    done = ask_with_otlp_flag(settings, receiver.endpoint)
    assert done.returncode == 0, done.stderr
    assert "warning" not in done.stderr.lower()
    (link,) = [line for line in done.stdout.splitlines() if line.startswith("Jaeger: ")]
    trace_id = link.rsplit("/", 1)[1]
    assert "research" in {span.name for span in receiver.spans if span.trace_id == trace_id}


def _spans(count: int) -> list[ReadableSpan]:
    finished = InMemorySpanExporter()
    provider = TracerProvider()
    provider.add_span_processor(SimpleSpanProcessor(finished))
    for number in range(count):
        provider.get_tracer("test").start_span(f"span {number}").end()
    return list(finished.get_finished_spans())


def test_otlp_export_rests_after_a_failure_warns_once_and_remembers_the_outcome(
    receiver: OtlpReceiver,
) -> None:
    now = [0.0]
    out = io.StringIO()
    endpoint = f"{receiver.endpoint}/v1/traces"
    export = OtlpExport(
        lambda: OTLPSpanExporter(endpoint=endpoint, timeout=5),
        endpoint,
        warn=True,
        rest_s=10,
        clock=lambda: now[0],
        out=out,
    )
    assert export.delivered is None
    receiver.refuse = True
    assert export.export(_spans(2)) is SpanExportResult.FAILURE and export.delivered is False
    assert receiver.requests == 1 and out.getvalue().count("\n") == 1 and endpoint in out.getvalue()
    now[0] = 9.0
    assert export.export(_spans(1)) is SpanExportResult.FAILURE  # resting: dropped, not sent
    assert receiver.requests == 1
    now[0] = 10.5
    receiver.refuse = False
    assert export.export(_spans(3)) is SpanExportResult.SUCCESS and export.delivered is True
    assert receiver.requests == 2 and len(receiver.spans) == 3
    receiver.refuse = True
    now[0] = 11.0
    assert export.export(_spans(1)) is SpanExportResult.FAILURE and export.delivered is False
    assert out.getvalue().count("\n") == 1  # one warning per process, however often it fails
    export.shutdown()


def test_a_quiet_otlp_export_says_nothing() -> None:
    out = io.StringIO()
    endpoint = f"http://127.0.0.1:{closed_port()}/v1/traces"
    # The exporter's timeout as the CLI sets it: nothing listens, so each attempt is refused at once,
    # and the timeout only bounds the exporter's back-off between attempts (about 1 s, then 2 s).
    exporter = lambda: OTLPSpanExporter(endpoint=endpoint, timeout=DEFAULT_TIMEOUT_S)  # noqa: E731
    export = OtlpExport(exporter, endpoint, warn=False, out=out)
    assert export.export(_spans(1)) is SpanExportResult.FAILURE and export.delivered is False
    assert out.getvalue() == ""
    export.shutdown()
