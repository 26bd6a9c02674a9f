"""Code run in a new interpreter, nothing imported yet: what a command or a module loads on its own."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import textwrap
from collections.abc import Mapping
from typing import Any

from tests.conftest import PROJECT_ROOT

__all__ = ["in_a_fresh_process"]


def in_a_fresh_process(code: str, environment: Mapping[str, str] | None = None) -> Any:
    """Run ``code`` (dedented) in a new interpreter and return the JSON it prints last. Its environment
    is ``environment``, or this one's without an API key (the deterministic mode whatever the shell has)."""
    if environment is None:
        environment = {name: value for name, value in os.environ.items() if name != "ANTHROPIC_API_KEY"}
    done = subprocess.run(
        [sys.executable, "-c", textwrap.dedent(code)], env=dict(environment), cwd=PROJECT_ROOT,
        capture_output=True, text=True, timeout=120,
    )  # fmt: skip
    assert done.returncode == 0, done.stderr
    return json.loads(done.stdout.splitlines()[-1])
