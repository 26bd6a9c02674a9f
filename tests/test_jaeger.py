"""Recovery traces in a real Jaeger: the CLI and five stdio sources export over OTLP to the Jaeger v2
binary `make jaeger` builds, and the test reads back what Jaeger stored, through its query API.

What docs/guides/traces.md promises of Jaeger, checked against Jaeger's own JSON: one trace whose
processes are the six services, every span's parent in the trace, each subagent's recovery decisions as its span
logs in the order they were taken with their attributes, the escalated task and the failed attempts
marked as errors, and the MCP and GenAI attribute names of the semantic conventions.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import urllib.request
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import anyio
import pytest
from mcp import Client, StdioServerParameters

from sources.settings import SourceSettings
from tests.conftest import PROJECT_ROOT, TESTING, private_settings
from tests.fake_messages_api import Conversations, FakeMessagesApi, tool_use
from tests.jaeger import Jaeger, running_jaeger
from tests.test_llm import GOOD_PLAN
from traces import attributes as names

pytestmark = pytest.mark.subprocess

STORY = "Investigate jane.doe@example.com: recent orders, open tickets, and whether a £750 refund on ORD-10023 is allowed"
SIX = {
    "research-coordinator",
    *(f"research-source-{s}" for s in ("customers", "orders", "billing", "tickets", "kb")),
}


@pytest.fixture(scope="module")
def jaeger() -> Iterator[Jaeger]:
    with running_jaeger() as running:
        yield running


def ask(
    settings: SourceSettings,
    jaeger: Jaeger,
    *args: str,
    environment: dict[str, str] | None = None,
    human: bool = False,
) -> subprocess.CompletedProcess[str]:
    """`research ask ARGS --json` (``human``: without --json) exporting to ``jaeger`` over OTLP."""
    environment = {
        **os.environ, **settings.child_environment(),
        "OTEL_TRACES_EXPORTER": "otlp", "OTEL_EXPORTER_OTLP_ENDPOINT": jaeger.otlp,
        "OTEL_EXPORTER_OTLP_TIMEOUT": "10",  # a loaded machine: every export waits to be answered
        **(environment or {}),
    }  # fmt: skip
    return subprocess.run(
        [sys.executable, "-c", "from coordinator.cli import app; app()", "ask", *args, *([] if human else ["--json"])],
        env=environment, cwd=PROJECT_ROOT, capture_output=True, text=True, timeout=180,
    )  # fmt: skip


def tags(item: dict[str, Any]) -> dict[str, Any]:
    return {tag["key"]: tag["value"] for tag in item.get("tags", [])}


def test_the_story_is_one_trace_of_six_services_with_every_decision_logged(
    settings: SourceSettings, jaeger: Jaeger
) -> None:
    done = ask(settings, jaeger, STORY, "--faults", "tickets:transient=0.5,seed=13", "--seed", "1")
    assert done.returncode == 3, done.stderr  # partial by design: the £750 refund is escalated
    report = json.loads(done.stdout)
    stored = jaeger.trace(report["trace_id"], services=len(SIX))
    service_of = {key: process["serviceName"] for key, process in stored["processes"].items()}
    assert set(service_of.values()) == SIX
    assert jaeger.services() >= SIX

    spans = {span["spanID"]: span for span in stored["spans"]}
    roots = [span for span in spans.values() if not span.get("references")]
    assert [span["operationName"] for span in roots] == ["research"]
    for span in spans.values():  # no orphans: every parent is in the trace, across the processes
        for reference in span.get("references", []):
            assert reference["refType"] == "CHILD_OF" and reference["spanID"] in spans, span["operationName"]

    servers = [span for span in spans.values() if tags(span).get("span.kind") == "server"]
    tool_servers = [span for span in servers if span["operationName"].startswith("tools/call ")]
    assert {service_of[span["processID"]] for span in tool_servers} == SIX - {"research-coordinator"}
    for server in tool_servers:
        attributes = tags(server)
        assert attributes["mcp.method.name"] == "tools/call"
        assert attributes["gen_ai.tool.name"] == server["operationName"].removeprefix("tools/call ")
        assert attributes["gen_ai.operation.name"] == "execute_tool"
        assert attributes["jsonrpc.request.id"] and attributes["mcp.protocol.version"]
        (parent,) = [spans[reference["spanID"]] for reference in server["references"]]
        assert parent["operationName"] == f"MCP send {server['operationName']}"
        assert service_of[parent["processID"]] == "research-coordinator"
        assert tags(parent)["span.kind"] == "client" and tags(parent)["mcp.method.name"] == "tools/call"

    subagents = {
        span["operationName"].removeprefix("subagent "): span
        for span in spans.values()
        if span["operationName"].startswith("subagent ")
    }
    for task in report["tasks"]:
        span = subagents[task["source"]]
        logs = sorted(span.get("logs", []), key=lambda log: log["timestamp"])
        decisions = [
            fields
            for log in logs
            if (fields := tags({"tags": log["fields"]})).get("event") == names.RECOVERY_DECISION
        ]
        assert [fields[names.RECOVERY_ACTION] for fields in decisions] == [
            decision["action"] for decision in task["decisions"]
        ], task["id"]
        for fields, decision in zip(decisions, task["decisions"], strict=True):
            assert fields[names.RECOVERY_CATEGORY] == decision["category"]
            assert fields[names.RECOVERY_ATTEMPT] == decision["attempt"]
        escalated = task["state"] == "escalated"
        assert (tags(span).get("error") is True) is escalated, task["id"]
    assert {"retry", "elevate", "escalate"} <= {
        decision["action"] for task in report["tasks"] for decision in task["decisions"]
    }

    failed_attempts = [
        span
        for span in spans.values()
        if span["operationName"].startswith("MCP send tools/call") and tags(span).get("error") is True
    ]
    assert failed_attempts, "the transient fault's failed attempt is in the trace"
    assert {tags(span).get(names.ERROR_TYPE) for span in failed_attempts} == {"tool_error"}


def whole(stored: dict[str, Any]) -> dict[str, dict[str, Any]]:
    """The trace's spans by id, once checked whole: one root, ``research``, and every parent in it."""
    spans = {span["spanID"]: span for span in stored["spans"]}
    roots = [span["operationName"] for span in spans.values() if not span.get("references")]
    assert roots == ["research"], roots
    orphans = [
        span["operationName"]
        for span in spans.values()
        for reference in span.get("references", [])
        if reference["spanID"] not in spans
    ]
    assert not orphans, orphans
    return spans


