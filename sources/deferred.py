"""Start-up's one boundary: modules declared at the top of a file, loaded when first used.

Every `research` command must answer `--help`, or refuse a bad argument, without waiting for the mcp
SDK, pydantic's models or anthropic (about a second together). So a module that needs one of those
declares it at its top, as any import, through ``deferred``:

    if TYPE_CHECKING:
        from coordinator import core
    else:
        core = deferred("coordinator.core")

and the module loads at the first ``core.Coordinator``. This is the standard library's
``importlib.util.LazyLoader``; the type checker sees the plain import. Package facades
(``from coordinator import Coordinator``) are lazy the other way round, by ``exported``.
``tests/test_start_up.py`` holds both: what each command loads, and that no function imports.
"""

from __future__ import annotations

import importlib
import importlib.util
import sys
from collections.abc import Callable, Mapping
from types import ModuleType


def deferred(name: str) -> ModuleType:
    """The module ``name``, its code run when one of its attributes is first read."""
    if name in sys.modules:
        return sys.modules[name]
    spec = importlib.util.find_spec(name)  # imports the parent packages: each is a light facade
    if spec is None or spec.loader is None:
        raise ModuleNotFoundError(f"No module named {name!r}", name=name)
    spec.loader = importlib.util.LazyLoader(spec.loader)
    module = importlib.util.module_from_spec(spec)
    sys.modules[name] = module
    spec.loader.exec_module(module)
    parent, _, child = name.rpartition(".")
    if parent:  # as the import system does, so `from parent import child` finds it
        setattr(sys.modules[parent], child, module)
    return module


def loaded(name: str) -> bool:
    """Whether the module ``name`` has run: a deferred one is in ``sys.modules`` before it has."""
    module = sys.modules.get(name)
    # importlib.util.LazyLoader gives a module not yet run a class of its own, which it does not export.
    return module is not None and type(module).__name__ != "_LazyModule"


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
