"""Traces in local files: the default exporter, and the reader behind `research traces`.

Each process appends one JSON object per finished span to its own file,
``<traces dir>/<service>-<pid>.jsonl``, through the SDK's ``ConsoleSpanExporter`` pointed at that
file (one line per span). One file per process: six processes never interleave their writes.
The folder is 0700 and each file 0600, made so if they were there already: traces hold what queries
asked and what the sources found.
"""

from __future__ import annotations

import json
import math
import os
from collections import defaultdict
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import pydantic_core
from opentelemetry.sdk.resources import Resource
from opentelemetry.sdk.trace import ReadableSpan, SpanProcessor
from opentelemetry.sdk.trace.export import ConsoleSpanExporter
from opentelemetry.trace import SpanContext, SpanKind, StatusCode, TraceState

from traces.private_files import open_private_file, private_folder

__all__ = ["LinesAsSpansEnd", "file_exporter", "load_traces", "span_line", "span_line_bytes"]


_COMPACT = (",", ":")


def span_line(span: ReadableSpan) -> str:
    """One span as one line of JSON: the object ``ReadableSpan.to_json`` makes, written compactly.

    Built here rather than through ``to_json`` (which encodes the resource anew for every span, and
    whose spaced output was decoded and encoded again) because a source writes a line per call, as
    the call ends (``traces.setup``): this takes 10 µs where that took 45 µs (``tests/test_traces.py``
    holds the line to ``to_json``'s object).
    """
    return span_line_bytes(span).decode()


def span_line_bytes(span: ReadableSpan) -> bytes:
    """``span_line`` as the UTF-8 bytes a file holds: what a source writes, never decoded and encoded again.

    A source builds one per call, on the call's path, so the pieces that repeat are looked up, not
    made again: the kind's and the status's names, an empty trace state's text, the date and time of
    the current second (``_iso``).
    """
    context, parent, status = span.get_span_context(), span.parent, span.status
    status_line = {"status_code": _STATUS_NAMES[status.status_code]}
    if status.description:
        status_line["description"] = status.description
    attributes = span.attributes
    head = {
        "name": span.name,
        "context": _context(context) if context else None,
        "kind": _KIND_NAMES[span.kind],
        "parent_id": None if parent is None else f"0x{parent.span_id:016x}",
        "start_time": _iso(span.start_time),
        "end_time": _iso(span.end_time),
        "status": status_line,
        "attributes": None if attributes is None else dict(attributes),
        "events": [
            {
                "name": event.name,
                "timestamp": _iso(event.timestamp),
                "attributes": None if event.attributes is None else dict(event.attributes),
            }
            for event in span.events
        ],
        "links": [
            {
                "context": _context(link.context),
                "attributes": None if link.attributes is None else dict(link.attributes),
            }
            for link in span.links
        ],
    }
    encoded = pydantic_core.to_json(head)  # compact, as json.dumps with _COMPACT; 2 us sooner
    return encoded[:-1] + _resource_json(span.resource)


_KIND_NAMES = {kind: str(kind) for kind in SpanKind}  # "SpanKind.SERVER", as ``to_json`` writes a kind
_STATUS_NAMES = {code: code.name for code in StatusCode}
_EMPTY_TRACE_STATE = repr(TraceState())


def _context(context: SpanContext) -> dict[str, str]:
    trace_state = context.trace_state
    return {
        "trace_id": f"0x{context.trace_id:032x}",
        "span_id": f"0x{context.span_id:016x}",
        "trace_state": repr(trace_state) if trace_state else _EMPTY_TRACE_STATE,
    }


_second: tuple[int, str] = (0, "1970-01-01T00:00:00")  # the latest whole second written, and its text


def _iso(nanoseconds: int | None) -> str | None:
    """As the SDK writes a time (``ns_to_iso_str``: ``%Y-%m-%dT%H:%M:%S.%fZ``); None when there is none
    (0 or None).

    The SDK makes a ``datetime`` of ``nanoseconds / 1e9`` (a float), which rounds the fraction of a
    second to microseconds half to even; the same float and the same rounding here, with the date
    and time written once a second, not twice a span.
    """
    global _second
    if not nanoseconds:
        return None
    fraction, whole = math.modf(nanoseconds / 1e9)
    microseconds = round(fraction * 1e6)
    seconds = int(whole)
    if microseconds == 1_000_000:
        seconds, microseconds = seconds + 1, 0
    second = _second  # read once: another thread's span may move it on meanwhile
    if second[0] != seconds:
        second = _second = (seconds, datetime.fromtimestamp(seconds, tz=UTC).strftime("%Y-%m-%dT%H:%M:%S"))
    return f"{second[1]}.{microseconds:06d}Z"


_encoded: tuple[Resource, bytes] | None = None  # the last resource encoded, as a line's tail


def _resource_json(resource: Resource) -> bytes:
    """A process's resource as the end of a span's line, encoded once: every span of the process
    carries the same object (known by identity: hashing a resource encodes it)."""
    global _encoded
    if _encoded is None or _encoded[0] is not resource:
        resource_json = json.dumps(json.loads(resource.to_json(indent=None)), separators=_COMPACT)
        _encoded = (resource, f',"resource":{resource_json}}}\n'.encode())
    return _encoded[1]


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
    return _FileSpanExporter(service_name=service_name, out=handle, formatter=span_line)


class LinesAsSpansEnd(SpanProcessor):
    """Each sampled span written to the file exporter's file as it ends (a source's spans, ``traces.setup``).

    What the SDK's ``SimpleSpanProcessor`` around the exporter does, less what a local file does not
    need: a context set around every export to keep instrumentation quiet (nothing instruments a
    file's writes) and a flush after the line the file already wrote whole (it is line-buffered).
    The line goes to the file's descriptor as bytes, one ``write`` (the file is opened to append,
    so the line lands whole at its end): not decoded to text for the file object to encode again.
    """

    def __init__(self, exporter: ConsoleSpanExporter) -> None:
        self._exporter = exporter
        self._fd = exporter.out.fileno()  # nothing else writes the file: no text buffer to keep in step

    def on_end(self, span: ReadableSpan) -> None:
        if span.context is not None and span.context.trace_flags.sampled:
            line = memoryview(span_line_bytes(span))
            while line:  # a regular file takes the whole line in one write, short of a full disk
                line = line[os.write(self._fd, line) :]

    def shutdown(self) -> None:
        self._exporter.shutdown()

    def force_flush(self, timeout_millis: int = 30000) -> bool:
        self._exporter.out.flush()
        return True


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
