"""Traces with the SDK's in-memory exporter: the span tree, one event per decision, status, redaction."""

from __future__ import annotations

import itertools
import json
import os
import random
import re
import subprocess
import sys
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import anyio
import pytest
from click.testing import Result
from opentelemetry.context import Context
from opentelemetry.sdk.resources import Resource
from opentelemetry.sdk.trace import ReadableSpan, TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter
from opentelemetry.sdk.trace.id_generator import RandomIdGenerator
from opentelemetry.trace import Link, SpanKind, StatusCode
from rich.console import Console
from typer.testing import CliRunner

from coordinator.cli import app
from coordinator.core import Config, Coordinator
from sources.settings import SourceSettings
from subagents.breaker import Breakers
from subagents.broker import CredentialBroker, Grant
from subagents.guard import LocalGuard
from subagents.sessions.connection import Connections
from subagents.subagent import Runtime, SubagentReport, Task, run_subagent
from tests.conftest import MODULES, PROJECT_ROOT, TEST_KEY, credential
from tests.fakes import FakeClock
from traces import attributes as names
from traces.files import file_exporter, load_traces, span_line
from traces.redact import set_full_payloads
from traces.setup import sampler
from traces.spans import command_span, end_command, trace_id_of
from traces.viewer import render_trace

pytestmark = pytest.mark.anyio

# In memory, the mcp Client dispatches directly unless asked for JSON-RPC framing; the framing is
# where the SDK opens its client span and carries the trace context in _meta, as over stdio and HTTP.
JSON_RPC = {"mode": "legacy"}
STORY = "Investigate jane.doe@example.com: recent orders, open tickets, and whether a £750 refund on ORD-10023 is allowed"


async def run_task(
    settings: SourceSettings, source: str, tool: str, arguments: dict[str, Any], **options: Any
) -> SubagentReport:
    servers = {name: module.create_server(settings) for name, module in MODULES.items()}
    clock = FakeClock()
    with anyio.fail_after(30):
        targets = {name: (lambda s=server: s) for name, server in servers.items()}
        async with Connections.opened(targets, JSON_RPC) as connections:
            runtime = Runtime(
                connections=connections, broker=CredentialBroker(TEST_KEY, grants=(Grant("billing:read", "refund research"),)),
                clock=clock, rng=random.Random(3), **options,
            )  # fmt: skip
            task = Task(
                f"{source}.{tool}", source, tool, arguments, purpose=options.pop("purpose", "refund research")
            )
            return await run_subagent(task, runtime, deadline=clock.now() + 30)


def named(spans: Sequence[ReadableSpan], name: str) -> list[ReadableSpan]:
    return [span for span in spans if span.name == name]


BRANCHES = [
    ("customers", "customer_lookup", {"identifier": "jane.doe@example.com"}, "ok", []),
    ("orders", "search_orders", {"customer_id": "CUST-00077"}, "empty", ["accept_empty"]),
    ("customers", "customer_lookup", {"identifier": "CUST-00042", "mode": "timeout"}, "escalated", ["retry", "retry", "retry", "give_up"]),
    ("customers", "customer_lookup", {"identifier": " Jane.Doe@Example.com "}, "ok", ["repair"]),
    ("billing", "refund_eligibility", {"order_id": "ORD-10023", "amount": 750}, "escalated", ["elevate", "escalate"]),
    ("billing", "issue_refund", {"order_id": "ORD-10023", "amount": 750, "idempotency_key": "trace-hook-01"}, "escalated", ["hook_blocked"]),
]  # fmt: skip


