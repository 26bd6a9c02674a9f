"""A deadline is wall-clock from the command's start, and a run cut short keeps what it did.

Real processes and real time where the deadline meets spawning and hung calls; every wait bounded.
"""

from __future__ import annotations

import contextlib
import json
import signal
import time
from typing import Any

import anyio
import psutil
import pytest

from coordinator.core import Config, Coordinator
from coordinator.planning.planner import plan_query
from coordinator.reporting.report import ResearchReport
from sources.faults import FaultSettings
from sources.settings import SourceSettings
from subagents.broker import CredentialBroker
from subagents.sessions.connection import Connections, Target, stdio_target
from subagents.subagent import Runtime, Subagent, SubagentReport, Task, run_subagent
from tests.fake_messages_api import Silent
from tests.test_cli import research_process
from tests.test_coordinator import STORY, in_memory

pytestmark = pytest.mark.anyio


def stdio_targets(settings: SourceSettings, faults: dict[str, FaultSettings]) -> dict[str, Target]:
    return {
        source: stdio_target(source, settings.with_faults(faults.get(source, FaultSettings())))
        for source in ("customers", "orders", "tickets", "billing", "kb")
    }


async def ask(
    settings: SourceSettings,
    targets: dict[str, Target],
    *,
    deadline_s: float,
    started_at: float | None = None,
) -> ResearchReport:
    with anyio.fail_after(deadline_s + 30):
        async with Coordinator(Config(settings), targets=targets) as coordinator:
            return await coordinator.research(STORY, deadline_s=deadline_s, started_at=started_at, seed=5)


def gaps_of(report: ResearchReport) -> list[dict[str, Any]]:
    return [
        gap.model_dump(include={"task", "state", "error_category", "message", "attempted_query", "next_step"})
        for gap in report.gaps
    ]


async def test_a_hung_call_reports_the_arguments_it_sent_and_what_it_did(settings: SourceSettings) -> None:
    targets = in_memory(settings, {"tickets": FaultSettings(hang=1)})
    report = await ask(settings, targets, deadline_s=1.5)
    tickets = next(task for task in report.tasks if task.id == "tickets")
    assert tickets.state == "deadline" and tickets.attempts == 1
    assert [decision.action for decision in tickets.decisions] == ["give_up"]
    gap = next(gap for gap in report.gaps if gap.task == "tickets")
    assert gap.state == "deadline" and gap.next_step == "retry later"
    assert (
        gap.attempted_query.arguments["customer_id"] == "CUST-00042"
    )  # what was sent, not the plan's template
    templates = [value for task in report.tasks for value in task.arguments.values() if "{" in str(value)]
    assert templates == [], "a plan's template reached the report"


async def test_the_same_seeded_run_with_a_hung_source_gives_the_same_gaps(settings: SourceSettings) -> None:
    """The hung call's timeout is clipped to the deadline, so the deadline, not a race, ends it."""
    hung = {"tickets": FaultSettings(hang=1)}
    first = await ask(settings, in_memory(settings, hung), deadline_s=1.5)
    second = await ask(settings, in_memory(settings, hung), deadline_s=1.5)
    assert gaps_of(first) == gaps_of(second)
    gap = next(gap for gap in gaps_of(first) if gap["task"] == "tickets")
    assert gap["state"] == "deadline"
    assert gap["message"] == "The deadline passed before tickets answered search_tickets."
    assert gap["attempted_query"]["arguments"]["customer_id"] == "CUST-00042"


@pytest.mark.subprocess
async def test_the_deadline_counts_from_the_commands_start(settings: SourceSettings) -> None:
    """A command that spent its deadline starting up gets no calls, and reports every task as such."""
    started_at = time.monotonic() - 10  # the command started ten seconds ago
    began = anyio.current_time()
    report = await ask(settings, stdio_targets(settings, {}), deadline_s=10.3, started_at=started_at)
    assert anyio.current_time() - began < 10  # a loose bound on a spent deadline, not a figure
    assert {task.state for task in report.tasks} <= {"deadline", "blocked"}
    assert {gap.state for gap in report.gaps} <= {"deadline", "blocked"}
    assert report.status == "partial"


