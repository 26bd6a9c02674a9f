"""The fork server (``sources.processes.forked``): a forked source starts from what the fork server loaded."""

from __future__ import annotations

import json
import subprocess
import sys

import pytest

from sources.settings import SourceSettings
from tests import collector_after_fork
from tests.conftest import PROJECT_ROOT, child_environment
from tests.fresh_process import in_a_fresh_process
from tests.imports_after_fork import REPORT_PREFIX

pytestmark = pytest.mark.subprocess

# A coordinator of its own: the fork server with the import reporter first on its preload list, the
# five sources forked, each asked one call through the mcp client.
_FORK_AND_CALL = """
import anyio
from sources.catalogue import SOURCES
from sources.processes import forked
from sources.settings import SourceSettings
from subagents.sessions.connection import Connections, forked_target

forked._PRELOAD.insert(0, "tests.imports_after_fork")
CALLS = {
    "customers": ("customer_lookup", {"identifier": "CUST-00042"}),
    "orders": ("search_orders", {"customer_id": "CUST-00042"}),
    "billing": ("list_invoices", {"customer_id": "CUST-00042"}),
    "tickets": ("search_tickets", {"query": "damaged"}),
    "kb": ("search_policies", {"query": "refunds"}),
}

async def main():
    settings = SourceSettings.from_environment()
    with anyio.fail_after(60):
        async with Connections.opened({source: forked_target(source, settings) for source in SOURCES}) as open_:
            for source, (tool, arguments) in CALLS.items():
                client, _ = await open_[source].session()
                await client.call_tool(tool, arguments, read_timeout_seconds=20)
    print("called", len(CALLS))

anyio.run(main)
"""


def test_a_forked_source_imports_nothing_on_its_way_to_its_first_answers(settings: SourceSettings) -> None:
    """What every source needs is imported once, in the fork server: five children importing it each,
    at once, on two cores, was most of the second between forking them and their first answer."""
    done = subprocess.run(
        [sys.executable, "-c", _FORK_AND_CALL], env=child_environment(settings), cwd=PROJECT_ROOT,
        capture_output=True, text=True, timeout=120,
    )  # fmt: skip
    assert done.returncode == 0 and "called 5" in done.stdout, done.stderr
    imported = sorted(
        {
            line.removeprefix(REPORT_PREFIX)
            for line in done.stderr.splitlines()
            if line.startswith(REPORT_PREFIX)
        }
    )
    assert imported == [], " ".join(imported)


# A source forked ahead (as `research ask` forks its plan's sources before it imports the mcp client),
# then its session opened with the same environment, and a call made through it.
_AHEAD_THEN_CALL = """
import json, multiprocessing
import anyio
from sources.processes import forked_ahead
from sources.settings import SourceSettings
from subagents.sessions.connection import Connections, forked_target

async def main():
    settings = SourceSettings.from_environment()
    forked_ahead.fork_ahead("customers", settings.child_environment())
    with anyio.fail_after(60):
        async with Connections.opened({"customers": forked_target("customers", settings)}) as open_:
            client, _ = await open_["customers"].session()
            await client.call_tool("customer_lookup", {"identifier": "CUST-00042"}, read_timeout_seconds=20)
            print(json.dumps(len(multiprocessing.active_children())))

anyio.run(main)
"""


def test_a_source_forked_ahead_is_the_one_its_session_talks_to(settings: SourceSettings) -> None:
    """Forked ahead, a source starts while the coordinator imports the client; its session then takes
    that child rather than forking a second one."""
    done = subprocess.run(
        [sys.executable, "-c", _AHEAD_THEN_CALL], env=child_environment(settings), cwd=PROJECT_ROOT,
        capture_output=True, text=True, timeout=120,
    )  # fmt: skip
    assert done.returncode == 0, done.stderr
    assert done.stdout.splitlines()[-1] == "1", done.stdout


# A source forked from a fork server that reports, in each child, how the garbage collector stands.
_FORK_AND_REPORT_THE_COLLECTOR = """
from sources.processes import forked
from sources.settings import SourceSettings

forked._PRELOAD.insert(0, "tests.collector_after_fork")
child = forked.start("customers", SourceSettings.from_environment().child_environment())
child.wire.close()  # its input ends: it leaves
child.process.join(30)
"""


def test_the_fork_server_loads_without_collecting_and_its_children_collect(settings: SourceSettings) -> None:
    """The fork server's imports live as long as it does: collecting while it loaded them only walked
    them again and again. A child then starts with the collector on and all of that frozen."""
    done = subprocess.run(
        [sys.executable, "-c", _FORK_AND_REPORT_THE_COLLECTOR], env=child_environment(settings),
        cwd=PROJECT_ROOT, capture_output=True, text=True, timeout=120,
    )  # fmt: skip
    assert done.returncode == 0, done.stderr
    reports = [
        json.loads(line.removeprefix(collector_after_fork.REPORT_PREFIX))
        for line in done.stderr.splitlines()
        if line.startswith(collector_after_fork.REPORT_PREFIX)
    ]
    assert reports == [{"enabled": True, "frozen": reports[0]["frozen"], "collections": 0}], done.stderr
    assert reports[0]["frozen"] > 100_000  # the mcp SDK, pydantic's models, the sources


def test_the_fork_server_loads_no_command_line_parser() -> None:
    """typer is a spawned source's command line; a forked source parses none, so the fork server (on the
    story query's critical path, beside the coordinator's own imports) does not load it."""
    loaded = in_a_fresh_process("""
        import json, sys
        from sources.processes.forked import _PRELOAD
        for module in _PRELOAD:
            if module not in ("__main__", "sources.processes.fork_server_exit"):
                __import__(module)
        print(json.dumps("typer" in sys.modules))
    """)
    assert loaded is False