def test_a_source_killed_mid_query_leaves_a_whole_trace(settings: SourceSettings, jaeger: Jaeger) -> None:
    done = ask(
        settings, jaeger, "Orders of CUST-00042?", "--faults", "orders:crash=1", "--deadline", "20",
        environment=TESTING,
    )  # fmt: skip
    assert done.returncode == 3, done.stderr
    report = json.loads(done.stdout)
    spans = whole(jaeger.trace(report["trace_id"], services=2))
    lost = [span for span in spans.values() if span["operationName"] == "MCP send tools/call search_orders"]
    assert len(lost) == 4 and all(tags(span)[names.ERROR_TYPE] == "connection_closed" for span in lost)
    assert all(tags(span).get("error") is True for span in lost)


def test_a_source_hung_to_the_deadline_leaves_a_whole_trace(settings: SourceSettings, jaeger: Jaeger) -> None:
    # The tickets task waits for the customer's lookup (its gate), and the deadline counts from the
    # command's start: enough for the lookup on a loaded machine, so the hang, not the start, meets it.
    done = ask(
        settings, jaeger, "Open tickets of CUST-00042?", "--faults", "tickets:hang=1", "--deadline", "8"
    )
    assert done.returncode == 3, done.stderr
    report = json.loads(done.stdout)
    spans = whole(jaeger.trace(report["trace_id"], services=2))
    (tickets,) = [span for span in spans.values() if span["operationName"] == "subagent tickets"]
    assert tags(tickets).get("error") is True
    actions = [
        fields[names.RECOVERY_ACTION]
        for log in sorted(tickets.get("logs", []), key=lambda log: log["timestamp"])
        if (fields := tags({"tags": log["fields"]})).get("event") == names.RECOVERY_DECISION
    ]
    assert actions[-1] == "give_up", actions


def test_a_batch_question_is_a_whole_trace(settings: SourceSettings, jaeger: Jaeger, tmp_path: Path) -> None:
    own = private_settings(settings, tmp_path / "data")
    questions = tmp_path / "questions.jsonl"
    questions.write_text(json.dumps({"id": "story", "query": STORY}) + "\n", encoding="utf-8")
    environment = {
        **os.environ, **own.child_environment(), "COLUMNS": "200",
        "OTEL_TRACES_EXPORTER": "file,otlp", "OTEL_EXPORTER_OTLP_ENDPOINT": jaeger.otlp,
        "OTEL_EXPORTER_OTLP_TIMEOUT": "10",
    }  # fmt: skip
    done = subprocess.run(
        [sys.executable, "-c", "from coordinator.cli import app; app()", "batch", str(questions),
         "--out", str(tmp_path / "out"), "--engine", "local"],
        env=environment, cwd=PROJECT_ROOT, capture_output=True, text=True, timeout=240,
    )  # fmt: skip
    assert done.returncode == 3, done.stderr  # the £750 refund: partial by design
    (report,) = [json.loads(path.read_text()) for path in (tmp_path / "out" / "reports").glob("*.json")]
    spans = whole(jaeger.trace(report["trace_id"], services=len(SIX)))
    assert {span["operationName"] for span in spans.values()} >= {"research", "plan", "synthesize"}


