"""The layers hold: imports run ``sources`` <- ``subagents`` <- ``coordinator``; ``traces`` is used by all
and imports none of the three; and no module imports itself back through others.

Every import counts, wherever it is written: at the top, under ``if TYPE_CHECKING:``, in a function
body, and the deferred ones (``deferred("a.module")``, ``importlib.import_module("a.module")``, their
string-literal argument). ``from package import name`` imports ``package.name`` when that is a module,
else ``package``; a package's ``__init__`` is not imported implicitly by its submodules.
"""

from __future__ import annotations

import ast
import textwrap
from dataclasses import dataclass
from pathlib import Path

import networkx as nx

from tests.conftest import PROJECT_ROOT

# The lower the rank, the lower the layer: a module may import its own package or a lower one.
LAYERS = {"traces": 0, "sources": 1, "subagents": 2, "coordinator": 3}
DEFERRING_CALLS = ("deferred", "import_module")


@dataclass(frozen=True)
class Import:
    importer: str
    path: str  # the importer's file, relative to the tree's root
    line: int
    imported: str

    def __str__(self) -> str:
        return f"{self.path}:{self.line} {self.importer} imports {self.imported}"


def modules(root: Path) -> dict[str, Path]:
    """Every module of the four packages under ``root``, by dotted name (a package by its own name)."""
    found = {}
    for package in LAYERS:
        for path in sorted((root / package).rglob("*.py")):
            parts = path.relative_to(root).with_suffix("").parts
            found[".".join(parts[:-1] if parts[-1] == "__init__" else parts)] = path
    return found


def _named(node: ast.AST, package: str, known: dict[str, Path]) -> list[str]:
    """The dotted names ``node`` imports, if it is an import or a deferred import."""
    if isinstance(node, ast.Import):
        return [alias.name for alias in node.names]
    if isinstance(node, ast.ImportFrom):
        base = node.module or ""
        if node.level:
            parts = package.split(".")[: len(package.split(".")) - (node.level - 1)]
            base = ".".join([*parts, base] if base else parts)
        return [f"{base}.{alias.name}" if f"{base}.{alias.name}" in known else base for alias in node.names]
    if isinstance(node, ast.Call) and node.args and isinstance(node.args[0], ast.Constant):
        called = node.func.id if isinstance(node.func, ast.Name) else getattr(node.func, "attr", None)
        if called in DEFERRING_CALLS and isinstance(node.args[0].value, str):
            return [node.args[0].value]
    return []


def _module_of(name: str, known: dict[str, Path]) -> str | None:
    """The project module ``name`` is or lies in (``a.b.Thing`` is ``a.b``); None outside the project."""
    while name and name not in known:
        name = name.rpartition(".")[0]
    return name or None


def imports(root: Path) -> list[Import]:
    """Every import between two modules of the tree under ``root``."""
    known = modules(root)
    found = []
    for module, path in known.items():
        package = module if path.name == "__init__.py" else module.rpartition(".")[0]
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"), str(path))):
            for name in _named(node, package, known):
                imported = _module_of(name, known)
                if imported is not None and imported != module:
                    found.append(Import(module, str(path.relative_to(root)), node.lineno, imported))
    return list(dict.fromkeys(found))  # one per line: `from a import b, c` names `a` twice


def layer_violations(found: list[Import]) -> list[str]:
    """Each import of a higher layer's module (for ``traces``: of any other package's)."""
    return sorted(
        f"{each} (layer {each.importer.partition('.')[0]} may not import {each.imported.partition('.')[0]})"
        for each in found
        if LAYERS[each.imported.partition(".")[0]] > LAYERS[each.importer.partition(".")[0]]
    )


def cycles(found: list[Import]) -> list[str]:
    """Each set of modules that import one another, around, with the imports that close it."""
    graph = nx.DiGraph()
    for each in found:
        graph.add_edge(each.importer, each.imported)
    reported = []
    for component in nx.strongly_connected_components(graph):
        if len(component) > 1:
            inside = sorted(
                str(each) for each in found if each.importer in component and each.imported in component
            )
            reported.append(f"cycle between {', '.join(sorted(component))}:\n    " + "\n    ".join(inside))
    return sorted(reported)


def problems(root: Path) -> list[str]:
    found = imports(root)
    return layer_violations(found) + cycles(found)


def test_the_layers_hold_and_no_module_imports_itself_back() -> None:
    found = problems(PROJECT_ROOT)
    assert not found, "imports against the layers or in a cycle:\n" + "\n".join(found)


def test_the_checker_sees_every_kind_of_import_and_fails(tmp_path: Path) -> None:
    """A synthetic tree with a cycle (relative, deferred and function-body imports), a layer broken
    under ``TYPE_CHECKING`` and by ``importlib.import_module``, and ``traces`` importing a source."""
    files = {
        "sources/__init__.py": "",
        "sources/a.py": "from sources import b\n",
        "sources/b.py": "def later():\n    from . import c\n",
        "sources/c.py": 'from sources.deferred import deferred\nlazy = deferred("sources.a")\n',
        "sources/d.py": "from typing import TYPE_CHECKING\nif TYPE_CHECKING:\n    import subagents.e\n",
        "subagents/__init__.py": "",
        "subagents/e.py": 'import importlib\nimportlib.import_module("coordinator.f")\nimport sources.d\n',
        "coordinator/f.py": "from sources.a import Thing\nfrom traces import g\n",
        "traces/g.py": "import os\n\ndef write():\n    from sources import a\n",
    }
    for name, text in files.items():
        (tmp_path / name).parent.mkdir(parents=True, exist_ok=True)
        (tmp_path / name).write_text(textwrap.dedent(text), encoding="utf-8")

    found = problems(tmp_path)

    assert found[:3] == [
        "sources/d.py:3 sources.d imports subagents.e (layer sources may not import subagents)",
        "subagents/e.py:2 subagents.e imports coordinator.f (layer subagents may not import coordinator)",
        "traces/g.py:4 traces.g imports sources.a (layer traces may not import sources)",
    ]
    assert found[3:] == [
        "cycle between sources.a, sources.b, sources.c:\n"
        "    sources/a.py:1 sources.a imports sources.b\n"
        "    sources/b.py:2 sources.b imports sources.c\n"
        "    sources/c.py:2 sources.c imports sources.a",
        "cycle between sources.d, subagents.e:\n"
        "    sources/d.py:3 sources.d imports subagents.e\n"
        "    subagents/e.py:3 subagents.e imports sources.d",
    ]
    assert "coordinator/f.py:1 coordinator.f imports sources.a" in map(str, imports(tmp_path))