class _StopsListening:
    """A model that makes one call and then never answers: only the subagent's backstop ends it."""

    async def drive(self, agent: Subagent) -> SubagentReport:
        await agent.settle()
        await anyio.sleep_forever()
        raise AssertionError("unreachable")


async def test_a_subagent_cut_short_keeps_its_history(settings: SourceSettings) -> None:
    async with Connections.opened(in_memory(settings)) as connections:
        runtime = Runtime(
            connections=connections,
            broker=CredentialBroker(settings.signing_key()),
            model=_StopsListening(),
        )
        task = Task("orders", "orders", "search_orders", {"customer_id": "CUST-00042"})
        with anyio.fail_after(10):
            report = await run_subagent(task, runtime, deadline=runtime.clock.now() + 0.5)
    assert report.state == "escalated" and report.out_of_time
    assert report.attempts == 1
    assert report.attempted_query.arguments == {"customer_id": "CUST-00042"}
    assert report.decisions[-1].action == "give_up" and "deadline" in report.decisions[-1].reason


async def test_every_source_the_plan_needs_starts_at_once(settings: SourceSettings) -> None:
    """Sessions open while the first tasks run: every source is opened once, dependents included."""
    opened: list[str] = []

    def counting(source: str, target: Target) -> Target:
        def open_target() -> Any:
            opened.append(source)
            return target()

        return open_target

    targets = {source: counting(source, target) for source, target in in_memory(settings).items()}
    plan = plan_query(STORY)
    async with Connections.opened(targets) as connections:
        async with Coordinator(Config(settings), transport=connections) as coordinator:  # sessions held here
            report = await coordinator.research(STORY, seed=1)
        # The opening order is the plan's: the dependents' sources did not wait for the customer lookup.
        assert opened[: len(plan.sources())] == plan.sources()
    assert sorted(opened) == sorted(plan.sources())
    assert report.status == "partial"  # the £750 refund needs a manager: a gap, as in the story


@pytest.mark.subprocess
def test_ask_with_a_hung_source_prints_its_report_by_the_deadline(settings: SourceSettings) -> None:
    began = time.monotonic()
    command = research_process(  # the hung tickets hold the query to its deadline: the test lasts it all
        settings, "ask", STORY, "--json", "--llm", "none", "--deadline", "5", "--chaos", "hang:tickets"
    )
    out, err = command.communicate(timeout=60)
    assert time.monotonic() - began < 5 + 10  # a loose bound on a hang; the benchmark measures it precisely
    assert command.returncode == 3, err
    report = json.loads(out)
    tickets = next(task for task in report["tasks"] if task["id"] == "tickets")
    assert tickets["state"] in ("deadline", "blocked")
    assert "Traceback" not in err


@pytest.mark.subprocess
@pytest.mark.parametrize(
    "tests_sigint",
    # As a terminal starts the suite, and as a script's background job does (`make test &`: the shell
    # ignores SIGINT in it, and every child inherits that unless it is reset).
    [signal.default_int_handler, signal.SIG_IGN],
    ids=["sigint-default", "sigint-ignored-by-the-suite"],
)
def test_ctrl_c_says_what_was_still_running_and_leaves_no_source(
    settings: SourceSettings, tests_sigint: Any
) -> None:
    before = signal.signal(signal.SIGINT, tests_sigint)
    try:
        command = research_process(
            settings, "ask", STORY, "--llm", "none", "--deadline", "60", "--chaos", "hang:tickets"
        )
    finally:
        signal.signal(signal.SIGINT, before)
    try:
        parent = psutil.Process(command.pid)
        sources: list[psutil.Process] = []
        waiting_until = time.monotonic() + 60
        # Interrupted while the research runs: every source started (they are forked as soon as the plan
        # is made, before the run), and the customer looked up (its source wrote the call's span), so the
        # tickets, which wait for that lookup and then hang, are still running.
        while len(sources) < 5 or not _answered(settings, sources, "customers", "customer_lookup"):
            assert time.monotonic() < waiting_until and command.poll() is None, command.stderr
            sources = [
                child for child in parent.children(recursive=True) if "sources." in " ".join(_cmdline(child))
            ]
            time.sleep(0.05)
        command.send_signal(signal.SIGINT)
        _, err = command.communicate(timeout=30)
    finally:
        if command.poll() is None:
            command.kill()
    assert command.returncode == 130, err
    assert "interrupted:" in err and "tickets" in err.split("interrupted:")[1]
    assert "Traceback" not in err
    _, alive = psutil.wait_procs(sources, timeout=5)
    assert alive == [], f"sources left running: {alive}"


