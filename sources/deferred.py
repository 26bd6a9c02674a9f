"""Start-up's one boundary: modules declared at the top of a file, loaded when first used.

Every `research` command must answer `--help`, or refuse a bad argument, without waiting for the mcp
SDK, pydantic's models or anthropic (about a second together). So a module that needs one of those
declares it at its top, as any import, through ``deferred``:

    if TYPE_CHECKING:
        from coordinator import core
    else:
        core = deferred("coordinator.core")

and the module loads at the first ``core.Coordinator``. The type checker sees the plain import.
Package facades (``from coordinator import Coordinator``) are lazy the other way round, by ``exported``.
``tests/test_start_up.py`` holds both: what each command loads, and that no function imports.

Why not ``importlib.util.LazyLoader``: before Python 3.12 it is not thread-safe (a second thread can
read a module half run: the sources run their tools on worker threads), and it imports a module's
parent packages when declared (a submodule its package never imports, such as faker's locales,
would load the package at once). A stand-in that asks the import system on first use has neither
problem: the import system's own per-module locks serialise the first load.
"""

from __future__ import annotations

import functools
import importlib
from collections.abc import Callable
from pathlib import Path
from types import ModuleType
from typing import TYPE_CHECKING, Any


class deferred(ModuleType):  # a class called as a function, as functools.partial is
    """The module ``name``, imported (once, by the import system) when one of its attributes is first
    read; until then a stand-in whose every attribute read is the real module's.

    The module the import system returns is kept: asking it again on every read cost a tool call two
    trips through the import machinery and its lock (``mcp.types`` in every result made, 5 us). The
    attributes themselves are read from the module each time, so a name it rebinds is seen.
    """

    _module: ModuleType | None = None

    def __getattr__(self, attribute: str) -> Any:  # only for names the stand-in has not: all of them
        module = self._module
        if module is None:
            module = self._module = importlib.import_module(self.__name__)
        return getattr(module, attribute)


def load(*modules: ModuleType) -> None:
    """Load ``modules`` (stand-ins, or modules) now rather than at their first use: on a worker thread,
    a module that takes seconds loads while the event loop runs on (``subagents.claude.load_sdk``)."""
    for module in modules:
        importlib.import_module(module.__name__)


if TYPE_CHECKING:
    import ast
else:
    ast = deferred("ast")  # read only when a package's name is first used


def exported(package: str, source: str) -> Callable[[str], object]:
    """The ``__getattr__`` of ``package`` (its ``__init__`` at ``source``): each name that file imports
    under ``if TYPE_CHECKING:``, from the module it names there; anything else refused.

    For ``subagents`` and ``coordinator``: importing either package costs nothing, while a user
    writes ``from coordinator import Coordinator`` (PEP 562). The type checker's imports are the one
    list of where each name lives, read when a name is first used.
    """

    def __getattr__(name: str) -> object:
        home = homes(source).get(name)
        if home is None:
            raise AttributeError(f"module {package!r} has no attribute {name!r}")
        return getattr(importlib.import_module(home), name)

    return __getattr__


@functools.cache
def homes(source: str) -> dict[str, str]:
    """Each name the Python file at ``source`` imports under ``if TYPE_CHECKING:``, and its module."""
    found: dict[str, str] = {}
    for block in ast.parse(Path(source).read_text(encoding="utf-8")).body:
        if isinstance(block, ast.If) and ast.unparse(block.test) == "TYPE_CHECKING":
            for line in block.body:
                if isinstance(line, ast.ImportFrom) and line.module:
                    found.update((each.name, line.module) for each in line.names)
    return found