def test_claude_mode_puts_the_anthropic_spans_under_each_subagent(
    settings: SourceSettings, jaeger: Jaeger
) -> None:
    """Claude mode against the scripted Messages API on 127.0.0.1: each subagent's span holds the
    anthropic SDK's tool runner, its model turns and its MCP tool uses, the attempt spans under those."""
    api = FakeMessagesApi(
        Conversations(
            planner=[tool_use(GOOD_PLAN)],
            writer=[tool_use({"claims": [{"text": "Jane Doe is a gold-tier customer.", "citations": []}]})],
        )
    )
    try:
        done = ask(
            settings, jaeger, STORY, "--llm", "claude", "--seed", "1",
            environment={"ANTHROPIC_API_KEY": "test-key", "ANTHROPIC_BASE_URL": api.base_url},
        )  # fmt: skip
    finally:
        api.close()
    assert done.returncode == 3, done.stderr
    report = json.loads(done.stdout)
    assert report["planning"]["planner"] == "claude"
    spans = whole(jaeger.trace(report["trace_id"], services=4))  # the coordinator and three sources

    def ancestors(span: dict[str, Any]) -> list[str]:
        found = []
        while span.get("references"):
            span = spans[span["references"][0]["spanID"]]
            found.append(span["operationName"])
        return found

    runners = [span for span in spans.values() if span["operationName"] == "anthropic.messages.tool_runner"]
    assert sorted(ancestors(span)[0] for span in runners) == sorted(
        f"subagent {task['source']}" for task in report["tasks"]
    )
    turns = [span for span in spans.values() if span["operationName"] == "anthropic.messages.create"]
    in_loops = [span for span in turns if "anthropic.messages.tool_runner" in ancestors(span)]
    assert {ancestors(span)[1] for span in in_loops} == {
        ancestors(span)[0] for span in runners
    }  # each loop's turns
    others = [ancestors(span)[0] for span in turns if span not in in_loops]
    assert set(others) <= {"plan", "synthesize"}, others  # the planner's and the writer's model calls
    attempts = [span for span in spans.values() if span["operationName"].startswith("MCP send tools/call")]
    for span in attempts:  # each attempt under the SDK's tool use of that tool, in a subagent's loop
        tool = span["operationName"].removeprefix("MCP send tools/call ")
        assert ancestors(span)[:2] == [f"anthropic.mcp_tool_use {tool}", "anthropic.messages.tool_runner"]
    assert attempts


def test_ask_links_the_trace_in_jaeger_only_once_jaeger_has_taken_it(
    settings: SourceSettings, jaeger: Jaeger
) -> None:
    """Under a report for people, `--otlp` prints the trace's Jaeger link when the collector took the
    spans (`RESEARCH_JAEGER_UI` says where the UI is); the link is the trace Jaeger holds."""
    environment = {"RESEARCH_JAEGER_UI": jaeger.query, "COLUMNS": "80"}
    done = ask(settings, jaeger, "Orders of CUST-00042?", "--otlp", environment=environment, human=True)
    assert done.returncode == 0, done.stderr
    (link,) = [
        line.removeprefix("Jaeger: ") for line in done.stdout.splitlines() if line.startswith("Jaeger: ")
    ]
    trace_id = link.removeprefix(f"{jaeger.query}/trace/")
    assert len(trace_id) == 32 and jaeger.trace(trace_id, services=2)["traceID"] == trace_id
    with urllib.request.urlopen(link, timeout=10) as page:  # noqa: S310  (loopback: the test's Jaeger)
        assert page.status == 200  # the binary's placeholder page; Docker's image serves the UI there


@pytest.mark.anyio
async def test_a_source_a_host_of_its_own_calls_shows_its_spans_in_jaeger(
    settings: SourceSettings, jaeger: Jaeger
) -> None:
    """A standard host (here the mcp SDK's own client, as Claude Desktop or MCP Inspector starts a
    stdio server) with the OTLP variables in the source's environment: the source's spans reach
    Jaeger as research-source-customers, each call a trace of its own (the host sends no trace context)."""
    parameters = StdioServerParameters(
        command=sys.executable,
        args=["-m", "sources.customers"],
        env={
            **settings.child_environment(),
            "OTEL_TRACES_EXPORTER": "otlp",
            "OTEL_EXPORTER_OTLP_ENDPOINT": jaeger.otlp,
            "OTEL_EXPORTER_OTLP_TIMEOUT": "10",
        },
        cwd=str(PROJECT_ROOT),
    )
    with anyio.fail_after(60):
        async with Client(parameters) as host:
            result = await host.call_tool("customer_lookup", {"identifier": "CUST-00042"})
    assert result.is_error is False
    found = await anyio.to_thread.run_sync(
        jaeger.find, "research-source-customers", "tools/call customer_lookup"
    )
    (server,) = [span for span in found["spans"] if span["operationName"] == "tools/call customer_lookup"]
    assert tags(server)["span.kind"] == "server" and tags(server)["gen_ai.tool.name"] == "customer_lookup"
