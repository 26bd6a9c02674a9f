"""Each package's public surface: every name it exports is its home module's, imported when first used."""

from __future__ import annotations

import importlib
import json
import subprocess
import sys

import pytest

from sources.deferred import homes
from tests.conftest import PROJECT_ROOT

PACKAGES = ("coordinator", "subagents")


@pytest.mark.parametrize("package", PACKAGES)
def test_every_exported_name_is_the_object_of_its_home_module(package: str) -> None:
    module = importlib.import_module(package)
    assert module.__file__
    imported_for_the_type_checker = homes(module.__file__)
    assert sorted(imported_for_the_type_checker) == sorted(module.__all__)
    for name in module.__all__:
        home = importlib.import_module(imported_for_the_type_checker[name])
        assert getattr(module, name) is getattr(home, name), name
    with pytest.raises(AttributeError, match="no attribute 'nothing_here'"):
        module.nothing_here  # noqa: B018


def test_importing_the_packages_imports_no_sdk_until_a_name_is_used() -> None:
    code = (
        "import json, sys\n"
        "import coordinator, subagents\n"
        "before = [name for name in ('mcp', 'anthropic', 'networkx') if name in sys.modules]\n"
        "coordinator.Coordinator\n"
        "print(json.dumps([before, 'mcp' in sys.modules]))\n"
    )
    done = subprocess.run(
        [sys.executable, "-c", code], cwd=PROJECT_ROOT, capture_output=True, text=True, timeout=120
    )
    assert done.returncode == 0, done.stderr
    before, mcp_after = json.loads(done.stdout)
    assert before == [] and mcp_after  # the name used brought what it needs