@pytest.mark.parametrize(("source", "tool", "arguments", "state", "actions"), BRANCHES)
async def test_each_branch_is_a_subagent_span_with_one_event_per_decision(
    settings: SourceSettings, spans: InMemorySpanExporter, source: str, tool: str, arguments: dict[str, Any],
    state: str, actions: list[str],
) -> None:  # fmt: skip
    report = await run_task(settings, source, tool, arguments)
    assert report.state == state and [d.action for d in report.decisions] == actions
    (span,) = named(spans.get_finished_spans(), f"subagent {source}")
    attributes = span.attributes or {}
    assert attributes[names.GEN_AI_OPERATION_NAME] == "invoke_agent"
    assert attributes[names.GEN_AI_AGENT_NAME] == f"{source} subagent"
    assert attributes[names.TASK_STATE] == state and attributes[names.TASK_ATTEMPTS] == report.attempts
    events = [event for event in span.events if event.name == names.RECOVERY_DECISION]
    assert len(events) == len(report.decisions)
    for event, decision in zip(events, report.decisions, strict=True):
        event_attributes = event.attributes or {}
        assert event_attributes[names.RECOVERY_ACTION] == decision.action
        assert event_attributes[names.RECOVERY_ATTEMPT] == decision.attempt
        assert event_attributes[names.RECOVERY_BACKOFF_MS] == decision.backoff_ms
        assert event_attributes.get(names.RECOVERY_CATEGORY) == (
            decision.category.value if decision.category else None
        )
        assert event_attributes[names.RECOVERY_RETRYABLE] is (decision.category == "transient")
        if decision.action != "accept_empty":
            assert event_attributes[names.ERROR_TYPE]
    if state == "escalated":
        assert span.status.status_code is StatusCode.ERROR
        assert attributes[names.ERROR_TYPE] == report.escalation.error_category.value  # type: ignore[union-attr]
    else:
        assert span.status.status_code is StatusCode.OK  # a recovered task is not a failed operation
    client_spans = [
        s
        for s in spans.get_finished_spans()
        if s.kind is SpanKind.CLIENT and s.name.startswith("MCP send tools/call")
    ]
    assert len(client_spans) == report.attempts  # one client span per attempt, the SDK's own
    assert all(s.parent is not None and s.parent.span_id == span.context.span_id for s in client_spans)


async def test_the_sdk_client_span_gets_its_status_on_is_error(
    settings: SourceSettings, spans: InMemorySpanExporter
) -> None:
    await run_task(settings, "customers", "customer_lookup", {"identifier": "CUST-00013"})
    (client,) = [s for s in spans.get_finished_spans() if s.name == "MCP send tools/call customer_lookup"]
    assert (
        client.status.status_code is StatusCode.ERROR
        and (client.attributes or {})[names.ERROR_TYPE] == "tool_error"
    )
    (server,) = named(spans.get_finished_spans(), "tools/call customer_lookup")
    assert (
        server.kind is SpanKind.SERVER
        and server.parent is not None
        and server.parent.span_id == client.context.span_id
    )


async def test_a_breaker_open_decision_is_recorded(
    settings: SourceSettings, spans: InMemorySpanExporter
) -> None:
    breakers = Breakers(failure_threshold=1, cooldown_s=60)
    await run_task(
        settings,
        "customers",
        "customer_lookup",
        {"identifier": "CUST-00042", "mode": "timeout"},
        guard=LocalGuard.of(breakers),
    )
    (span,) = named(spans.get_finished_spans(), "subagent customers")
    assert [(e.attributes or {})[names.RECOVERY_ACTION] for e in span.events] == ["breaker_open"]


async def story(settings: SourceSettings) -> Any:
    servers = {name: module.create_server(settings) for name, module in MODULES.items()}
    targets = {name: (lambda s=server: s) for name, server in servers.items()}
    with anyio.fail_after(60):
        async with Coordinator(
            Config(settings), targets=targets, clock=FakeClock(), client_options=JSON_RPC
        ) as coordinator:
            return await coordinator.research(STORY, seed=1)


async def test_the_span_tree_of_a_query(settings: SourceSettings, spans: InMemorySpanExporter) -> None:
    report = await story(settings)
    finished = spans.get_finished_spans()
    (root,) = named(finished, "research")
    assert format(root.context.trace_id, "032x") == report.trace_id
    assert all(format(span.context.trace_id, "032x") == report.trace_id for span in finished)
    assert (root.attributes or {})[names.STATUS] == "partial" and (root.attributes or {})[
        names.PLAN_SIZE
    ] == 5
    children = {
        span.name
        for span in finished
        if span.parent is not None and span.parent.span_id == root.context.span_id
    }
    ours = {"plan", "synthesize"} | {
        f"subagent {s}" for s in ("customers", "orders", "billing", "tickets", "kb")
    }
    assert ours <= children
    # The sessions open at the start of the query, inside it: their handshake and their tools listing
    # are its children too (in memory, the server's span of the handshake's notification joins the
    # caller's context); no subagent lists tools after its first call.
    session_start = {
        "MCP send initialize",
        "MCP send server/discover",
        "notifications/initialized",
        "MCP send tools/list",
    }
    assert children - ours <= session_start and "MCP send tools/list" in children
    (plan,) = named(finished, "plan")
    assert list((plan.attributes or {})[names.PLAN_TASKS]) == [task.id for task in report.tasks]
    (synthesize,) = named(finished, "synthesize")
    assert (synthesize.attributes or {})[names.GAPS] == len(report.gaps) == 1
    decisions = sum(len(task.decisions) for task in report.tasks)
    events = [event for span in finished for event in span.events if event.name == names.RECOVERY_DECISION]
    assert len(events) == decisions


