"""Traces in local files: the default exporter, and the reader behind `research traces`.

Each process appends one JSON object per finished span to its own file,
``<traces dir>/<service>-<pid>.jsonl``, through the SDK's ``ConsoleSpanExporter`` pointed at that
file (one line per span). One file per process: six processes never interleave their writes.
The folder is 0700 and each file 0600, made so if they were there already: traces hold what queries
asked and what the sources found.
"""

from __future__ import annotations

import json
import os
from collections import defaultdict
from pathlib import Path
from typing import Any

from opentelemetry.sdk.trace import ReadableSpan
from opentelemetry.sdk.trace.export import ConsoleSpanExporter

from sources.private_files import open_private_file, private_folder

__all__ = ["file_exporter", "load_traces"]


def _line(span: ReadableSpan) -> str:
    return json.dumps(json.loads(span.to_json(indent=None)), separators=(",", ":")) + "\n"


class _FileSpanExporter(ConsoleSpanExporter):
    """The SDK's console exporter, writing to a file it closes on shutdown."""

    def shutdown(self) -> None:
        self.out.close()


def _make_private(folder: Path) -> None:
    """Create ``folder`` and whichever of its parents are missing, each 0700: traces hold what queries
    asked and found, and the data folder above them (often made first here) holds the keys."""
    for missing in reversed([each for each in (folder, *folder.parents) if not each.exists()]):
        missing.mkdir(mode=0o700, exist_ok=True)
        missing.chmod(0o700)  # mkdir's mode passes through the umask
    # The folder itself 0700 even if it was there (and its files 0600, if it was open to others);
    # another user's is refused.
    private_folder(folder, contents=True)


def file_exporter(traces_dir: Path, service_name: str) -> ConsoleSpanExporter:
    _make_private(traces_dir)
    handle = open_private_file(traces_dir / f"{service_name}-{os.getpid()}.jsonl", "a")  # line-buffered
    return _FileSpanExporter(service_name=service_name, out=handle, formatter=_line)


def load_traces(traces_dir: Path) -> dict[str, list[dict[str, Any]]]:
    """Every span found under ``traces_dir``, grouped by trace id (32 hex, without 0x)."""
    traces: dict[str, list[dict[str, Any]]] = defaultdict(list)
    if not traces_dir.is_dir():
        return {}
    for path in sorted(traces_dir.glob("*.jsonl")):
        for line in path.read_text(encoding="utf-8", errors="replace").splitlines():
            try:
                span = json.loads(line)
            except json.JSONDecodeError:
                continue  # a line cut short by a killed process: the rest of the file still counts
            trace_id = str(span.get("context", {}).get("trace_id", "")).removeprefix("0x")
            if trace_id:
                traces[trace_id].append(span)
    return dict(traces)
