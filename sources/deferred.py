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

import importlib
from collections.abc import Callable, Mapping
from types import ModuleType
from typing import Any


class deferred(ModuleType):  # a class called as a function, as functools.partial is
    """The module ``name``, imported (once, by the import system) when one of its attributes is first
    read; until then a stand-in whose every attribute read is the real module's."""

    def __getattr__(self, attribute: str) -> Any:  # only for names the stand-in has not: all of them
        return getattr(importlib.import_module(self.__name__), attribute)


def exported(package: str, homes: Mapping[str, str]) -> Callable[[str], object]:
    """The ``__getattr__`` of ``package``: each name of ``homes`` from its module, anything else refused.

    For ``subagents`` and ``coordinator``: importing either package costs nothing, while a user
    writes ``from coordinator import Coordinator`` (PEP 562).
    """

    def __getattr__(name: str) -> object:
        if name not in homes:
            raise AttributeError(f"module {package!r} has no attribute {name!r}")
        return getattr(importlib.import_module(homes[name]), name)

    return __getattr__
