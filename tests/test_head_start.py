"""`research ask` over stdio starts its sources' fork server before the command line's own imports."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from coordinator.cli.head_start import asks_over_stdio
from sources.settings import SourceSettings
from tests.conftest import private_settings
from tests.fresh_process import in_a_fresh_process

STORY = "Investigate jane.doe@example.com: recent orders, open tickets, and whether a £750 refund on ORD-10023 is allowed"


@pytest.mark.parametrize(
    "argv",
    [
        ["research", "ask", STORY],
        ["research", "ask", "--json", STORY],
        ["research", "ask", "-"],
        ["research", "ask", "--transport", "stdio", STORY],
    ],
)
def test_a_question_over_stdio_gets_the_head_start(argv: list[str]) -> None:
    assert asks_over_stdio(argv)


@pytest.mark.parametrize(
    "argv",
    [
        ["research"],
        ["research", "--help"],
        ["research", "ask", ""],
        ["research", "ask", "  "],
        ["research", "ask", "--help"],
        ["research", "ask", STORY, "--transport", "http"],
        ["research", "ask", "--transport=http", STORY],
        ["research", "plan", STORY],
        ["research", "sources", "list"],
    ],
)
def test_no_head_start_for_other_command_lines(argv: list[str]) -> None:
    assert not asks_over_stdio(argv)


def test_the_fork_server_starts_before_the_commands_are_imported() -> None:
    """Running when `research ask QUESTION` begins importing its commands (typer, the planner, the mcp
    SDK come with them): the sources' imports overlap all of this process's own."""
    running = in_a_fresh_process(f"""
        import json, sys
        from multiprocessing import forkserver

        class Watch:  # notes, as the first command module is looked for, whether the server runs
            seen = None
            def find_spec(self, name, path=None, target=None):
                if name == "coordinator.cli.ask" and Watch.seen is None:
                    Watch.seen = forkserver._forkserver._forkserver_pid is not None
                return None

        sys.meta_path.insert(0, Watch())
        sys.argv = ["research", "ask", {STORY!r}]
        import coordinator.cli
        print(json.dumps(Watch.seen))
    """)
    assert running is True


def test_the_installed_script_asks_with_its_sources_forked(settings: SourceSettings, tmp_path: Path) -> None:
    """The console script `pip install` writes is a file: each process the fork server forks runs it
    again (as ``__mp_main__``, with this command line) to rebuild its main module, and must not try a
    head start of its own there, or every source dies before it answers."""
    script = Path(sys.executable).parent / "research"
    environment = {
        **os.environ,
        **private_settings(settings, tmp_path / "data").child_environment(),
        "COLUMNS": "200",
    }
    done = subprocess.run(
        [str(script), "ask", "refund 45 quid on ORD-10031?"],
        env=environment, capture_output=True, text=True, timeout=120,
    )  # fmt: skip
    assert "Traceback" not in done.stderr, done.stderr
    assert done.returncode == 0, done.stdout + done.stderr
    assert "COMPLETE" in done.stdout and "could not be reached" not in done.stdout


@pytest.mark.parametrize(
    ("argv", "collecting"), [(["research", "ask", STORY], False), (["research", "plan", STORY], True)]
)
def test_a_question_over_stdio_loads_without_garbage_collection(argv: list[str], collecting: bool) -> None:
    """What `research ask` loads lives as long as the process: collecting while it loads only walked it
    again and again (``sources.processes.collector``). Other commands collect as they always did."""
    enabled = in_a_fresh_process(f"""
        import gc, json, sys
        sys.argv = {argv!r}
        import coordinator.cli
        print(json.dumps(gc.isenabled()))
    """)
    assert enabled is collecting


# `research ask STORY` as the installed script runs it, saying as it exits (``exit_now``: ``os._exit``)
# how the garbage collector stands.
_ASK_AND_REPORT_THE_COLLECTOR = """
import gc, json, os, sys

leave = os._exit

def report_and_leave(status):
    print(json.dumps({"enabled": gc.isenabled(), "frozen": gc.get_freeze_count()}), flush=True)
    leave(status)

os._exit = report_and_leave
sys.argv = ["research", "ask", sys.argv[1]]
from coordinator.cli import app
app()
"""


def test_a_question_over_stdio_collects_again_once_loaded(settings: SourceSettings, tmp_path: Path) -> None:
    """Held off while it loads, the collector is on for the run, with what was loaded frozen out of its
    sight: a run's own garbage (its sessions, its tasks) is collected as in any process."""
    environment = {
        **os.environ,
        **private_settings(settings, tmp_path / "data").child_environment(),
        "COLUMNS": "200",
    }
    done = subprocess.run(
        [sys.executable, "-c", _ASK_AND_REPORT_THE_COLLECTOR, "refund 45 quid on ORD-10031?"],
        env=environment, capture_output=True, text=True, timeout=120, cwd=Path(__file__).parent.parent,
    )  # fmt: skip
    assert done.returncode == 0, done.stdout + done.stderr
    collector = json.loads(done.stdout.splitlines()[-1])
    assert collector["enabled"] is True
    assert collector["frozen"] > 100_000  # the mcp SDK, pydantic's models, OpenTelemetry, the planner
