"""A write happens at most once: a third-party server that writes, then lies, hangs or dies.

``tests/hostile_writes.py`` is a real MCP server in its own process, registered as users register
theirs. Each of its writes appends a line to a file before it misbehaves, so the file counts how
often the effect really happened. Through `research task` (the command line), `research ask` in
Claude mode (a model that obeys every instruction, on the fake Messages API) and `research batch`:
a write that may have acted is never sent again (its outcome is reported unknown), the idempotent
control recovers, and nothing is written without a person's approval.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import anyio
import pytest

from coordinator.core import Config, Coordinator
from coordinator.registry import Registry, SourceEntry, registered_target
from sources.settings import SourceSettings
from subagents.writes import Approval
from tests.conftest import PROJECT_ROOT
from tests.fake_messages_api import Conversations, FakeMessagesApi, calls, planned_call, says, tool_use
from tests.test_coordinator import in_memory
from tests.test_llm import settings_for

pytestmark = pytest.mark.subprocess

SERVER = PROJECT_ROOT / "tests" / "hostile_writes.py"
WRITES = ("append_then_fail", "append_then_hang", "append_then_die", "append_unannotated")


def hostile_entry(ledger: Path) -> SourceEntry:
    """The hostile server as `research sources add` writes it, its writes named under plan (so
    research may call them at all) and a kind of its own for the lines a question names."""
    return SourceEntry(
        name="hostile", command=(sys.executable, str(SERVER)), env={"HOSTILE_LEDGER": str(ledger)},
        timeout=1.0, entities={"line": r"\bline-[a-z]+\b", "key": r"\bk\d+\b"},
        plan={**{tool: {"line": "line"} for tool in WRITES}, "append_idempotent": {"line": "line", "key": "key"}},
    )  # fmt: skip


def lines(ledger: Path) -> list[str]:
    return ledger.read_text(encoding="utf-8").splitlines() if ledger.exists() else []


def research_cli(
    settings: SourceSettings, registry: Path, *args: str, timeout: float = 120
) -> subprocess.CompletedProcess[str]:
    environment = {
        **os.environ, **settings.child_environment(), "COLUMNS": "200", "RESEARCH_SOURCES": str(registry),
    }  # fmt: skip
    return subprocess.run(
        [sys.executable, "-c", "from coordinator.cli import app; app()", *args],
        env=environment, cwd=PROJECT_ROOT, capture_output=True, text=True, timeout=timeout,
        stdin=subprocess.DEVNULL,  # no terminal: nothing is approved but what the command line says
    )  # fmt: skip


@pytest.fixture
def registered(settings: SourceSettings, tmp_path: Path) -> tuple[Path, Path]:
    """A research.toml holding the hostile server, approved here (`sources trust`); and its ledger."""
    ledger, registry = tmp_path / "ledger.txt", tmp_path / "research.toml"
    Registry(registry).added(hostile_entry(ledger)).save()
    trusted = research_cli(settings, registry, "sources", "trust")
    assert trusted.returncode == 0, trusted.stderr
    return registry, ledger


def actions(report: dict[str, Any]) -> list[str]:
    return [decision["action"] for decision in report["decisions"]]


@pytest.mark.parametrize("tool", WRITES)
def test_research_task_makes_a_write_that_may_have_acted_once_and_says_its_outcome_is_unknown(
    settings: SourceSettings, registered: tuple[Path, Path], tool: str
) -> None:
    """Write then a transient lie, write then hang past the per-call timeout, write then die, a
    write with no annotations at all: one line each, a gap that says the outcome is unknown."""
    registry, ledger = registered
    done = research_cli(
        settings, registry, "task", "hostile", tool, '{"line": "line-once"}', "--yes", "--timeout", "1",
        "--deadline", "20",
    )  # fmt: skip
    assert lines(ledger) == ["line-once"], (done.stdout, done.stderr)
    assert done.returncode == 1, done.stderr
    report = json.loads(done.stdout)
    assert report["state"] == "escalated" and report["attempts"] == 1
    assert actions(report) == ["approved", "outcome_unknown"], report["decisions"]
    escalation = report["escalation"]
    assert escalation["errorCategory"] == "business" and escalation["isRetryable"] is False
    assert "may or may not have acted" in escalation["message"]
    assert escalation["attempted_query"] == {"tool": tool, "arguments": {"line": "line-once"}}


def test_the_idempotent_control_recovers(settings: SourceSettings, registered: tuple[Path, Path]) -> None:
    """A tool that says the same call twice has no additional effect is retried after its transient
    failure (its annotations listed by `research task` itself first), and its server keeps it to one
    line."""
    registry, ledger = registered
    done = research_cli(
        settings, registry, "task", "hostile", "append_idempotent", '{"line": "line-ok", "key": "k1"}',
        "--approve", "append_idempotent", "--timeout", "2",
    )  # fmt: skip
    assert done.returncode == 0, (done.stdout, done.stderr)
    report = json.loads(done.stdout)
    assert report["state"] == "ok" and actions(report) == ["approved", "retry"], report["decisions"]
    assert lines(ledger) == ["k1:line-ok"]


def test_a_write_nobody_approved_is_not_sent(settings: SourceSettings, registered: tuple[Path, Path]) -> None:
    """Without a terminal and without --yes or --approve, the write never leaves: a gap that says how."""
    registry, ledger = registered
    done = research_cli(settings, registry, "task", "hostile", "append_then_fail", '{"line": "line-no"}')
    assert done.returncode == 1 and lines(ledger) == []
    report = json.loads(done.stdout)
    assert report["attempts"] == 0 and actions(report) == ["not_approved"]
    assert "--approve append_then_fail:line-no" in report["escalation"]["message"]


def _repeating_subagent(request: dict[str, Any]) -> Any:
    """A model that obeys every instruction: it makes its planned call, and again after any answer."""
    turn = len(request["messages"]) // 2 + 1
    return calls(planned_call(request)) if turn <= 3 else says("Done.")


@pytest.mark.anyio
async def test_claude_mode_makes_a_write_once_however_often_the_model_asks(
    settings: SourceSettings, tmp_path: Path
) -> None:
    """Claude plans the write the question asks for and a model that repeats its call drives it:
    the first failure after writing ends the task with its outcome unknown; the line is written once."""
    ledger = tmp_path / "ledger.txt"
    entry = hostile_entry(ledger)
    plan = {
        "tasks": [
            {"id": "append", "source": "hostile", "tool": "append_then_fail", "arguments": {"line": "line-alpha"},
             "why": "the question asks to append it"}
        ]
    }  # fmt: skip
    api = FakeMessagesApi(Conversations(planner=[tool_use(plan)], default_subagent=_repeating_subagent))
    config = Config(
        settings, registry=Registry(None).added(entry), claude=settings_for(api),
        approvals=(Approval("append_then_fail", by="the test"),),
    )  # fmt: skip
    targets = {**in_memory(settings), "hostile": registered_target(entry, settings.data_dir / "logs")}
    try:
        with anyio.fail_after(60):
            async with Coordinator(config, targets=targets) as coordinator:
                report = await coordinator.research(
                    "append_then_fail line-alpha", deadline_s=30, record=False
                )
    finally:
        api.close()
    assert not api.script_errors, api.script_errors
    assert lines(ledger) == ["line-alpha"]
    (task,) = [task for task in report.tasks if task.id == "append"]
    assert [d.action for d in task.decisions][-1] == "outcome_unknown", task.decisions
    (gap,) = [gap for gap in report.gaps if gap.task == "append"]
    assert gap.next_step == "check whether it happened" and report.status == "partial"


def test_a_batch_makes_each_write_once(
    settings: SourceSettings, registered: tuple[Path, Path], tmp_path: Path
) -> None:
    """The same through `research batch` (the local engine): one line per question's write, the
    non-idempotent ones partial with their outcome unknown and never retried; the idempotent control
    retried and answered."""
    registry, ledger = registered
    questions = tmp_path / "questions.jsonl"
    asked = {
        "q0": "append_then_fail line-alpha",
        "q1": "append_then_fail line-beta",
        "q2": "append_idempotent line-gamma k7",
    }
    questions.write_text(
        "\n".join(json.dumps({"id": name, "query": query}) for name, query in asked.items()), encoding="utf-8"
    )
    done = research_cli(
        settings, registry, "batch", str(questions), "--out", str(tmp_path / "out"), "--approve", "append_then_fail",
        "--approve", "append_idempotent", "--concurrency", "3", timeout=240,
    )  # fmt: skip
    assert sorted(lines(ledger)) == ["k7:line-gamma", "line-alpha", "line-beta"], (done.stdout, done.stderr)
    for name in asked:
        report = json.loads((tmp_path / "out" / "reports" / f"{name}.json").read_text(encoding="utf-8"))
        (task,) = [task for task in report["tasks"] if task["source"] == "hostile"]
        expected = ["approved", "retry"] if name == "q2" else ["approved", "outcome_unknown"]
        assert [d["action"] for d in task["decisions"]] == expected, task
        assert task["state"] == ("ok" if name == "q2" else "escalated")
