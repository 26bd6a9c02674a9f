"""`research ask` over stdio starts its sources' fork server before the command line's own imports."""

from __future__ import annotations

import pytest

from coordinator.cli.head_start import asks_over_stdio
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
