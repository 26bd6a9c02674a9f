"""A batch question read in one process and answered in another: the Ray engine's split
(``coordinator.batch.work``): the driver plans, a worker only runs tasks."""

from __future__ import annotations

import base64
import json
import pickle
import subprocess
import sys

import anyio
import pytest

from coordinator.batch.questions import Question
from coordinator.batch.work import Answer, Setup, read, reading_coordinator
from sources.settings import SourceSettings
from subagents.sessions.bounded import _BoundedJsonTransport
from tests.conftest import PROJECT_ROOT, child_environment

pytestmark = pytest.mark.subprocess

STORY = "Investigate jane.doe@example.com: recent orders, open tickets, and whether a £750 refund on ORD-10023 is allowed"
# What reading a question loads: the planner's semantic matcher and its English word list; and what a
# worker that only runs tasks does not use either: the planner and the query's reader (its fuzzy
# matching), Claude's planning, networkx (the plan's graph, 11 MB; ordering a plan needs graphlib only)
# and the chaos runner, which serves the five sources in process.
READING_ONLY = ("wordllama", "spellchecker")
NOT_RUNNING = (
    "coordinator.planning.planner", "coordinator.planning.reading", "coordinator.planning.writes", "rapidfuzz",
    "coordinator.llm", "networkx", "coordinator.chaos.runner",
)  # fmt: skip

# A worker of its own: the question as read elsewhere, answered on the five sources forked here.
_WORKER = """
import base64, json, pickle, sys
import anyio
from coordinator.batch.work import Setup, answer
from coordinator.core import Config, Coordinator
from sources.faults import FaultSettings
from sources.settings import SourceSettings

question, planned = pickle.loads(base64.b64decode(sys.argv[1]))

async def main():
    settings = SourceSettings.from_environment()
    config = Config.for_ask(settings)
    targets = {name: entry.connect(settings, FaultSettings(), over="stdio")
               for name, entry in config.registry.sources().items()}
    with anyio.fail_after(60):
        async with Coordinator(config, targets=targets) as coordinator:
            got = await answer(question, Setup(settings, urls={}), coordinator, planned)
    loaded = sorted(name for name in sys.argv[2:] if name in sys.modules)
    print(json.dumps({"status": got.status, "violations": got.violations, "loaded": loaded}))

anyio.run(main)
"""


def test_a_worker_given_the_drivers_plan_loads_neither_the_matcher_nor_the_word_list(
    settings: SourceSettings,
) -> None:
    """Each Ray worker held the planner's matcher and word list (some 110 MB) to plan questions the
    driver can plan once: given the plan and the writes the question asks for, a worker reads nothing."""
    question = Question(id="story", query=STORY)
    setup = Setup(settings, urls={})
    planned = anyio.run(read, question, setup, reading_coordinator(setup))  # no source is asked: no wait
    assert not isinstance(planned, Answer), planned
    assert planned.plan.tasks
    shipped = base64.b64encode(pickle.dumps((question, planned))).decode()
    done = subprocess.run(  # this test's own worker script
        [sys.executable, "-c", _WORKER, shipped, *READING_ONLY, *NOT_RUNNING], env=child_environment(settings),
        cwd=PROJECT_ROOT, capture_output=True, text=True, timeout=120,
    )  # fmt: skip
    assert done.returncode == 0, done.stderr
    worker = json.loads(done.stdout.splitlines()[-1])
    assert worker == {
        "status": "partial",
        "violations": [],
        "loaded": [],
    }  # the £750 refund is a gap by design


def test_every_http_session_of_a_process_shares_one_tls_context() -> None:
    """httpx loads the CA store again for each transport (some 2 MB each): a Ray worker's five sessions,
    reopened after faults, held one per session. One context serves them all."""
    first, second = _BoundedJsonTransport(1), _BoundedJsonTransport(1)
    assert first._inner._pool._ssl_context is second._inner._pool._ssl_context


def test_the_driver_reads_what_a_question_leaves_out_for_its_worker(settings: SourceSettings) -> None:
    """A worker holds its calls to what the question leaves out without reading the question itself:
    the driver's reading carries it, as it carries the writes asked."""
    setup = Setup(settings, urls={})
    question = Question(id="except", query="orders of CUST-00042, except ORD-10008")
    planned = anyio.run(read, question, setup, reading_coordinator(setup))
    assert not isinstance(planned, Answer), planned
    assert list(planned.left_out) == ["ORD-10008"] and "except ORD-10008" in planned.left_out["ORD-10008"]
    assert pickle.loads(pickle.dumps(planned)).left_out == planned.left_out  # noqa: S301  (it crosses to Ray)
