"""A run kept beside its trace replays to the same decisions; a changed answer shows as a diff.

Recordings are made here by running generated chaos scenarios and queries (in memory, through the
real sources), then read back and replayed through the code as it is. One recording is kept in
the repository (``tests/recordings``): a chaos run whose breaker opened across two tasks, made by
`research chaos run --replay 780260973` (hang:billing, flaky:tickets) and copied from
``<data folder>/traces/recordings/<trace id>.json``; any chaos run that shows a defect becomes a
test the same way.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import anyio
import httpx2
import pytest
from mcp.shared.exceptions import MCPError
from mcp_types import CONNECTION_CLOSED, REQUEST_TIMEOUT

from coordinator import chaos
from coordinator.core import Config, Coordinator
from coordinator.planning.plan import Plan, PlannedTask
from coordinator.recorded_run import RecordedRun, load_recording, recording_path
from coordinator.replay import replay
from sources.faults import FaultSettings
from sources.settings import SourceSettings
from sources.world import ensure_world
from subagents.classify import SourceUnavailable, classify_exception
from subagents.sessions.recording import NotRebuilt, Raised, raised, rebuilt
from tests.conftest import PROJECT_ROOT, TESTING
from tests.fakes import FakeClock
from tests.test_coordinator import STORY, in_memory
from traces.redact import set_full_payloads
from traces.stand_ins import pseudonymous

pytestmark = pytest.mark.anyio

KEPT = PROJECT_ROOT / "tests" / "recordings"


@pytest.fixture(scope="module")
def chaos_settings(tmp_path_factory: pytest.TempPathFactory) -> SourceSettings:
    """A world of its own (chaos refunds must not change what other tests read), recordings in it."""
    data_dir: Path = tmp_path_factory.mktemp("replay")
    ensure_world(data_dir, 42)
    return SourceSettings(data_dir=data_dir, kb_warmup_ms=0, tickets_rate_per_second=1000, tickets_burst=1000)


async def replayed(settings: SourceSettings, trace_id: str) -> Any:
    with anyio.fail_after(60):
        return await replay(load_recording(recording_path(settings.traces_path, trace_id)), settings)


def steps(report: Any) -> list[list[tuple[Any, ...]]]:
    return [
        [(d.action, d.category, d.attempt, d.backoff_ms) for d in task.decisions] for task in report.tasks
    ]


async def test_every_recorded_chaos_run_replays_to_the_decisions_it_took(
    chaos_settings: SourceSettings,
) -> None:
    decided = 0
    for scenario in chaos.scenarios(16, seed=11):
        with anyio.fail_after(60):
            result = await chaos.run_scenario(scenario, chaos_settings)
        assert result.report is not None
        again = await replayed(chaos_settings, result.report.trace_id)
        assert again.differences == [], (scenario.describe(), again.differences)
        # Against the live run too (its reasons name the people the recording has stand-ins for).
        assert steps(again.report) == steps(result.report)
        assert [task.state for task in again.report.tasks] == [task.state for task in result.report.tasks]
        decided += sum(len(task.decisions) for task in result.report.tasks)
    assert decided > 20  # the scenarios recovered from something: the comparison had decisions to compare


async def test_a_kept_chaos_run_whose_breaker_opened_across_tasks_replays_as_recorded(
    chaos_settings: SourceSettings,
) -> None:
    run = load_recording(KEPT / "billing-hangs-and-its-breaker-opens.json")
    decisions = {outcome.id: [d.action for d in outcome.decisions] for outcome in run.outcomes}
    assert decisions["invoices"][-1] == decisions["refund"][-1] == "breaker_open"  # what it is kept for
    with anyio.fail_after(60):
        again = await replay(run, chaos_settings)
    assert again.differences == []
    assert again.caveats == []


async def test_a_changed_answer_is_a_diff_of_decisions(chaos_settings: SourceSettings) -> None:
    faults = {"tickets": FaultSettings.parse("transient=1")}
    with anyio.fail_after(60):
        targets = in_memory(chaos_settings, faults)
        async with Coordinator(Config(chaos_settings), targets=targets, clock=FakeClock()) as coordinator:
            report = await coordinator.research(STORY, seed=1)
    path = recording_path(chaos_settings.traces_path, report.trace_id)
    kept = json.loads(path.read_text())
    answered = next(a["answer"] for a in kept["attempts"] if a["task"] == "orders")
    second = next(a for a in kept["attempts"] if (a["task"], a["attempt"]) == ("tickets", 2))
    second.update(answer=answered, raised=None)  # tickets' second attempt now answers

    with anyio.fail_after(60):
        again = await replay(RecordedRun.model_validate(kept), chaos_settings)
    (diff,) = again.differences
    lines = diff.splitlines()
    assert lines[:2] == ["--- tickets (recorded)", "+++ tickets (replayed)"]
    assert any(line.startswith("-attempt 2: retry transient") for line in lines)
    assert "-ended escalated" in lines and "+ended ok" in lines


async def test_a_recording_holds_no_personal_data_and_its_repair_still_replays(
    settings: SourceSettings,
) -> None:
    messy = " Jane.Doe@Example.com "
    plan = Plan.of(
        f"who is {messy}?", [PlannedTask("customer", "customers", "customer_lookup", {"identifier": messy})]
    )
    with anyio.fail_after(60):
        async with Coordinator(
            Config(settings), targets=in_memory(settings), clock=FakeClock()
        ) as coordinator:
            report = await coordinator.research(plan.query, seed=1, plan=plan)
    (task,) = report.tasks
    assert [d.action for d in task.decisions] == ["repair"] and task.state == "ok"
    text = recording_path(settings.traces_path, report.trace_id).read_text()
    for personal in ("jane", "doe", "example.com"):
        assert personal not in text.lower()
    assert "eyJ" not in text  # no credential
    again = await replayed(settings, report.trace_id)
    assert again.differences == []
    assert [d.action for d in again.report.tasks[0].decisions] == ["repair"]


def test_a_stand_in_keeps_the_shape_and_the_equalities_of_what_it_replaces() -> None:
    kept = pseudonymous(
        {
            "identifier": " Jane.Doe@Example.com ",
            "again": "write to jane.doe@example.com today",
            "customer": {"name": "Jane Doe", "id": "CUST-00001"},
            "text": "Jane Doe asked; Jane Doe's order",
            "credential": "eyJa.eyJb.c",
            "source": "customers",
            "_meta": {"name": "customers"},
        },
        keep=["customers"],
    )
    stand_in = kept["identifier"].strip()
    assert kept["identifier"] == f" {stand_in} " and stand_in != "Jane.Doe@Example.com"
    assert [len(part) for part in stand_in.replace("@", ".").split(".")] == [4, 3, 7, 3]
    assert stand_in[0].isupper() and stand_in[1:4].islower()
    assert kept["again"] == f"write to {stand_in.lower()} today"  # the same person, the same letters
    name = kept["customer"]["name"]
    assert name != "Jane Doe" and kept["text"] == f"{name} asked; {name}'s order"
    assert kept["customer"]["id"] == "CUST-00001" and kept["source"] == "customers"
    assert kept["_meta"] == {"name": "customers"}
    assert kept["credential"] == "[redacted credential]"


def test_an_answer_s_text_block_is_stood_in_for_as_its_structured_content_is() -> None:
    """An MCP answer holds its JSON twice: structured, and as text. In the text a name after an
    escape (`\\nJane`) and a secret key's value are as much out of the recording as in the structure."""
    body = {"results": [{"name": "Jane Doe", "body": "Hello\nJane Doe", "token": "s3cr3t"}]}
    answer = {"structuredContent": body, "content": [{"type": "text", "text": json.dumps(body)}]}
    kept = pseudonymous(answer)
    text = kept["content"][0]["text"]
    assert "Jane" not in text and "s3cr3t" not in text and "Jane" not in json.dumps(kept), kept
    assert json.loads(text) == kept["structuredContent"]  # the two copies still agree


