"""Which modules register which commands, so that a command named on the command line loads only its own.

Before it parses a command line, typer builds a click command for every command it was given: it reads
each one's signature and type hints (about 30 ms for the 25 here, on 2 cores), after their modules
have imported what their commands declare (10 ms more). click's answer for a large command line is
to load subcommands lazily (its documentation's "Lazily Loading Subcommands"); typer builds the whole
tree at once, so the choice is made here, before typer is given the app: `research ask ...` imports
``coordinator.cli.ask`` alone, and typer builds `ask` alone.

The command line is read before typer reads it, so the reading gives up on anything it does not
know: before the command's name only the root's own option (``--sources FILE``) is passed over; any
other option (``--help``, typer's completion options), a word that names no command, or no word at
all loads every module, and typer parses it as it always has. A command's own arguments are its own
to parse. This module imports only the standard library: it runs before everything else.
"""

from __future__ import annotations

import importlib
from collections.abc import Sequence
from typing import NamedTuple

__all__ = ["COMMAND_MODULES", "NamedCommand", "load_commands", "named_command"]

# Each top-level command (or group) and the modules of ``coordinator.cli`` that register it.
COMMAND_MODULES: dict[str, tuple[str, ...]] = {
    "ask": ("ask",),
    "batch": ("batch",),
    "chaos": ("chaos",),
    "compare": ("compare",),
    "plan": ("plan",),
    "replay": ("replay",),
    "sources": ("sources", "sources_registry"),
    "task": ("task",),
    "traces": ("traces",),
}
_ROOT_OPTION = "--sources"  # the root callback's one option, which takes a value (``common._every_command``)


class NamedCommand(NamedTuple):
    """A command named on the command line, and the arguments after its name."""

    name: str
    arguments: list[str]


def named_command(argv: Sequence[str]) -> NamedCommand | None:
    """The command ``argv`` (``sys.argv``) names, when it certainly names one of ``COMMAND_MODULES``."""
    arguments = list(argv[1:])
    while arguments:  # the root's option, as many times as it is given (typer keeps the last)
        if arguments[0] == _ROOT_OPTION and len(arguments) > 1:
            del arguments[:2]
        elif arguments[0].startswith(f"{_ROOT_OPTION}="):
            del arguments[0]
        else:
            break
    if not arguments or arguments[0] not in COMMAND_MODULES:
        return None
    return NamedCommand(arguments[0], arguments[1:])


def load_commands(argv: Sequence[str]) -> None:
    """Import the command modules ``argv`` needs (each registers its commands on ``common.app``):
    the named command's own, or every one."""
    named = named_command(argv)
    if named is not None:
        chosen = COMMAND_MODULES[named.name]
    else:
        chosen = tuple(module for modules in COMMAND_MODULES.values() for module in modules)
    for module in chosen:
        importlib.import_module(f"coordinator.cli.{module}")
