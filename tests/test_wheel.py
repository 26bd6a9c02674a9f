"""The package as a user installs it: the sdist and the wheel built from it (`python -m build`),
installed with its dependencies into a fresh venv outside the checkout, and run from there.

Every other test runs the editable install, whose finder puts the checkout on the path: a wheel
missing a subpackage or a data file passes them all. Here no checkout is on ``sys.path`` (the cwd is
a temporary folder, ``PYTHONPATH`` unset, the venv made without the project's site-packages), and
the tests assert it. Building and installing take about a minute, once for the module.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import zipfile
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import anyio
import pytest
from mcp import Client, StdioServerParameters

from sources.settings import SourceSettings
from tests.conftest import PROJECT_ROOT, call, wire
from tests.test_coordinator import STORY

pytestmark = [pytest.mark.subprocess, pytest.mark.timeout(600)]

PACKAGES = ("coordinator", "sources", "subagents", "traces")
SOURCES = ("customers", "orders", "billing", "tickets", "kb")


@dataclass(frozen=True)
class Installed:
    """The built wheel, and a venv holding it, entered from ``home`` (a folder outside the checkout)."""

    wheel: Path
    venv: Path
    home: Path

    @property
    def python(self) -> Path:
        return self.venv / "bin" / "python"

    def environment(self, settings: SourceSettings) -> dict[str, str]:
        """This process's environment as a shell in the new venv has it: no checkout on the path."""
        inherited = {
            name: value
            for name, value in os.environ.items()
            if name not in ("PYTHONPATH", "VIRTUAL_ENV", "PYTHONHOME")
        }
        path = os.pathsep.join([str(self.venv / "bin"), inherited.get("PATH", "")])
        return {**inherited, **settings.child_environment(), "PATH": path, "COLUMNS": "200"}

    def run(self, settings: SourceSettings, *command: str) -> subprocess.CompletedProcess[str]:
        return subprocess.run(
            command,
            env=self.environment(settings),
            cwd=self.home,
            capture_output=True,
            text=True,
            timeout=120,
        )


def _checked(command: list[str], cwd: Path) -> None:
    done = subprocess.run(command, cwd=cwd, capture_output=True, text=True, timeout=480)
    assert done.returncode == 0, f"{' '.join(command)}:\n{done.stdout[-3000:]}\n{done.stderr[-3000:]}"


def _fresh_clone(into: Path) -> Path:
    """The checkout's files a clone would hold, with the changes not yet committed: git's tracked and
    untracked files, never its ignored ones (.venv, build/, *.egg-info)."""
    listed = subprocess.run(
        ["git", "ls-files", "--cached", "--others", "--exclude-standard", "-z"],  # noqa: S607 (the user's git, as a clone is)
        cwd=PROJECT_ROOT, capture_output=True, text=True, check=True, timeout=60,
    )  # fmt: skip
    for name in filter(None, listed.stdout.split("\0")):
        source = PROJECT_ROOT / name
        if source.is_file() and not source.is_symlink():  # a file deleted but not yet committed is skipped
            (into / name).parent.mkdir(parents=True, exist_ok=True)
            shutil.copy2(source, into / name)
    return into


@pytest.fixture(scope="module")
def installed(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Installed]:
    root = tmp_path_factory.mktemp("wheel")
    dist, venv, home = root / "dist", root / "venv", root / "home"
    home.mkdir()
    # `build`'s default: the sdist first, then the wheel built from the unpacked sdist, so a file
    # the sdist leaves out is missing from the wheel too. Built from a copy of what a fresh clone holds:
    # the checkout's own `*.egg-info` (left by the editable install) lists every file, and setuptools
    # ships what it lists, so a build in the checkout passes where one from a clone does not.
    clone = _fresh_clone(root / "clone")
    _checked([sys.executable, "-m", "build", "--outdir", str(dist), str(clone)], cwd=root)
    (wheel,) = dist.glob("*.whl")
    # A venv of the base interpreter with nothing of the project's: the dependencies come from the
    # registry (through pip's cache) as a user's do, so an import the metadata does not declare fails.
    _checked([sys.executable, "-m", "venv", str(venv)], cwd=root)
    _checked([str(venv / "bin" / "python"), "-m", "pip", "install", "--quiet", str(wheel)], cwd=home)
    yield Installed(wheel, venv, home)


def test_the_wheel_holds_every_package_and_data_file_of_the_checkout(installed: Installed) -> None:
    with zipfile.ZipFile(installed.wheel) as wheel:
        held = set(wheel.namelist())
    expected = {
        path.relative_to(PROJECT_ROOT).as_posix()
        for package in PACKAGES
        for path in (PROJECT_ROOT / package).rglob("*")
        if path.is_file() and "__pycache__" not in path.parts
    }
    assert sorted(expected - held) == []
    assert {
        "sources/tools.json",
        "sources/records.json",
        "sources/annotations.json",
        "traces/jaeger.yaml",
    } <= held


def test_the_installed_package_is_imported_from_the_venv_not_the_checkout(
    installed: Installed, settings: SourceSettings
) -> None:
    shown = installed.run(
        settings,
        str(installed.python),
        "-c",
        "import json, sys, coordinator.cli, sources.customers; "
        "print(json.dumps([coordinator.cli.__file__, sources.customers.__file__, sys.path, "
        "[type(finder).__name__ for finder in sys.meta_path]]))",
    )
    assert shown.returncode == 0, shown.stderr
    cli, customers, path, finders = json.loads(shown.stdout)
    venv = installed.venv.resolve()
    assert Path(cli).resolve().is_relative_to(venv) and Path(customers).resolve().is_relative_to(venv)
    checkout = PROJECT_ROOT.resolve()
    assert [entry for entry in path if entry and Path(entry).resolve().is_relative_to(checkout)] == []
    assert [finder for finder in finders if "editable" in finder.lower()] == []


def test_research_help_and_sources_list_run_from_the_wheel(
    installed: Installed, settings: SourceSettings
) -> None:
    helped = installed.run(settings, "research", "--help")
    assert helped.returncode == 0, helped.stderr
    assert "ask" in helped.stdout
    listed = installed.run(settings, "research", "sources", "list")
    assert listed.returncode == 0, listed.stderr
    for source in SOURCES:
        assert source in listed.stdout


def test_the_story_query_over_stdio_forks_its_sources_from_the_installed_package(
    installed: Installed, settings: SourceSettings
) -> None:
    asked = installed.run(settings, "research", "ask", STORY, "--json", "--llm", "none")
    assert asked.returncode == 3, asked.stderr  # partial by design: the £750 refund needs a manager
    report = json.loads(asked.stdout)
    assert {task["source"] for task in report["tasks"]} == set(SOURCES)
    answered = {task["source"] for task in report["tasks"] if task["state"] == "ok"}
    assert answered >= {"customers", "orders", "tickets", "kb"}, report["tasks"]
    assert "Traceback" not in asked.stderr


@pytest.mark.anyio
async def test_a_source_starts_as_a_standard_host_starts_it(
    installed: Installed, settings: SourceSettings
) -> None:
    parameters = StdioServerParameters(
        command=str(installed.python),
        args=["-m", "sources.customers"],
        env=installed.environment(settings),
        cwd=str(installed.home),
    )
    with anyio.fail_after(60):
        async with Client(parameters, read_timeout_seconds=30) as client:
            result = await call(client, "customer_lookup", {"identifier": "CUST-00042"})
    assert wire(result)["results"][0]["email"] == "jane.doe@example.com"