def _all_values(spans: Sequence[ReadableSpan]) -> str:
    values = []
    for span in spans:
        values += [str(v) for v in (span.attributes or {}).values()]
        values += [str(v) for event in span.events for v in (event.attributes or {}).values()]
        values.append(str(span.status.description or ""))
    return "\n".join(values)


async def test_no_credential_and_no_email_in_any_attribute(
    settings: SourceSettings, spans: InMemorySpanExporter
) -> None:
    await story(settings)
    await run_task(settings, "billing", "list_invoices", {"customer_id": "CUST-00042"})
    text = _all_values(spans.get_finished_spans())
    assert "@example.com" not in text and "Jane Doe" not in text
    assert "eyJ" not in text and "PRIVATE KEY" not in text
    assert "[redacted email]" in text  # the query named an email: it was there, and it was removed


async def test_full_payloads_are_an_explicit_switch(
    settings: SourceSettings, spans: InMemorySpanExporter
) -> None:
    set_full_payloads(True)
    try:
        await run_task(settings, "customers", "customer_lookup", {"identifier": "jane.doe@example.com"})
    finally:
        set_full_payloads(False)
    (span,) = named(spans.get_finished_spans(), "subagent customers")
    assert json.loads(str((span.attributes or {})[names.ARGUMENTS])) == {"identifier": "jane.doe@example.com"}
    assert credential("billing:read", source="billing")["research-coordinator/credential"] not in _all_values(
        spans.get_finished_spans()
    )


async def test_files_hold_the_trace_and_the_viewer_shows_every_decision(
    settings: SourceSettings, spans: InMemorySpanExporter, tmp_path: Path
) -> None:
    report = await story(settings)
    exporter = file_exporter(tmp_path, "research-coordinator")
    exporter.export(spans.get_finished_spans())
    exporter.shutdown()
    traces = load_traces(tmp_path)
    assert set(traces) == {report.trace_id}
    console = Console(record=True, width=200)
    console.print(render_trace(report.trace_id, traces[report.trace_id]))
    shown = console.export_text()
    for task in report.tasks:
        for decision in task.decisions:
            assert f"◆ {decision.action} (attempt {decision.attempt}" in shown
    assert "subagent billing" in shown and "ERROR business" in shown and "synthesize" in shown


def _orphan_notification(traces_dir: Path) -> None:
    """What a source wrote before its provider dropped them: a notification's server span, a root of its own."""
    provider = TracerProvider(resource=Resource.create({names.SERVICE_NAME: "research-source-tickets"}))
    exporter = file_exporter(traces_dir, "research-source-tickets")
    provider.add_span_processor(SimpleSpanProcessor(exporter))
    method = "notifications/cancelled"
    provider.get_tracer("mcp-python-sdk").start_span(
        method, kind=SpanKind.SERVER, attributes={"mcp.method.name": method}, context=Context()
    ).end()
    provider.shutdown()


def _traces_cli(traces_dir: Path, *args: str) -> Result:
    return CliRunner().invoke(
        app, ["traces", *args], env={"RESEARCH_TRACES_DIR": str(traces_dir), "COLUMNS": "200"}
    )