def test_with_full_payloads_a_recording_keeps_personal_data_and_never_a_credential() -> None:
    set_full_payloads(True)
    try:
        kept = pseudonymous({"identifier": "jane@example.com", "token": "secret"})
    finally:
        set_full_payloads(False)
    assert kept == {"identifier": "jane@example.com", "token": "[redacted credential]"}


FAILURES = [
    TimeoutError("timed out"),
    MCPError(CONNECTION_CLOSED, "Connection closed"),
    MCPError(REQUEST_TIMEOUT, "Timed out after 0.15s waiting for 'tools/call'"),
    MCPError(-32602, "bad params", {"field": "limit"}),
    httpx2.ConnectError("refused"),
    httpx2.HTTPStatusError("503", request=httpx2.Request("POST", "http://x"), response=httpx2.Response(503)),
    ConnectionResetError(104, "reset by peer"),
    json.JSONDecodeError("Expecting value", "garbage", 0),
    ExceptionGroup("two", [TimeoutError("a"), ConnectionResetError("b")]),
    SourceUnavailable("orders", ConnectionRefusedError(111, "Connection refused")),
    RuntimeError("Invalid structured content returned by tool search_orders: 'id' is a required property"),
]


@pytest.mark.parametrize("failure", FAILURES, ids=lambda exc: type(exc).__name__)
def test_a_recorded_failure_is_raised_again_as_the_contract_classifies_it(failure: Exception) -> None:
    again = rebuilt(Raised.model_validate_json(raised(failure).model_dump_json()))
    assert classify_exception(again, source="orders") == classify_exception(failure, source="orders")


