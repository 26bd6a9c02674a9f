"""End to end over OTLP: the real CLI, five real stdio sources, a real OTLP/HTTP receiver on 127.0.0.1.

All six processes export to the receiver; the test decodes what arrived and checks one trace id
across six services, parent links intact across the process boundary, one recovery.decision per
decision in the report, and no credential or raw email in any attribute.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from collections.abc import Iterator

import pytest

from sources.settings import SourceSettings
from tests.conftest import PROJECT_ROOT
from tests.otlp_receiver import OtlpReceiver
from traces import attributes as names

pytestmark = pytest.mark.subprocess

STORY = "Investigate jane.doe@example.com: recent orders, open tickets, and whether a £750 refund on ORD-10023 is allowed"
SIX = {
    "research-coordinator",
    *(f"research-source-{s}" for s in ("customers", "orders", "billing", "tickets", "kb")),
}
SERVER, CLIENT = 2, 3  # OTLP span kinds


@pytest.fixture
def receiver() -> Iterator[OtlpReceiver]:
    running = OtlpReceiver()
    yield running
    running.close()


def ask(settings: SourceSettings, receiver: OtlpReceiver, *args: str) -> subprocess.CompletedProcess[str]:
    environment = {
        **os.environ, **settings.child_environment(),
        "OTEL_TRACES_EXPORTER": "otlp", "OTEL_EXPORTER_OTLP_ENDPOINT": receiver.endpoint,
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
        "--seed",
        "1",
        "--deadline",
        "20",
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