async def test_traces_list_and_show_say_what_each_trace_was(
    settings: SourceSettings, spans: InMemorySpanExporter, tmp_path: Path
) -> None:
    query = await story(settings)
    with command_span("task", "customers.customer_lookup") as span:
        task = await run_task(settings, "customers", "customer_lookup", {"identifier": "CUST-00042"})
        end_command(span, status=task.state)
    task_trace = trace_id_of(span)
    exporter = file_exporter(tmp_path, "research-coordinator")
    exporter.export(spans.get_finished_spans())
    exporter.shutdown()
    _orphan_notification(tmp_path)  # the newest trace of all
    traces = load_traces(tmp_path)
    assert len(traces) == 3 and {query.trace_id, task_trace} < set(traces)
    (orphan,) = set(traces) - {query.trace_id, task_trace}

    listed = _traces_cli(tmp_path, "list")
    assert listed.exit_code == 0, listed.output
    rows = [line for line in listed.output.splitlines() if re.search(r"[0-9a-f]{32}", line)]
    assert [row.split("│")[1].strip() for row in rows] == [orphan, task_trace, query.trace_id]  # newest first
    (orphan_row, task_row, query_row) = rows
    assert "other" in orphan_row and "tickets notifications/cancelled" in orphan_row
    assert " task " in task_row and "customers.customer_lookup" in task_row and " ok " in task_row
    assert " query " in query_row and "partial" in query_row
    assert "[redacted email]" in query_row and "jane.doe" not in listed.output  # the query as recorded

    one = _traces_cli(tmp_path, "list", "--kind", "query", "--limit", "1")
    assert one.exit_code == 0, one.output
    assert query.trace_id in one.output and task_trace not in one.output and orphan not in one.output

    shown = _traces_cli(tmp_path, "show", "latest")  # the latest query, not the orphan after it
    assert shown.exit_code == 0, shown.output
    assert f"trace {query.trace_id}" in shown.output and "coordinator research " in shown.output
    assert "subagent billing" in shown.output

    shown_task = _traces_cli(tmp_path, "show", "latest", "--kind", "task")
    assert f"trace {task_trace}" in shown_task.output and "research task" in shown_task.output
    assert "tools/call customer_lookup" in shown_task.output  # the command's calls are in its trace

    assert orphan in _traces_cli(tmp_path, "show", "latest", "--kind", "other").output
    assert _traces_cli(tmp_path, "list", "--kind", "call").exit_code == 1  # none of that kind: said so
    refused = _traces_cli(tmp_path, "list", "--kind", "queries")
    assert refused.exit_code == 2 and "--kind must be one of" in refused.output


def test_the_sampler_drops_notifications_without_a_trace_context_only() -> None:
    exporter = InMemorySpanExporter()
    provider = TracerProvider(sampler=sampler())
    provider.add_span_processor(SimpleSpanProcessor(exporter))
    tracer = provider.get_tracer("mcp-python-sdk")
    cancelled = {"mcp.method.name": "notifications/cancelled"}
    tracer.start_span("notifications/cancelled", kind=SpanKind.SERVER, attributes=cancelled).end()
    with tracer.start_as_current_span("research"):
        tracer.start_span("notifications/cancelled", kind=SpanKind.SERVER, attributes=cancelled).end()
    call = {"mcp.method.name": "tools/call"}
    tracer.start_span("tools/call search_orders", kind=SpanKind.SERVER, attributes=call).end()
    finished = exporter.get_finished_spans()
    assert [(span.name, span.parent is None) for span in finished] == [
        ("notifications/cancelled", False),  # a notification that carries its trace context joins it
        ("research", True),
        ("tools/call search_orders", True),  # a request without one is still recorded
    ]


class _FixedTraceIds(RandomIdGenerator):
    """Trace ids chosen by the test (one per root span, in order); span ids random."""

    def __init__(self, trace_ids: list[str]) -> None:
        self._ids = iter(trace_ids)

    def generate_trace_id(self) -> int:
        return int(next(self._ids), 16)


# Two ids the same for their first 10 hex digits: 11 tell them apart (more than the 8 a list shows at
# the least), and every id is cut to 11 in a narrow terminal.
TWINS = ("cb7b121aaa0" + "1" * 21, "cb7b121aaa7" + "2" * 21)
LONER = "5e" + "3" * 30


def _queries_traced(traces_dir: Path, trace_ids: tuple[str, ...]) -> None:
    """One query's root span per id, written to the local files as a run writes them."""
    provider = TracerProvider(
        resource=Resource.create({names.SERVICE_NAME: "research-coordinator"}),
        id_generator=_FixedTraceIds(list(trace_ids)),
    )
    provider.add_span_processor(SimpleSpanProcessor(file_exporter(traces_dir, "research-coordinator")))
    for number, _ in enumerate(trace_ids):
        attributes = {
            names.KIND: "query",
            names.QUERY: f"orders of CUST-0004{number}",
            names.STATUS: "complete",
        }
        provider.get_tracer("test").start_span("research", attributes=attributes, context=Context()).end()
    provider.shutdown()


def _traces_at(columns: int, traces_dir: Path, *args: str) -> subprocess.CompletedProcess[str]:
    """`research traces ARGS...` as a user runs it, in a terminal ``columns`` wide."""
    environment = {**os.environ, "RESEARCH_TRACES_DIR": str(traces_dir), "COLUMNS": str(columns)}
    return subprocess.run(
        [sys.executable, "-c", "from coordinator.cli import app; app()", "traces", *args],
        env=environment, cwd=PROJECT_ROOT, capture_output=True, text=True, timeout=60,
    )  # fmt: skip