@pytest.mark.parametrize("named", ["SystemExit", "KeyboardInterrupt", "Popen", "os.system", "subprocess:run"])
def test_a_recording_never_raises_or_imports_what_it_names_beyond_the_known_failures(named: str) -> None:
    again = rebuilt(Raised(type=named, args=["rm -rf /"]))
    assert isinstance(again, NotRebuilt) and named in str(again)


# --- the command line -----------------------------------------------------------------------------


def research_cli(data_dir: Path, *args: str) -> subprocess.CompletedProcess[str]:
    environment = {**os.environ, "RESEARCH_DATA_DIR": str(data_dir), "COLUMNS": "80", **TESTING}
    return subprocess.run(
        [sys.executable, "-c", "from coordinator.cli import app; app()", *args], env=environment, cwd=PROJECT_ROOT,
        capture_output=True, text=True, timeout=120,
    )  # fmt: skip


def test_research_replay_on_the_command_line(tmp_path: Path) -> None:
    data_dir = tmp_path / "data"
    none_yet = research_cli(data_dir, "replay")
    assert (
        none_yet.returncode == 2
        and "no recorded runs" in none_yet.stderr
        and "Traceback" not in none_yet.stderr
    )

    asked = research_cli(data_dir, "ask", STORY, "--faults", "tickets:transient=1", "--json")
    assert asked.returncode == 3, asked.stderr  # partial: tickets stays down
    trace_id = json.loads(asked.stdout)["trace_id"]

    same = research_cli(data_dir, "replay", "latest")
    assert same.returncode == 0, same.stderr
    assert same.stdout.startswith(f"replayed {trace_id}: every decision as recorded\n  (")
    assert max(map(len, same.stdout.splitlines())) <= 80

    path = recording_path(data_dir / "traces", trace_id)
    kept = json.loads(path.read_text())
    answered = next(a["answer"] for a in kept["attempts"] if a["task"] == "orders")
    next(a for a in kept["attempts"] if a["task"] == "tickets").update(answer=answered, raised=None)
    recorded = next(outcome for outcome in kept["outcomes"] if outcome["id"] == "tickets")
    recorded["decisions"][0]["reason"] += " \u202eevil"  # what a source said, printed in the diff
    path.write_text(json.dumps(kept))
    changed = research_cli(data_dir, "replay", trace_id[:8])
    assert changed.returncode == 1, changed.stderr
    assert "--- tickets (recorded)" in changed.stdout and "+ended ok" in changed.stdout
    assert "\\u202eevil" in changed.stdout and "\u202e" not in changed.stdout  # escaped for a terminal

    as_json = json.loads(research_cli(data_dir, "replay", trace_id, "--json").stdout)
    assert as_json["same"] is False and as_json["trace_id"] == trace_id and as_json["differences"]

    kept["attempts"][0]["attempt"] = "first"  # a swapped file: named, with what is wrong, in one line
    path.write_text(json.dumps(kept))
    swapped = research_cli(data_dir, "replay", trace_id)
    assert swapped.returncode == 2 and "Traceback" not in swapped.stderr
    assert f"{path} is not a recording of a run: attempts.0.attempt" in swapped.stderr

    unknown = research_cli(data_dir, "replay", "ffff")
    assert unknown.returncode == 2 and "no recorded run 'ffff'" in unknown.stderr
