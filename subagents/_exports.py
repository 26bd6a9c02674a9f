"""A package's public names, each imported from its home module when first used (PEP 562).

For ``subagents`` and ``coordinator``: importing either package must cost nothing (every `research`
command imports ``coordinator``; `research --help` must not wait for the mcp SDK), while a user
writes ``from coordinator import Coordinator``.
"""

from __future__ import annotations

import importlib
from collections.abc import Callable, Mapping


def exported(package: str, homes: Mapping[str, str]) -> Callable[[str], object]:
    """The ``__getattr__`` of ``package``: each name of ``homes`` from its module, anything else refused."""

    def __getattr__(name: str) -> object:
        if name not in homes:
            raise AttributeError(f"module {package!r} has no attribute {name!r}")
        return getattr(importlib.import_module(homes[name]), name)

    return __getattr__
