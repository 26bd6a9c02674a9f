"""Bring your own MCP servers: the real filesystem and time servers join a research, as users add them.

The demo sources run in memory (they are not what is tested here); the third-party servers run as
real processes, started as their users start them (``tests.third_party``). A registry round trip
goes through the command line, as a user types it.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from itertools import islice
from pathlib import Path
from typing import Any

import anyio
import pytest

from coordinator.core import Config, Coordinator
from coordinator.planning.plan import Plan
from coordinator.planning.planner import plan_query
from coordinator.planning.tools import Catalog, demo_catalog, with_registered
from coordinator.registered_tools import list_tools
from coordinator.registry import Registry, SourceEntry, registered_target
from coordinator.reporting.report import ResearchReport
from sources.faults import FaultSettings, rolls
from sources.settings import SourceSettings
from subagents.policy import RecoveryPolicy
from subagents.sessions.client_faults import with_client_faults
from subagents.sessions.connection import Target
from tests.conftest import PROJECT_ROOT
from tests.test_coordinator import in_memory
from tests.third_party import INTEROP, filesystem_server, time_server

pytestmark = [pytest.mark.subprocess, pytest.mark.anyio]

QUESTION = (
    "what does {docs}/refund-policy.md say about damaged items, and is a £45 refund on ORD-10031 allowed?"
)
POLICY_TEXT = "Damaged items: a full refund within 60 days when the item arrived damaged; photos required."


@pytest.fixture
def docs(tmp_path: Path) -> Path:
    folder = tmp_path / "docs"
    folder.mkdir()
    (folder / "refund-policy.md").write_text(f"# Refund policy\n\n{POLICY_TEXT}\n", encoding="utf-8")
    (folder / "shipping.md").write_text("# Shipping\n\nWe ship in 3 days.\n", encoding="utf-8")
    return folder


def docs_entry(docs: Path, **fields: Any) -> SourceEntry:
    """The filesystem server as `research sources add docs --command "npx -y ..." --plan ...` writes it."""
    started = filesystem_server(docs)  # skips, saying why, where node or the package is missing
    return SourceEntry(
        name="docs", command=(started.command, *started.args), cwd=str(INTEROP), env=dict(started.env or {}),
        plan={"read_text_file": {"path": "file"}, "list_directory": {"path": "folder"}},
        errors={"ENOENT|EISDIR|ENOTDIR": "validation"}, **fields,
    )  # fmt: skip


async def catalog_with(entry: SourceEntry) -> Catalog:
    with anyio.fail_after(30):
        return with_registered(demo_catalog(), entry.name, await list_tools(entry), entry)


async def ask_across(
    settings: SourceSettings, entry: SourceEntry, question: str, *, faults: FaultSettings | None = None,
    policy: RecoveryPolicy | None = None, deadline: float = 20.0,
) -> tuple[Plan, ResearchReport]:  # fmt: skip
    """Research ``question`` over the demo sources (in memory) and the registered one (a real process)."""
    registry = Registry(None, {entry.name: entry})
    plan = plan_query(question, await catalog_with(entry))
    target: Target = registered_target(entry, settings.data_dir / "logs")
    targets = {**in_memory(settings), entry.name: with_client_faults(target, faults) if faults else target}
    config = Config(settings, registry=registry, policy=policy or RecoveryPolicy())
    with anyio.fail_after(deadline + 10):
        async with Coordinator(config, targets=targets) as coordinator:
            report = await coordinator.research(question, deadline_s=deadline, seed=1, plan=plan)
    return plan, report


async def test_a_question_is_answered_from_a_demo_source_and_a_registered_one(
    settings: SourceSettings, docs: Path
) -> None:
    plan, report = await ask_across(settings, docs_entry(docs), QUESTION.format(docs=docs))
    assert {(task.source, task.tool) for task in plan.tasks.values()} >= {
        ("docs", "read_text_file"), ("billing", "refund_eligibility"),
    }  # fmt: skip
    assert plan.tasks["read_text_file"].arguments == {"path": str(docs / "refund-policy.md")}
    from_docs = [finding for finding in report.findings if finding.source == "docs"]
    assert len(from_docs) == 1 and POLICY_TEXT in from_docs[0].text
    assert any(
        finding.source == "billing" and "may be refunded" in finding.text for finding in report.findings
    )
    assert report.status == "complete", report.gaps


async def test_a_missing_file_is_a_gap_classified_by_the_sources_own_rule(
    settings: SourceSettings, docs: Path
) -> None:
    question = f"what does {docs}/nope.md say, and is a £45 refund on ORD-10031 allowed?"
    _, report = await ask_across(settings, docs_entry(docs), question)
    (gap,) = [gap for gap in report.gaps if gap.source == "docs"]
    assert gap.error_category == "validation"
    assert "ENOENT" in gap.message and "own rule" in gap.message  # the evidence: its text, and what decided
    assert any(finding.source == "billing" for finding in report.findings)  # the other branch still answered


async def test_a_replay_classifies_a_registered_sources_answers_by_its_own_rules(
    settings: SourceSettings, docs: Path, tmp_path: Path
) -> None:
    """`research replay` reads the registry in effect: the ENOENT rule decides again, as it did."""
    entry = docs_entry(docs)
    _, report = await ask_across(settings, entry, f"what does {docs}/nope.md say, and ORD-10031?")
    assert any(gap.error_category == "validation" for gap in report.gaps if gap.source == "docs")
    registry = Registry(None, {entry.name: entry}).save(tmp_path / "research.toml")
    assert research_cli(settings, registry, "sources", "trust").returncode == 0
    replayed = research_cli(settings, registry, "replay", report.trace_id)
    assert replayed.returncode == 0, replayed.stdout + replayed.stderr
    assert "every decision as recorded" in replayed.stdout


async def test_a_folder_is_listed_and_nothing_named_is_dropped(settings: SourceSettings, docs: Path) -> None:
    question = f"what is in {docs} and in {docs}/notes.pdf, and ORD-10031?"
    plan, report = await ask_across(settings, docs_entry(docs), question)
    listed = [finding for finding in report.findings if finding.tool == "list_directory"]
    assert listed and "refund-policy.md" in listed[0].text
    assert plan.tasks["read_text_file"].arguments["path"] == str(docs / "notes.pdf")  # a file: read it
    assert any(gap.source == "docs" for gap in report.gaps)  # it does not exist: a gap, not a silence


@pytest.mark.parametrize("faults", [FaultSettings(hang=1), FaultSettings(crash=1)], ids=["hang", "kill"])
async def test_chaos_on_a_registered_source_leaves_an_annotated_gap(
    settings: SourceSettings, docs: Path, faults: FaultSettings
) -> None:
    policy = RecoveryPolicy(max_retries=1, base_delay_s=0.01, max_delay_s=0.02, call_timeout_s=0.5)
    _, report = await ask_across(
        settings, docs_entry(docs), QUESTION.format(docs=docs), faults=faults, policy=policy
    )
    (gap,) = [gap for gap in report.gaps if gap.source == "docs"]
    assert gap.error_category == "transient" and gap.attempted_query.tool == "read_text_file"
    assert report.status == "partial"
    assert any(finding.source == "billing" for finding in report.findings)


async def test_a_flaky_registered_source_is_retried_to_an_answer(
    settings: SourceSettings, docs: Path
) -> None:
    policy = RecoveryPolicy(max_retries=3, base_delay_s=0.01, max_delay_s=0.02)
    flaky = next(  # the first seed whose dice fail the first call and let the retry through
        faults
        for faults in (FaultSettings(transient=0.5, seed=seed) for seed in range(100))
        if [roll.transient for roll in islice(rolls(faults), 2)] == [True, False]
    )
    _, report = await ask_across(
        settings, docs_entry(docs), QUESTION.format(docs=docs), faults=flaky, policy=policy
    )
    (task,) = [task for task in report.tasks if task.source == "docs"]
    assert task.state == "ok" and task.attempts >= 2, task
    assert any(POLICY_TEXT in finding.text for finding in report.findings)


async def test_a_registered_source_that_cannot_start_leaves_the_others_working(
    settings: SourceSettings,
) -> None:
    broken = SourceEntry(
        name="docs", command=("/nonexistent/server",), plan={"read_text_file": {"path": "file"}}
    )
    from coordinator.registered_tools import catalog_of

    catalog = await catalog_of(Registry(None, {"docs": broken}), settings.data_dir, timeout_s=10)
    assert "could not list its tools" in catalog.not_usable["docs"]
    plan = plan_query("what does /srv/docs/a.md say, and is a £45 refund on ORD-10031 allowed?", catalog)
    assert "docs" not in plan.sources() and "billing" in plan.sources()
    assert any("/srv/docs/a.md" in item.what and "could not list" in item.why for item in plan.unplanned)


# --- the command line, as a user types it -----------------------------------------------------------


def research_cli(
    settings: SourceSettings, registry: Path, *args: str, cwd: Path = PROJECT_ROOT
) -> subprocess.CompletedProcess[str]:
    environment = {
        **os.environ,
        **settings.child_environment(),
        "COLUMNS": "200",
        "RESEARCH_SOURCES": str(registry),
    }
    return subprocess.run(
        [sys.executable, "-c", "from coordinator.cli import app; app()", *args],
        env=environment, cwd=cwd, capture_output=True, text=True, timeout=120,
    )  # fmt: skip


def test_a_server_is_added_listed_checked_planned_and_removed_from_the_command_line(
    settings: SourceSettings, tmp_path: Path
) -> None:
    server = time_server()  # skips, saying why, where the time server's venv is missing
    registry = tmp_path / "research.toml"
    added = research_cli(
        settings, registry, "sources", "add", "time", "--command", server.command,
        "--entity", r"timezone=\b[A-Z][a-z]+/[A-Z][A-Za-z_]+\b", "--plan", "get_current_time:timezone=timezone",
        "--error", "^Unknown tool=business",
    )  # fmt: skip
    assert added.returncode == 0, added.stderr
    assert "added time" in added.stdout and "the planner can use 1" in added.stdout
    assert Registry.load(registry).get("time").plan == {"get_current_time": {"timezone": "timezone"}}

    listed = research_cli(settings, registry, "sources", "list", "--json")
    assert json.loads(listed.stdout)["time"] == ["get_current_time", "convert_time"]

    checked = json.loads(research_cli(settings, registry, "sources", "check", "time", "--json").stdout)
    verdicts = {verdict["tool"]: verdict for verdict in checked}
    assert verdicts["get_current_time"]["planned"] and verdicts["get_current_time"]["arguments"] == {
        "timezone": "timezone"
    }
    assert (
        not verdicts["convert_time"]["planned"]
        and "--plan convert_time:" in verdicts["convert_time"]["why_not"]
    )

    planned = research_cli(
        settings, registry, "plan", "--json", "time in Europe/London and Asia/Tokyo, and ORD-10031?"
    )
    tasks = json.loads(planned.stdout)["tasks"]
    assert sorted(task["arguments"]["timezone"] for task in tasks if task["source"] == "time") == [
        "Asia/Tokyo",
        "Europe/London",
    ]

    called = research_cli(
        settings, registry, "sources", "call", "time", "get_current_time", '{"timezone": "Mars/Olympus"}'
    )
    assert called.returncode == 1 and "Invalid timezone" in called.stdout

    tasked = research_cli(
        settings, registry, "task", "time", "get_current_time", '{"timezone": "Mars/Olympus"}'
    )
    report = json.loads(tasked.stdout)
    assert tasked.returncode == 1 and report["state"] == "escalated", tasked.stderr
    assert (
        report["escalation"]["errorCategory"] == "validation"
    )  # the time server's words, read by a built-in rule

    removed = research_cli(settings, registry, "sources", "remove", "time")
    assert removed.returncode == 0 and "time" not in Registry.load(registry).sources()


@pytest.mark.parametrize(
    ("arguments", "says"),
    [
        (["add", "x"], "give exactly one of command"),
        (["add", "kb", "--command", "x"], "demo source's name"),
        (["add", "x", "--command", "/nonexistent/server"], "did not list its tools: FileNotFoundError"),
        (["add", "x", "--url", "http://127.0.0.1:9/mcp", "--timeout", "2"], "did not list its tools"),
        (
            ["add", "x", "--command", f"{sys.executable} -c 'import time; time.sleep(60)'", "--timeout", "1"],
            "TimeoutError",
        ),
        (["add", "x", "--command", "x", "--error", "ENOENT=wrong", "--no-check"], "errors.ENOENT"),
        (["add", "x", "--command", "x", "--plan", "read", "--no-check"], "--plan takes TOOL:ARG=KIND"),
        (["remove", "orders"], "demo source"),
        (["remove", "nothing"], "no source is named 'nothing'"),
    ],
    ids=[
        "no command",
        "demo name",
        "no such program",
        "url not answering",
        "never initializes",
        "bad category",
        "bad hint",
        "remove demo",
        "remove unknown",
    ],
)
def test_bad_registrations_are_one_line_errors_and_nothing_is_written(
    settings: SourceSettings, tmp_path: Path, arguments: list[str], says: str
) -> None:
    registry = tmp_path / "research.toml"
    done = research_cli(settings, registry, "sources", *arguments)
    assert done.returncode in (1, 2)
    assert says in done.stderr and len(done.stderr.strip().splitlines()) == 1, done.stderr
    assert "Traceback" not in done.stderr and not registry.exists()


def test_a_broken_entry_in_the_file_is_named_and_the_others_still_work(
    settings: SourceSettings, tmp_path: Path
) -> None:
    registry = tmp_path / "research.toml"
    registry.write_text(
        '[[source]]\nname = "docs"\nurl = "http://127.0.0.1:9/mcp"\n\n[[source]]\nname = "docs"\ncommand = "x"\n\n'
        '[[source]]\nname = "nothing"\n',
        encoding="utf-8",
    )
    assert research_cli(settings, registry, "sources", "trust").returncode == 0  # written by hand: approved
    listed = research_cli(settings, registry, "sources", "list", "--json")
    assert listed.returncode == 0
    assert set(json.loads(listed.stdout)) == {"customers", "orders", "billing", "tickets", "kb", "docs"}
    warnings = listed.stderr.strip().splitlines()
    assert len(warnings) == 2 and "a second source named 'docs'" in warnings[0] and "'nothing'" in warnings[1]


def test_a_registry_file_nobody_here_approved_runs_none_of_its_commands(
    settings: SourceSettings, tmp_path: Path
) -> None:
    """A research.toml that arrived with a repository (or that another process changed) would run its
    commands at the next question: until this user approves it, its sources are left out."""
    planted, ran = tmp_path / "research.toml", tmp_path / "ran"
    planted.write_text(f'[[source]]\nname = "evil"\ncommand = ["touch", "{ran}"]\n', encoding="utf-8")
    for asked in (["plan", "what does /srv/a.md say about ORD-10031?"], ["sources", "list"]):
        done = research_cli(settings, planted, *asked)
        assert "is not approved here" in done.stderr and "(evil) are left out" in done.stderr, done.stderr
    refused = research_cli(
        settings, planted, "sources", "add", "docs", "--url", "http://127.0.0.1:9/mcp", "--no-check"
    )
    assert refused.returncode == 2 and "not approved" in refused.stderr  # writing never approves it
    assert not ran.exists()

    approved = research_cli(settings, planted, "sources", "trust")
    assert approved.returncode == 0 and "evil: " in approved.stdout
    assert research_cli(settings, planted, "sources", "check", "evil").returncode == 1  # now it is run
    assert ran.exists()
    ran.unlink()
    planted.write_text(planted.read_text(encoding="utf-8") + "\n", encoding="utf-8")  # changed since
    assert "is not approved here" in research_cli(settings, planted, "sources", "list").stderr


def test_the_bytes_approved_are_the_bytes_parsed(settings: SourceSettings, tmp_path: Path) -> None:
    """A registry swapped between its read and its check is judged by what was read: a hostile file
    parsed while the approved one is back on disk at the check is not approved (the check once hashed
    the file anew), and an approved file parsed is approved whatever is on disk afterwards."""
    from coordinator.registry_trust import is_trusted, trust

    data, registry, ran = tmp_path / "data", tmp_path / "research.toml", tmp_path / "ran"
    approved = '[[source]]\nname = "notes"\ncommand = ["true"]\n'
    hostile = f'[[source]]\nname = "notes"\ncommand = ["touch", "{ran}"]\n'
    registry.write_text(approved, encoding="utf-8")
    trust(registry, data, Registry.load(registry).digest)

    registry.write_text(hostile, encoding="utf-8")
    parsed = Registry.load(registry)  # the hostile entry is what would run...
    registry.write_text(approved, encoding="utf-8")  # ...and the approved file is back for the check
    assert parsed.entries["notes"].command == ("touch", str(ran))
    assert not is_trusted(registry, data, parsed.digest)

    parsed = Registry.load(registry)
    registry.write_text(hostile, encoding="utf-8")
    assert is_trusted(registry, data, parsed.digest) and parsed.entries["notes"].command == ("true",)


def test_a_relative_command_runs_beside_its_registry_never_in_the_current_folder(
    settings: SourceSettings, tmp_path: Path
) -> None:
    """An approved entry without ``cwd`` names files beside the registry file: run from a folder that
    holds a hostile server of the same name, that server is never started."""
    home, elsewhere = tmp_path / "project", tmp_path / "elsewhere"
    home.mkdir()
    elsewhere.mkdir()
    ran = tmp_path / "hostile-ran"
    (elsewhere / "notes_server.py").write_text(f"open({str(ran)!r}, 'w').close()\n", encoding="utf-8")
    registry = home / "research.toml"
    registry.write_text(
        f'[[source]]\nname = "notes"\ncommand = ["{sys.executable}", "notes_server.py"]\n', encoding="utf-8"
    )
    assert Registry.load(registry).entries["notes"].cwd == str(home.resolve())
    assert research_cli(settings, registry, "sources", "trust", cwd=elsewhere).returncode == 0
    checked = research_cli(settings, registry, "sources", "check", "notes", cwd=elsewhere)
    assert checked.returncode == 1, checked.stderr  # no notes_server.py beside the registry: it fails
    assert not ran.exists()


# --- what research may call on a registered source ---------------------------------------------------


async def test_a_write_tool_of_a_registered_source_is_never_called(
    settings: SourceSettings, docs: Path
) -> None:
    """However a call is chosen (a model sees every tool), a tool that does not say it only reads, and
    that the entry does not name, never reaches the server: the file is not written."""
    from coordinator.runtime import build_runtime
    from subagents.broker import CredentialBroker
    from subagents.sessions.connection import Connections
    from subagents.subagent import run_subagent
    from subagents.task import Task

    entry = docs_entry(docs)
    written = docs / "written.md"
    targets = {"docs": registered_target(entry, settings.data_dir / "logs")}
    with anyio.fail_after(30):
        async with Connections.opened(targets) as connections:
            runtime = build_runtime(
                connections, CredentialBroker(settings.signing_key()), seed=1,
                registry=Registry(None).added(entry), data_dir=settings.data_dir, asked=(), approvals=(),
            )  # fmt: skip
            task = Task("write", "docs", "write_file", {"path": str(written), "content": "overwritten"})
            report = await run_subagent(task, runtime, deadline=runtime.clock.now() + 10)
    assert report.state == "escalated" and report.escalation is not None
    assert report.escalation.error_category == "business" and "was not called" in report.escalation.message
    assert not written.exists()


def test_research_task_holds_a_registered_source_to_its_allowed_tools(
    settings: SourceSettings, docs: Path, tmp_path: Path
) -> None:
    """`research task` builds its runtime where every entry point does: a write tool the entry never
    named is not called through it either (it once ran with no allowed-tools hook at all)."""
    registry = tmp_path / "research.toml"
    Registry(registry).added(docs_entry(docs)).save()
    assert research_cli(settings, registry, "sources", "trust").returncode == 0
    written = docs / "written.md"
    done = research_cli(
        settings, registry, "task", "docs", "write_file", json.dumps({"path": str(written), "content": "x"})
    )
    assert done.returncode == 1 and "was not called" in done.stdout, (done.stdout, done.stderr)
    assert not written.exists()


async def test_claude_plans_over_the_registered_tools_it_may_call(
    settings: SourceSettings, docs: Path
) -> None:
    """The lead agent is shown every registered tool it may plan, with what each takes; a plan naming
    one it may not (a write) is refused with the reason, and the repaired plan runs."""
    from coordinator.llm import claude_plan
    from tests.fake_messages_api import FakeMessagesApi, tool_use
    from tests.test_llm import settings_for

    catalog = await catalog_with(docs_entry(docs))
    path = str(docs / "refund-policy.md")

    def plan_of(tool: str, arguments: dict[str, Any]) -> dict[str, Any]:
        return {
            "tasks": [
                {"id": "read", "source": "docs", "tool": tool, "arguments": arguments, "why": "the file"}
            ]
        }

    api = FakeMessagesApi([
        tool_use(plan_of("write_file", {"path": path, "content": "x"})),
        tool_use(plan_of("read_text_file", {"path": path})),
    ])  # fmt: skip
    try:
        with anyio.fail_after(30):
            plan, summary = await claude_plan(f"what does {path} say?", settings_for(api), catalog=catalog)
    finally:
        api.close()
    assert "docs: list_directory(path), read_text_file(path" in api.requests[0]["system"]
    assert [step.action for step in summary.steps] == ["repair", "plan"]
    assert "unknown tool 'write_file' of docs" in summary.steps[0].reason
    assert plan.tasks["read"].tool == "read_text_file"


async def test_a_timed_kill_ends_the_registered_servers_process_and_all_it_started(
    settings: SourceSettings, docs: Path
) -> None:
    """`--chaos kill:docs@TIME` on a registered source: the process started from its command dies, and so
    does what it started (npx runs the server as its child); the session sees its connection close."""
    import psutil

    from coordinator.query_chaos import kill_at
    from subagents.classify import classify_exception
    from subagents.hooks import ToolCall
    from subagents.sessions.connection import Connections

    entry = docs_entry(docs)
    assert entry.command is not None
    with anyio.fail_after(30):
        async with Connections.opened(
            {"docs": registered_target(entry, settings.data_dir / "logs")}
        ) as connections:
            client, _ = await connections["docs"].session()
            started = psutil.Process().children(recursive=True)
            assert any(str(docs) in " ".join(process.cmdline()) for process in started)
            await kill_at("docs", 0.0, registered=True)
            call = ToolCall("docs", "list_directory", {"path": str(docs)}, 1)
            with pytest.raises(Exception) as raised:
                await connections["docs"].send(client, call, timeout_s=5, meta=None)
            assert classify_exception(raised.value).error_type in ("connection_closed", "timeout")

            def serves(process: psutil.Process) -> bool:
                try:
                    alive = process.status() != psutil.STATUS_ZOMBIE
                    return alive and str(docs) in " ".join(process.cmdline())
                except psutil.Error:  # gone (and perhaps reaped) while it was looked at
                    return False

            assert not [process for process in started if serves(process)]