@pytest.mark.subprocess
def test_ctrl_c_before_the_run_says_that_no_task_started(
    settings: SourceSettings, messages_api: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Interrupted after its plan and before its run (here while Claude is asked for the plan and has
    not answered), the command says no task started, and leaves no process behind."""
    silent = Silent()
    api = messages_api()
    api.respond = silent  # the planner's request is the first; it is never answered
    monkeypatch.setenv("ANTHROPIC_API_KEY", "test-key")
    monkeypatch.setenv("ANTHROPIC_BASE_URL", api.base_url)
    command = research_process(settings, "ask", STORY, "--llm", "claude", "--deadline", "60")
    try:
        waiting_until = time.monotonic() + 60
        while not api.requests:  # Claude is asked for the plan: the run has not started
            assert time.monotonic() < waiting_until and command.poll() is None, command.stderr
            time.sleep(0.05)
        started = psutil.Process(command.pid).children(recursive=True)  # the fork server, started ahead
        command.send_signal(signal.SIGINT)
        _, err = command.communicate(timeout=30)
    finally:
        silent.released.set()
        if command.poll() is None:
            command.kill()
    assert command.returncode == 130, err
    assert "interrupted: before any task started; nothing was reported" in err
    assert "Traceback" not in err
    _, alive = psutil.wait_procs(started, timeout=5)
    assert alive == [], f"left running: {alive}"


def _answered(settings: SourceSettings, sources: list[psutil.Process], source: str, tool: str) -> bool:
    """Whether the running ``source`` process has answered a call of ``tool`` (its span is in its file)."""
    for process in sources:
        if f"sources.{source}" in " ".join(_cmdline(process)):
            spans = settings.traces_path / f"research-source-{source}-{process.pid}.jsonl"
            with contextlib.suppress(FileNotFoundError):
                return f'"tools/call {tool}"' in spans.read_text(encoding="utf-8")
    return False


def _cmdline(process: psutil.Process) -> list[str]:
    try:
        return process.cmdline()
    except psutil.Error:  # gone meanwhile
        return []


class _Endings:
    """Records each task's end as the coordinator announces it (what the live table shows)."""

    def __init__(self) -> None:
        self.endings: list[tuple[str, str]] = []

    def attempt(self, task: Task, attempt: int, arguments: dict[str, Any]) -> None:
        pass

    def decided(self, task: Task, decision: Any) -> None:
        pass

    def ended(self, task_id: str, state: str, attempts: int, decisions: Any) -> None:
        self.endings.append((task_id, state))


async def test_each_task_is_announced_as_it_ends_not_when_the_query_does(settings: SourceSettings) -> None:
    """A hung source holds the query to its deadline; the tasks that ended earlier are told at once."""
    endings = _Endings()
    targets = in_memory(settings, {"tickets": FaultSettings(hang=1)})
    with anyio.fail_after(30):
        async with Coordinator(Config(settings), targets=targets) as coordinator:
            report = await coordinator.research(STORY, deadline_s=1.5, seed=5, observer=endings)
    assert sorted(endings.endings) == sorted((task.id, task.state) for task in report.tasks)
    assert endings.endings[-1] == ("tickets", "deadline")  # the others were announced before it ended