@pytest.mark.subprocess
@pytest.mark.parametrize("columns", [80, 120])
def test_traces_list_never_cuts_an_id_below_what_is_unique_and_show_takes_it(
    tmp_path: Path, columns: int
) -> None:
    _queries_traced(tmp_path, (*TWINS, LONER))
    listed = _traces_at(columns, tmp_path, "list")
    assert listed.returncode == 0, listed.stderr
    lines = listed.stdout.splitlines()
    assert all(len(line) <= columns for line in lines), listed.stdout  # fits: nothing wraps at the terminal
    shown = [row.split("│")[1].strip() for row in lines if re.match(r"│ [0-9a-f]", row)]
    assert sorted(shown) == sorted([TWINS[0][:11], TWINS[1][:11], LONER[:11]]), listed.stdout
    for prefix in shown:  # what the list shows is what `show` takes
        tree = _traces_at(columns, tmp_path, "show", prefix)
        assert tree.returncode == 0, tree.stderr
        (full,) = [each for each in (*TWINS, LONER) if each.startswith(prefix)]
        assert f"trace {full}" in tree.stdout and "coordinator research" in tree.stdout
    assert f"trace {LONER}" in _traces_at(columns, tmp_path, "show", "5E").stdout  # any prefix of its own


@pytest.mark.subprocess
def test_traces_show_refuses_an_ambiguous_prefix_in_one_line_naming_the_matches(tmp_path: Path) -> None:
    _queries_traced(tmp_path, (*TWINS, LONER))
    refused = _traces_at(80, tmp_path, "show", "cb7b121")
    assert refused.returncode == 2 and refused.stdout == ""
    (line,) = refused.stderr.strip().splitlines()
    assert line.startswith("error: 'cb7b121' begins 2 traces: ") and all(twin in line for twin in TWINS), line
    assert LONER not in line and "give more of the id" in line
    missing = _traces_at(80, tmp_path, "show", "cb7b121f")
    assert missing.returncode == 2 and missing.stderr.startswith("error: no trace 'cb7b121f'")


def test_a_span_line_in_a_file_is_the_object_the_sdk_makes_of_it() -> None:
    """The file exporter writes each span as one compact line built without ``to_json``; it must hold
    exactly what ``ReadableSpan.to_json`` holds, whatever the span carries."""
    collected = InMemorySpanExporter()
    provider = TracerProvider(resource=Resource.create({"service.name": "research-source-kb", "k": 3}))
    provider.add_span_processor(SimpleSpanProcessor(collected))
    tracer = provider.get_tracer("test")
    with tracer.start_as_current_span("research", kind=SpanKind.INTERNAL) as root:
        with tracer.start_as_current_span(
            "subagent kb",
            attributes={"text": 'é ✓ "quoted"', "count": 3, "ratio": 0.5, "flags": [True, False]},
        ) as child:
            child.add_event("recovery.decision", {"recovery.action": "retry", "attempt": 1})
            child.add_event("bare")
            child.set_status(StatusCode.ERROR, "the source is unavailable")
        with tracer.start_as_current_span(
            "linked", links=[Link(root.get_span_context(), {"why": "follows"})], kind=SpanKind.CLIENT
        ):
            pass
    spans = collected.get_finished_spans()
    assert len(spans) == 3
    for span in spans:
        line = span_line(span)
        assert line.endswith("\n") and "\n" not in line[:-1]
        assert json.loads(line) == json.loads(span.to_json())


@pytest.mark.parametrize("seed", range(3))
def test_a_span_line_writes_every_moment_as_the_sdk_does(seed: int) -> None:
    """The line writes a span's start and end (and its events') as ``to_json`` does, to the microsecond
    the SDK rounds to, for any moment: random ones, and fractions that round up into the next second."""
    rng = random.Random(seed)
    seconds = [rng.randrange(1, 4_000_000_000) for _ in range(40)]
    edges = (999_999_500, 999_999_499, 999_999_999, 500, 1_500, 2_500, 1)
    moments = [second * 10**9 + rng.randrange(10**9) for second in seconds]
    moments += [second * 10**9 + edge for second in seconds[:10] for edge in edges]
    collected = InMemorySpanExporter()
    provider = TracerProvider()
    provider.add_span_processor(SimpleSpanProcessor(collected))
    tracer = provider.get_tracer("test")
    for start, end in itertools.pairwise(moments):
        span = tracer.start_span("moment", start_time=start)
        span.add_event("between", timestamp=(start + end) // 2)
        span.end(end_time=end)
    for finished in collected.get_finished_spans():
        assert json.loads(span_line(finished)) == json.loads(finished.to_json()), finished.start_time
