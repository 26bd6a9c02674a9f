"""A command named on the command line loads only the modules that register it
(``coordinator.cli.command_modules``), and is then the same command it is with every module loaded."""

from __future__ import annotations

import pytest

from coordinator.cli.command_modules import COMMAND_MODULES, NamedCommand, named_command
from tests.fresh_process import in_a_fresh_process

# The click tree typer builds from ``coordinator.cli.app``: each command's path, its parameters'
# names, and its help, walked in a fresh process that set ``sys.argv`` before importing the app (and,
# for the whole tree, imported every module of ``coordinator.cli`` after it).
_TREE_AFTER_ARGV = """
    import json, sys
    sys.argv = {argv!r}
    import importlib, pkgutil, typer.main
    import coordinator.cli
    from coordinator.cli import app
    if {every!r}:  # every module of the package, whether the map names it or not
        for module in pkgutil.iter_modules(coordinator.cli.__path__, "coordinator.cli."):
            importlib.import_module(module.name)

    def walk(command, path):
        yield " ".join(path), [parameter.name for parameter in command.params], command.help
        for name, sub in sorted(getattr(command, "commands", {{}}).items()):
            yield from walk(sub, [*path, name])

    root = typer.main.get_command(app)
    loaded = sorted(name.rsplit(".", 1)[1] for name in sys.modules if name.startswith("coordinator.cli."))
    print(json.dumps({{"tree": list(walk(root, [])), "loaded": loaded}}))
"""


def _tree(argv: list[str], *, every: bool = False) -> dict:
    return in_a_fresh_process(_TREE_AFTER_ARGV.format(argv=argv, every=every))


@pytest.fixture(scope="module")
def every_command() -> dict:
    return _tree(["research", "--help"], every=True)


def test_every_top_level_command_is_named_with_its_modules(every_command: dict) -> None:
    top_level = {path.split(" ")[0] for path, _, _ in every_command["tree"] if path}
    assert top_level == set(COMMAND_MODULES)


@pytest.mark.parametrize("name", sorted(COMMAND_MODULES))
def test_a_named_command_alone_is_the_command_it_is_among_all(name: str, every_command: dict) -> None:
    """The same subcommands, parameters and help; and no other command's module loaded."""
    alone = _tree(["research", "--sources", "research.toml", name, "--json"])

    def under(tree: list) -> list:
        return [entry for entry in tree if entry[0] == name or entry[0].startswith(f"{name} ")]

    assert under(every_command["tree"]), f"no command {name}"
    assert under(alone["tree"]) == under(every_command["tree"])
    every_module = {module for modules in COMMAND_MODULES.values() for module in modules}
    assert set(alone["loaded"]) & every_module == set(COMMAND_MODULES[name]) | _imported_by(name)


def _imported_by(name: str) -> set[str]:
    """Command modules a command's own module imports (`sources call` runs a task as `research task` does)."""
    return {"task"} if name == "sources" else set()


@pytest.mark.parametrize(
    ("argv", "named"),
    [
        (["research", "ask", "why?"], NamedCommand("ask", ["why?"])),
        (["research", "ask"], NamedCommand("ask", [])),
        (["research", "--sources", "mine.toml", "ask", "--json", "q"], NamedCommand("ask", ["--json", "q"])),
        (["research", "--sources=mine.toml", "sources", "list"], NamedCommand("sources", ["list"])),
        (
            ["research", "--sources", "a.toml", "--sources", "b.toml", "plan", "q"],
            NamedCommand("plan", ["q"]),
        ),
        (["research", "--sources", "ask", "plan", "q"], NamedCommand("plan", ["q"])),  # "ask" is the file
        (["research", "plan", "ask"], NamedCommand("plan", ["ask"])),
    ],
)
def test_the_command_a_command_line_names(argv: list[str], named: NamedCommand) -> None:
    assert named_command(argv) == named


@pytest.mark.parametrize(
    "argv",
    [
        ["research"],
        ["research", "--help"],
        ["research", "--show-completion"],
        ["research", "--sources"],
        ["research", "--sources", "ask"],  # the file is named "ask"; no command follows
        ["research", "-x", "ask", "q"],  # an option the root does not have: typer says so
        ["research", "aks", "q"],  # a mistyped command: typer names the commands there are
        ["research", "ASK", "q"],
        ["research", ""],
    ],
)
def test_no_command_is_named_where_the_reading_is_unsure(argv: list[str]) -> None:
    assert named_command(argv) is None
