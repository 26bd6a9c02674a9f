"""`research ask` over stdio starts its sources' fork server before the command line's own imports."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from coordinator.cli.head_start import asks_over_stdio
from sources.settings import SourceSettings
from tests.conftest import private_settings
from tests.test_start_up import in_a_fresh_process

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
