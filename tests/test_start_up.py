"""Start-up's one boundary (``sources/deferred.py``): what each command loads before it works, and
that no function body imports."""

from __future__ import annotations

import ast
import json
import os
from pathlib import Path
from typing import Any

import pytest

from sources import deferred as deferring
from tests.conftest import PROJECT_ROOT
from tests.fresh_process import in_a_fresh_process

PACKAGES = ("sources", "subagents", "coordinator", "traces")

# What a command loads only when it does its work: about a second together.
HEAVY = (
    "mcp", "anthropic", "networkx", "matplotlib", "ray", "pydantic_settings", "starlette", "uvicorn",
    "opentelemetry.trace",
)  # fmt: skip

# Imports a function body may make, each for a reason an import at the top cannot serve.
FUNCTION_IMPORTS_ALLOWED = {
    "traces/otlp.py": "the OTLP exporter (40 ms) only when OTLP is chosen; traces imports no project package",
    "traces/personal.py": "libphonenumber (50 to 60 ms) only for a text holding a long run of digits; likewise",
}


def test_help_of_the_command_line_loads_neither_an_sdk_nor_pydantic() -> None:
    loaded = in_a_fresh_process(f"""
        import json, sys
        from typer.testing import CliRunner
        from coordinator.cli import app
        result = CliRunner().invoke(app, ["--help"])
        assert result.exit_code == 0, result.output
        print(json.dumps([name for name in {(*HEAVY, "pydantic")!r} if name in sys.modules]))
    """)
    assert loaded == []


def test_every_command_answers_help_and_a_usage_error_without_loading_an_sdk() -> None:
    """Every command and group of `research`, walked from the typer app itself, in one process."""
    outcome = in_a_fresh_process(f"""
        import json, sys, typer
        from typer.testing import CliRunner
        from coordinator.cli import app

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
        print(json.dumps([helped, refused.exit_code, [name for name in {HEAVY!r} if name in sys.modules]]))
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


def test_a_deferred_module_runs_at_its_first_attribute_once_across_threads(tmp_path: Path) -> None:
    """Eight threads read a deferred module at once: it runs once, and none sees it half run."""
    (tmp_path / "counted").mkdir()
    (tmp_path / "counted" / "__init__.py").write_text("")
    (tmp_path / "counted" / "module.py").write_text(
        "import builtins, time\nbuiltins.RUNS += 1\ntime.sleep(0.2)\nVALUE = 42\n"
    )
    outcome = in_a_fresh_process(f"""
        import builtins, json, sys, threading
        sys.path.insert(0, {str(tmp_path)!r})
        builtins.RUNS = 0
        from sources.deferred import deferred
        module = deferred("counted.module")
        before = [builtins.RUNS, "counted" in sys.modules]  # not even its package is imported yet
        values = []
        threads = [threading.Thread(target=lambda: values.append(module.VALUE)) for _ in range(8)]
        for thread in threads:
            thread.start()
        for thread in threads:
            thread.join(10)
        from counted import module as imported  # an ordinary import finds the module that ran
        after = [builtins.RUNS, values, imported.VALUE]
        try:
            deferred("counted.nothing_here").VALUE
        except ModuleNotFoundError as missing:
            after.append(str(missing))
        print(json.dumps([before, after]))
    """)
    assert outcome == [[0, False], [1, [42] * 8, 42, "No module named 'counted.nothing_here'"]]


def test_a_deferred_module_asks_the_import_system_once_and_reads_each_name_afresh(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """A result made reads ``mcp.types`` through a stand-in: the module is looked up once, not on every
    read (two trips through the import machinery per tool call), while a name the module rebinds is seen."""
    asked: list[str] = []
    real_import = deferring.importlib.import_module

    def counting(name: str) -> Any:
        asked.append(name)
        return real_import(name)

    monkeypatch.setattr(deferring.importlib, "import_module", counting)
    stand_in = deferring.deferred("json.decoder")
    first = [stand_in.JSONDecodeError for _ in range(3)]
    monkeypatch.setattr(real_import("json.decoder"), "JSONDecodeError", ValueError)
    assert (first, stand_in.JSONDecodeError, asked) == (
        [json.JSONDecodeError] * 3,
        ValueError,
        ["json.decoder"],
    )


@pytest.mark.parametrize("package", PACKAGES)
def test_importing_a_package_runs_none_of_its_modules(package: str) -> None:
    imported = in_a_fresh_process(f"""
        import json, sys
        import {package}
        print(json.dumps(sorted(name for name in sys.modules if name.startswith("{package}."))))
    """)
    assert imported == []


@pytest.mark.parametrize(("given", "in_effect"), [(None, "__all__"), ("", ""), ("logfire", "logfire")])
def test_the_command_line_looks_for_no_pydantic_plugin_unless_told_to(
    given: str | None, in_effect: str
) -> None:
    """pydantic reads every installed distribution's entry points for its plugins as it builds its first
    model (35 to 50 ms): the command line, and the sources' fork server after it, skip that unless
    PYDANTIC_DISABLE_PLUGINS says otherwise ("" looks for every plugin)."""
    environment = {
        name: value
        for name, value in os.environ.items()
        if name not in ("PYDANTIC_DISABLE_PLUGINS", "ANTHROPIC_API_KEY")
    }
    if given is not None:
        environment["PYDANTIC_DISABLE_PLUGINS"] = given
    outcome = in_a_fresh_process(
        """
        import json, os, sys
        sys.argv = ["research", "plan", "orders of CUST-00042"]
        import coordinator.cli
        import pydantic
        from pydantic.plugin import _loader
        from sources.processes import forked

        class Built(pydantic.BaseModel):
            count: int = 0

        print(json.dumps({
            "in_effect": os.environ.get("PYDANTIC_DISABLE_PLUGINS"),
            "looked": _loader._plugins is not None,
            "fork_server_inherits": forked._inherited().get("PYDANTIC_DISABLE_PLUGINS"),
        }))
        """,
        environment,
    )
    assert outcome == {
        "in_effect": in_effect,
        "looked": in_effect != "__all__",
        "fork_server_inherits": in_effect,
    }
