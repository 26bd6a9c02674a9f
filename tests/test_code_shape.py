"""The shape the code keeps: short functions, commented type ignores, each domain fact written once.

These read the source, not its behaviour: a reviewer's checks, run on every change.
"""

from __future__ import annotations

import ast
import re
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
PACKAGES = ("coordinator", "sources", "subagents", "traces")
MAX_OWN_LINES = 60
MODULES = sorted(path for package in PACKAGES for path in (ROOT / package).rglob("*.py"))


def _own_lines(function: ast.FunctionDef | ast.AsyncFunctionDef) -> int:
    """A function's lines from ``def`` to its end, less those of the functions and classes inside it."""
    lines = set(range(function.lineno, (function.end_lineno or function.lineno) + 1))
    for node in ast.walk(function):
        if node is not function and isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef | ast.ClassDef):
            lines -= set(range(node.lineno, (node.end_lineno or node.lineno) + 1))
    return len(lines)


def test_the_packages_are_found() -> None:
    assert len(MODULES) > 50


@pytest.mark.parametrize("path", MODULES, ids=lambda path: str(path.relative_to(ROOT)))
def test_no_function_is_longer_than_the_limit(path: Path) -> None:
    tree = ast.parse(path.read_text(encoding="utf-8"))
    long = [
        f"{node.name} (line {node.lineno}): {_own_lines(node)} lines"
        for node in ast.walk(tree)
        if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef) and _own_lines(node) > MAX_OWN_LINES
    ]
    assert long == [], f"over {MAX_OWN_LINES} lines of their own: {long}"


_IGNORE = re.compile(r"#\s*type:\s*ignore(?P<code>\[[a-z-, ]+\])?(?P<rest>.*)$")


def test_every_type_ignore_names_its_code_and_says_why() -> None:
    unexplained = []
    for path in MODULES:
        lines = path.read_text(encoding="utf-8").splitlines()
        for number, line in enumerate(lines, 1):
            found = _IGNORE.search(line)
            if found is None:
                continue
            said_why = "#" in found["rest"] or lines[number - 2].strip().startswith("#")
            if not found["code"] or not said_why:
                unexplained.append(f"{path.relative_to(ROOT)}:{number}")
    assert unexplained == []


def _string_constants(path: Path) -> list[tuple[int, str]]:
    tree = ast.parse(path.read_text(encoding="utf-8"))
    return [
        (node.lineno, node.value)
        for node in ast.walk(tree)
        if isinstance(node, ast.Constant) and isinstance(node.value, str)
    ]


@pytest.mark.parametrize(
    ("fact", "pattern", "home"),
    [
        ("the automatic refund limit", re.compile(r"£\s?500\b"), "sources/domain.py"),
        ("the refund window", re.compile(r"\b60[- ]day"), "sources/domain.py"),
    ],
)
def test_a_domain_fact_is_written_in_one_module(fact: str, pattern: re.Pattern[str], home: str) -> None:
    """Texts that state a rule (tool descriptions, policies, messages) build it from the one constant."""
    elsewhere = [
        f"{path.relative_to(ROOT)}:{line}"
        for path in MODULES
        if str(path.relative_to(ROOT)) != home
        for line, text in _string_constants(path)
        if pattern.search(text)
    ]
    assert elsewhere == [], f"{fact} is written outside {home}"


def _called(path: Path) -> set[str]:
    """The names a module calls (``f(...)`` and ``x.f(...)``)."""
    names = set()
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
        if isinstance(node, ast.Call):
            function = node.func
            names.add(function.id if isinstance(function, ast.Name) else getattr(function, "attr", ""))
    return names


# Every way the coordinator runs subagents: ask, batch (its local and Ray workers run one question
# through batch/work.py), the service, chaos (a scenario and the soak), `research task`, replay.
# compare runs chaos scenarios.
ENTRY_POINTS = (
    "coordinator/cli/ask.py",
    "coordinator/batch/work.py",
    "coordinator/service.py",
    "coordinator/chaos/runner.py",
    "coordinator/chaos/soak.py",
    "coordinator/cli/task.py",
    "coordinator/replay.py",
)


def test_every_run_goes_through_the_coordinator_and_its_runtime_is_built_in_one_place() -> None:
    """Subagents run only through a ``Coordinator``, on a runtime ``build_runtime`` assembled with the
    refund guard, the write guard and the allowed-tools hook: no module of the coordinator builds a
    ``Runtime`` itself, only ``coordinator.core`` assembles one or runs subagents or a plan, every
    entry point makes a ``Coordinator``, and what the guards need (the registry, the data folder,
    the writes the question asks for, the approvals a person gave) has no default."""
    import inspect

    from coordinator.runtime import build_runtime

    coordinator = sorted((ROOT / "coordinator").rglob("*.py"))
    for path in coordinator:
        called, name = _called(path), str(path.relative_to(ROOT))
        assert "Runtime" not in called or name == "coordinator/runtime.py", name
        if called & {"run_subagent", "run_plan", "build_runtime"}:
            assert name in ("coordinator/core.py", "coordinator/run.py"), name  # run.py is handed one
    runs = {str(p.relative_to(ROOT)) for p in coordinator if "Coordinator" in _called(p)}
    assert runs == set(ENTRY_POINTS)
    parameters = inspect.signature(build_runtime).parameters
    for needed in ("registry", "data_dir", "asked", "approvals"):
        assert parameters[needed].default is inspect.Parameter.empty, needed


def test_the_drivers_assign_no_recovery_state() -> None:
    """A run's state is the recovery machine's (``recovery.transition``): the drivers carry out its
    steps, and the one place they take a new state is ``Subagent.feed``, from the machine."""
    assigned: list[str] = []
    for driver in ("subagents/subagent.py", "subagents/tool_loop.py"):
        tree = ast.parse((ROOT / driver).read_text())
        for function in ast.walk(tree):
            if not isinstance(function, ast.FunctionDef | ast.AsyncFunctionDef):
                continue
            for node in ast.walk(function):
                targets = node.targets if isinstance(node, ast.Assign) else []
                targets += [node.target] if isinstance(node, ast.AugAssign | ast.AnnAssign) else []
                for target in targets:
                    for part in ast.walk(target):
                        if isinstance(part, ast.Attribute) and part.attr == "state":
                            assigned.append(f"{driver}:{node.lineno} {function.name}")
    assert [line.split()[-1] for line in assigned] == ["__init__", "feed"], assigned
