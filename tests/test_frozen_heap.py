"""A source serves with what it loaded and built frozen out of the garbage collector's sight
(``sources.processes.serve``): a full collection then walks what its calls made, not the whole heap."""

from __future__ import annotations

import json
import subprocess
import sys
import textwrap

from sources.settings import SourceSettings
from tests.conftest import PROJECT_ROOT, child_environment


def test_a_stdio_source_serves_with_its_start_up_frozen(settings: SourceSettings) -> None:
    """Where the source would start serving, the objects of its imports, server and data are frozen:
    few are left in the collector's sight."""
    code = textwrap.dedent("""
        import gc, json, sys
        import anyio
        from sources import kb
        from sources.processes import serve
        from sources.settings import SourceSettings

        def instead_of_serving(_: object) -> None:
            sys.stdout.write(json.dumps([gc.get_freeze_count(), len(gc.get_objects())]) + "\\n")
            sys.stdout.flush()

        anyio.run = instead_of_serving
        serve.serve_stdio(kb.create_server, "kb", SourceSettings.from_environment())
    """)
    done = subprocess.run(
        [sys.executable, "-c", code], env=child_environment(settings), cwd=PROJECT_ROOT,
        capture_output=True, text=True, timeout=120,
    )  # fmt: skip
    assert done.returncode == 0, done.stderr
    frozen, in_sight = json.loads(done.stdout.splitlines()[-1])
    assert frozen > 50_000 and in_sight < frozen / 20, (frozen, in_sight)
