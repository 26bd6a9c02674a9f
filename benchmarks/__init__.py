"""What the benchmark scripts share (``run_all.py`` runs every other module of this folder as one)."""

from __future__ import annotations

import json
import subprocess
import threading

from sources.processes.serve import READY_PREFIX

__all__ = ["served_url"]


def served_url(process: subprocess.Popen[str]) -> str:
    """The URL a source or service started with ``--port 0`` says it serves at (its ready line, on
    standard error); the rest of its log is read and dropped from then on, so a full pipe never stalls it."""
    assert process.stderr is not None, "started with stderr=subprocess.PIPE"
    url = next(
        str(json.loads(line.removeprefix(READY_PREFIX))["url"])
        for line in process.stderr
        if line.startswith(READY_PREFIX)
    )
    threading.Thread(target=process.stderr.read, daemon=True).start()
    return url
