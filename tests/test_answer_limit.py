"""A source's answer is bounded while it is read: one over the limit is a gap, and the session lives on.

A hostile third-party server (``tests/oversized_server.py``) answers 9 MB or hundreds of thousands of
records over stdio, over streamable HTTP with SSE, and with ``application/json``: each call through a
subagent escalates at once (validation, not retried: the same call answers the same size) with
"the answer was larger than 8 MB", and the next call on the same session is answered.
"""

from __future__ import annotations

import random
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import anyio
import mcp
import pytest

from sources.settings import SourceSettings
from subagents.broker import CredentialBroker
from subagents.guard import LocalGuard, SourceState
from subagents.policy import RecoveryPolicy
from subagents.sessions.connection import Connections
from subagents.subagent import Runtime, SubagentReport, Task, run_subagent
from subagents.writes import EffectsTable, ToolEffects
from tests.conftest import PROJECT_ROOT, TEST_KEY
from tests.fakes import FakeClock
from tests.test_bring_your_own import research_cli

pytestmark = pytest.mark.subprocess

SERVER = PROJECT_ROOT / "tests" / "oversized_server.py"
BOUND_S = 120.0
# A server building 100,000 records on a busy machine takes seconds: the test is about size, not time.
POLICY = RecoveryPolicy(call_timeout_s=40.0)
START = 1000.0
GAP = "the answer was larger than 8 MB"
OVERSIZED = [
    ("dump", {"megabytes": 9}),  # just past the bound
    ("records", {"count": 100_000}),  # about 12 MB of records, as text and as structured content
]


@pytest.fixture(params=["stdio", "http", "json"])
def target(request: pytest.FixtureRequest) -> Iterator[Any]:
    """What a session with the server opens on: its stdio parameters, or its URL over HTTP."""
    if request.param == "stdio":
        yield mcp.StdioServerParameters(command=sys.executable, args=[str(SERVER)])
        return
    serving = subprocess.Popen(
        [sys.executable, str(SERVER), request.param], stderr=subprocess.PIPE, text=True, cwd=PROJECT_ROOT
    )
    try:
        assert serving.stderr is not None
        line = serving.stderr.readline()  # the server prints its URL once it listens
        assert line.startswith("listening "), line
        yield line.split()[1]
    finally:
        serving.kill()
        serving.wait(timeout=BOUND_S)
        serving.stderr.close()  # type: ignore[union-attr]  # a pipe (Popen above)


async def _calls(target: Any, calls: list[tuple[str, dict[str, Any]]]) -> tuple[list[SubagentReport], int]:
    """Each call through a subagent, one after another on one session; and the sessions opened."""
    clock = FakeClock(START)
    effects = EffectsTable({"hostile": {tool: ToolEffects.of({"readOnlyHint": True}) for tool, _ in calls}})
    reports: list[SubagentReport] = []
    with anyio.fail_after(BOUND_S):
        async with Connections.opened({"hostile": lambda: target}) as connections:
            runtime = Runtime(
                connections=connections, broker=CredentialBroker(TEST_KEY), guard=LocalGuard(SourceState()),
                clock=clock, rng=random.Random(1), effects=effects, policy=POLICY,
            )  # fmt: skip
            for number, (tool, arguments) in enumerate(calls):
                task = Task(f"{tool}-{number}", "hostile", tool, arguments)
                reports.append(await run_subagent(task, runtime, deadline=clock.now() + 50))
            return reports, connections["hostile"].opened


@pytest.mark.parametrize(("tool", "arguments"), OVERSIZED)
def test_an_answer_over_the_limit_is_a_gap_and_the_session_answers_the_next_call(
    target: Any, tool: str, arguments: dict[str, Any]
) -> None:
    reports, sessions = anyio.run(_calls, target, [(tool, arguments), ("echo", {"text": "still here"})])
    refused, answered = reports
    assert refused.state == "escalated" and refused.attempts == 1, refused
    assert refused.escalation is not None
    assert refused.escalation.error_category == "validation" and not refused.escalation.is_retryable
    assert GAP in refused.escalation.message and "narrower query" in refused.escalation.message
    assert refused.escalation.attempted_query.arguments == arguments
    assert answered.state == "ok" and "still here" in str(answered.results), answered
    assert sessions == 1  # the same session: the refused answer did not cost it


def test_sources_call_to_a_registered_server_answering_50_mb_says_so_in_one_gap(
    settings: SourceSettings, tmp_path: Path
) -> None:
    """The issue's case as a user meets it: `research sources call` to a registered server whose answer
    is 50 MB ends at once with the gap, not at the deadline with "TimeoutError"."""
    registry = tmp_path / "research.toml"
    command = f"{sys.executable} {SERVER}"
    added = research_cli(settings, registry, "sources", "add", "hostile", "--command", command)
    assert added.returncode == 0, added.stdout + added.stderr
    called = research_cli(settings, registry, "sources", "call", "hostile", "dump", '{"megabytes": 50}')
    assert called.returncode == 1, called.stdout + called.stderr  # escalated
    assert GAP in called.stdout + called.stderr and "Traceback" not in called.stderr, (
        called.stdout + called.stderr
    )
