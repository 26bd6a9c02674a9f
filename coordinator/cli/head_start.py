"""The fork server started before the command line's own imports, when the command is `research ask`
over stdio with a question.

The sources' imports (the mcp SDK, the sources, what they serve with: about a second of CPU) are the
longest step of the story query, and they need only the second core. Started once typer, rich, the
planner and the mcp client are imported, as `research ask` would otherwise start it, they begin some
0.3 s late; started here, they run beside all of those from the start. Reading the command line
before typer does is a guess, not a parse: a guess that is wrong either way costs no correctness
(`ask` starts the fork server itself if it is not running, and an unused one leaves with this
process), only the head start or the second core's time.
"""

from __future__ import annotations

import itertools
import sys
from collections.abc import Sequence
from typing import TYPE_CHECKING

from coordinator.cli.command_modules import named_command
from sources.deferred import deferred

if TYPE_CHECKING:
    from sources.processes import forked
else:
    forked = deferred("sources.processes.forked")  # multiprocessing and the settings: `ask` only

__all__ = ["asks_over_stdio", "start_sources_early"]

# `--transport http` as typer takes it (``common.Transport``, not imported: it brings typer along).
_OVER_HTTP = ("--transport http", "--transport=http")


def start_sources_early(argv: Sequence[str]) -> bool:
    """Start the fork server now when ``argv`` (``sys.argv``) asks a question over stdio; whether it did."""
    if not asks_over_stdio(argv) or _preparing_a_forked_child():
        return False
    forked.prestart()
    return True


def _preparing_a_forked_child() -> bool:
    """Whether this import is multiprocessing rebuilding a forked process's main module: a child of the
    fork server (and the fork server itself) runs the command's script again as ``__mp_main__``, with
    the parent's ``sys.argv``. The head start is the parent's; a child that tried it would fail
    (a process still starting may not start others)."""
    rebuilt = sys.modules.get("__mp_main__")
    return rebuilt is not None and rebuilt is not sys.modules.get("__main__")


def asks_over_stdio(argv: Sequence[str]) -> bool:
    """Whether ``argv`` reads as `research ask QUESTION` on spawned sources: the `ask` command with a
    question (a non-empty argument, or ``-`` for stdin), neither its help nor the running fleet."""
    named = named_command(argv)
    if named is None or named.name != "ask" or any(a in ("--help", "-h") for a in named.arguments):
        return False
    if any(a in _OVER_HTTP for a in _pairs(named.arguments)):
        return False
    return any(a == "-" or (a.strip() and not a.startswith("-")) for a in named.arguments)


def _pairs(arguments: list[str]) -> list[str]:
    """Each argument, and each with the one after it ("--transport http" as one)."""
    return [*arguments, *(f"{a} {b}" for a, b in itertools.pairwise(arguments))]
