"""Start-up's one boundary (``sources/deferred.py``): what each command loads before it works, and
that no function body imports."""

from __future__ import annotations

import ast
import json
import os
import subprocess
import sys
import textwrap
from pathlib import Path
from typing import Any

import pytest

from tests.conftest import PROJECT_ROOT

PACKAGES = ("sources", "subagents", "coordinator", "traces")

# What a command loads only when it does its work: about a second together.
HEAVY = (
    "mcp", "anthropic", "networkx", "matplotlib", "ray", "pydantic_settings", "starlette", "uvicorn",
    "opentelemetry.sdk.trace",
)  # fmt: skip

# Imports a function body may make, each for a reason an import at the top cannot serve. A submodule
# its package does not import itself cannot be deferred without loading the package at once.
FUNCTION_IMPORTS_ALLOWED = {
    "coordinator/planning/reading.py": "faker's locale providers, submodules of faker (0.1 s), for a first name",
    "subagents/tool_loop.py": "anthropic.lib.tools.mcp, a submodule of the anthropic SDK (1.3 s), in Claude mode",
    "traces/otlp.py": "the OTLP exporter (40 ms) only when OTLP is chosen; traces imports no project package",
}


def in_a_fresh_process(code: str) -> Any:
    """Run ``code`` in a new interpreter (nothing imported yet) and return the JSON it prints last."""
    environment = {name: value for name, value in os.environ.items() if name != "ANTHROPIC_API_KEY"}
    done = subprocess.run(
        [sys.executable, "-c", textwrap.dedent(code)], env=environment, cwd=PROJECT_ROOT,
        capture_output=True, text=True, timeout=120,
    )  # fmt: skip
    assert done.returncode == 0, done.stderr
    return json.loads(done.stdout.splitlines()[-1])


def test_help_of_the_command_line_loads_neither_an_sdk_nor_pydantic() -> None:
    loaded = in_a_fresh_process(f"""
        import json, sys
        from typer.testing import CliRunner
        from coordinator.cli import app
        from sources.deferred import loaded
        result = CliRunner().invoke(app, ["--help"])
        assert result.exit_code == 0, result.output
        print(json.dumps([name for name in {(*HEAVY, "pydantic")!r} if loaded(name)]))
    """)
    assert loaded == []


def test_every_command_answers_help_and_a_usage_error_without_loading_an_sdk() -> None:
    """Every command and group of `research`, walked from the typer app itself, in one process."""
    outcome = in_a_fresh_process(f"""
        import json, click, typer
        from typer.testing import CliRunner
        from coordinator.cli import app
        from sources.deferred import loaded

        def paths(command, path=()):
            yield path
            for name, child in getattr(command, "commands", {{}}).items():
                yield from paths(child, (*path, name))

        runner, helped = CliRunner(), []
        for path in paths(typer.main.get_command(app)):
            result = runner.invoke(app, [*path, "--help"])
            assert result.exit_code == 0, (path, result.output)
            helped.append(" ".join(path))
        refused = runner.invoke(app, ["ask", ""])
        print(json.dumps([helped, refused.exit_code, [name for name in {HEAVY!r} if loaded(name)]]))
    """)
    helped, refused_exit, heavy = outcome
    # One command of each module of coordinator/cli: a module deferred by mistake registers none.
    each_module = {
        "ask",
        "batch",
        "chaos run",
        "compare",
        "plan",
        "replay",
        "sources up",
        "sources add",
        "task",
    }
    assert each_module | {"traces show"} <= set(helped)
    assert refused_exit == 2
    assert heavy == []


def _function_imports(path: Path) -> list[str]:
    tree = ast.parse(path.read_text(encoding="utf-8"))
    found = []
    for function in ast.walk(tree):
        if isinstance(function, ast.FunctionDef | ast.AsyncFunctionDef):
            for node in ast.walk(function):
                if isinstance(node, ast.Import | ast.ImportFrom):
                    found.append(f"{path.relative_to(PROJECT_ROOT)}:{node.lineno} {ast.unparse(node)}")
    return found


def test_no_function_body_imports_a_module() -> None:
    """Imports are declared at the top, deferred there when start-up needs it (``sources.deferred``)."""
    found = [
        site
        for package in PACKAGES
        for path in sorted((PROJECT_ROOT / package).rglob("*.py"))
        for site in _function_imports(path)
        if site.split(":")[0] not in FUNCTION_IMPORTS_ALLOWED
    ]
    assert found == []
    allowed = {
        site.split(":")[0]
        for path in map(PROJECT_ROOT.joinpath, FUNCTION_IMPORTS_ALLOWED)
        for site in _function_imports(path)
    }
    assert allowed == set(FUNCTION_IMPORTS_ALLOWED)  # no exception outlives its reason


def test_a_deferred_module_runs_at_its_first_attribute_once(tmp_path: Path) -> None:
    (tmp_path / "counted").mkdir()
    (tmp_path / "counted" / "__init__.py").write_text("")
    (tmp_path / "counted" / "module.py").write_text("import builtins\nbuiltins.RUNS += 1\nVALUE = 42\n")
    outcome = in_a_fresh_process(f"""
        import builtins, json, sys
        sys.path.insert(0, {str(tmp_path)!r})
        builtins.RUNS = 0
        from sources.deferred import deferred, loaded
        module = deferred("counted.module")
        before = [builtins.RUNS, loaded("counted.module")]
        value = module.VALUE
        from counted import module as imported  # an ordinary import finds the same module
        after = [builtins.RUNS, loaded("counted.module"), value, imported.VALUE, imported is module]
        try:
            deferred("counted.nothing_here")
        except ModuleNotFoundError as missing:
            after.append(str(missing))
        print(json.dumps([before, after]))
    """)
    assert outcome == [[0, False], [1, True, 42, 42, True, "No module named 'counted.nothing_here'"]]


@pytest.mark.parametrize("package", PACKAGES)
def test_importing_a_package_runs_none_of_its_modules(package: str) -> None:
    imported = in_a_fresh_process(f"""
        import json, sys
        import {package}
        print(json.dumps(sorted(name for name in sys.modules if name.startswith("{package}."))))
    """)
    assert imported == []
