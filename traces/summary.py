"""What each trace in the local files was: a query, a task, a call, or (older files) something else.

A trace's kind and label come from its root span: ``research.kind`` (``query`` on the ``research``
span, ``task`` or ``call`` on a command's span) and the query as recorded (redacted as it was) or the
command's ``<source>.<tool>``. Traces written before roots said their kind read as ``query`` when their
root is a ``research`` span; anything else (an orphan one-span trace of an MCP notification, a
request of a command that had no root span) is ``other``, labelled by its root spans.
"""

from __future__ import annotations

import itertools
import os
import string
from collections.abc import Iterable
from dataclasses import dataclass
from typing import Any

from traces import attributes as names

__all__ = [
    "TraceSummary",
    "decisions",
    "latest_trace_id",
    "roots",
    "service_of",
    "span_id",
    "starting_with",
    "summaries",
    "summarize",
    "unique_length",
]

KINDS = ("query", "task", "call", "other")
_SHORT_SERVICE = {"research-coordinator": "coordinator"}


def service_of(span: dict[str, Any]) -> str:
    name = str(span.get("resource", {}).get("attributes", {}).get(names.SERVICE_NAME, "?"))
    return _SHORT_SERVICE.get(name, name.removeprefix("research-source-"))


def span_id(value: Any) -> str:
    """A span id (or parent id) as the files write it, without 0x; "" for none."""
    return str(value or "").removeprefix("0x")


def decisions(span: dict[str, Any]) -> list[dict[str, Any]]:
    """The span's recovery decisions (its ``recovery.decision`` events), in order."""
    return [event for event in span.get("events", []) if event["name"] == names.RECOVERY_DECISION]


def roots(spans: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """The spans whose parent is not in the trace (one, unless a process's spans were lost), by start."""
    ids = {span_id(span["context"]["span_id"]) for span in spans}
    found = [span for span in spans if span_id(span.get("parent_id")) not in ids]
    return sorted(found, key=lambda span: span["start_time"])


@dataclass(frozen=True)
class TraceSummary:
    trace_id: str
    started: str  # ISO 8601, as the files have it
    kind: str  # one of KINDS
    label: str
    status: str
    services: int
    spans: int
    decisions: int


def _kind_and_root(spans: list[dict[str, Any]]) -> tuple[str, dict[str, Any] | None]:
    for root in roots(spans):
        kind = root.get("attributes", {}).get(names.KIND)
        if kind in KINDS:
            return str(kind), root
        if root["name"] == "research":  # written before roots said their kind
            return "query", root
    return "other", None


def summarize(trace_id: str, spans: list[dict[str, Any]]) -> TraceSummary:
    kind, root = _kind_and_root(spans)
    attributes = root.get("attributes", {}) if root else {}
    if kind == "query":
        label = str(attributes.get(names.QUERY, "-"))
    elif root is not None:
        label = str(attributes.get(names.LABEL, "-"))
    else:
        label = ", ".join(f"{service_of(span)} {span['name']}" for span in roots(spans))
    return TraceSummary(
        trace_id=trace_id,
        started=min(span["start_time"] for span in spans),
        kind=kind,
        label=label,
        status=str(attributes.get(names.STATUS, "-")),
        services=len({service_of(span) for span in spans}),
        spans=len(spans),
        decisions=sum(len(decisions(span)) for span in spans),
    )


def summaries(traces: dict[str, list[dict[str, Any]]], *, kind: str | None = None) -> list[TraceSummary]:
    """The traces, newest first, of one kind when ``kind`` is given."""
    found = [summarize(trace_id, spans) for trace_id, spans in traces.items() if spans]
    found = [summary for summary in found if kind is None or summary.kind == kind]
    found.sort(key=lambda summary: summary.started, reverse=True)
    return found


def latest_trace_id(traces: dict[str, list[dict[str, Any]]], kind: str | None = "query") -> str | None:
    """The newest trace of ``kind`` (a query, unless asked otherwise; None: of any kind)."""
    newest = summaries(traces, kind=kind)
    return newest[0].trace_id if newest else None


SHORTEST_ID = 8  # what `research traces list` cuts an id to at the least, as git shows 7 of a commit's


def unique_length(trace_ids: Iterable[str]) -> int:
    """The length at which every id's prefix is its own and no other's (at least ``SHORTEST_ID``): how far
    a list may cut the ids so that each still names one trace (`research traces show PREFIX`)."""
    ordered = sorted(trace_ids)
    longest = max((len(each) for each in ordered), default=0)
    # Of ids in order, the one sharing the longest prefix with an id is a neighbour of it. (Ids, not
    # paths: commonprefix compares characters, which is what is meant.)
    shared = (len(os.path.commonprefix((a, b))) + 1 for a, b in itertools.pairwise(ordered))  # noqa: RUF071
    return min(max(SHORTEST_ID, max(shared, default=0)), longest) if ordered else SHORTEST_ID


def starting_with(trace_ids: Iterable[str], given: str) -> list[str]:
    """The ids ``given`` names: the one it spells out, else those it begins (an id as the files have
    it, 32 hex; ``given`` in either case, with or without 0x). Nothing for what is no prefix of hex digits."""
    prefix = given.strip().lower().removeprefix("0x")
    if not prefix or any(char not in string.hexdigits for char in prefix):
        return []
    ids = list(trace_ids)
    if prefix in ids:
        return [prefix]
    return sorted(each for each in ids if each.startswith(prefix))
