"""Render traces from the local files in the terminal: no Jaeger needed.

`research traces list` shows one line per trace: what it was (a query, a task, a call; see
``traces.summary``) and how it ended. `research traces show [TRACE_ID|latest]` shows one as a tree
(service, span, duration, status) with every recovery decision highlighted under the subagent span
that took it.
"""

from __future__ import annotations

from datetime import datetime
from typing import Any

from rich.table import Table
from rich.text import Text
from rich.tree import Tree

from traces import attributes as names
from traces.summary import TraceSummary, decisions, roots, service_of, span_id

__all__ = ["render_trace", "trace_table"]


def _duration_ms(span: dict[str, Any]) -> float:
    start, end = (datetime.fromisoformat(span[key]) for key in ("start_time", "end_time"))
    return (end - start).total_seconds() * 1000


# The columns of `research traces list`, and the order in which a narrow terminal drops them: the
# counts of services and spans first (the tree shows them), then the year and seconds of the start.
_COLUMNS = ("trace id", "started", "kind", "what", "status", "services", "spans", "decisions")
_DROPPED_FIRST = ("services", "spans")
_WHAT_AT_LEAST = 20  # the label's width below which dropping another column is better than wrapping it


def trace_table(summaries: list[TraceSummary], *, width: int = 200, id_length: int = 32) -> Table:
    """One row per trace, in the order given: what it was (kind and label), when, how it ended.

    Within ``width`` columns: the ids whole where they fit, else cut to ``id_length`` (what keeps each
    one its own: ``traces.summary.unique_length``) and never shorter; then the least useful columns
    go. Only the label wraps."""
    rows = [_cells(summary) for summary in summaries]
    fewer = [tuple(c for c in _COLUMNS if c not in _DROPPED_FIRST[:n]) for n in (1, 2)]
    layouts: list[tuple[int, tuple[str, ...], bool]] = [(32, _COLUMNS, False), (id_length, _COLUMNS, False)]
    layouts += [*((id_length, columns, False) for columns in fewer), (id_length, fewer[-1], True)]
    label = min(_WHAT_AT_LEAST, max((len(row["what"]) for row in rows), default=0))
    for cut, columns, short_time in layouts:  # the first that fits; the narrowest when none does
        if _fixed_width(rows, columns, cut, short_time) + label <= width:
            break
    table = Table(*columns)
    for column in table.columns:  # all but the label never cut nor wrapped: a cut id names no trace
        column.no_wrap = column.header != "what"
    for row in rows:
        cells = {**row, "trace id": row["trace id"][:cut]}
        if short_time:
            cells["started"] = cells["started"][5:16]  # MM-DD HH:MM
        table.add_row(*(Text(cells[column]) for column in columns))  # Text: "[redacted email]" is data
    return table


def _cells(summary: TraceSummary) -> dict[str, str]:
    return {
        "trace id": summary.trace_id,
        "started": summary.started[:19].replace("T", " "),
        "kind": summary.kind,
        "what": summary.label[:60],
        "status": summary.status,
        "services": str(summary.services),
        "spans": str(summary.spans),
        "decisions": str(summary.decisions),
    }


def _fixed_width(rows: list[dict[str, str]], columns: tuple[str, ...], cut: int, short_time: bool) -> int:
    """The width of the table but its label: each column's widest cell, its padding and the borders."""
    cut_to = {"trace id": cut, "started": 11 if short_time else 19}
    widths = [
        max([len(column), *(min(len(row[column]), cut_to.get(column, 999)) for row in rows)])
        for column in columns
        if column != "what"
    ]
    return sum(widths) + 3 * len(columns) + 1  # a space either side of each cell, a border between and around


def _label(span: dict[str, Any]) -> Text:
    status = span.get("status", {}).get("status_code", "UNSET")
    style = {"ERROR": "red", "OK": "green"}.get(status, "")
    attributes = span.get("attributes", {})
    label = Text.assemble(
        (f"{service_of(span)} ", "dim"), (span["name"], f"bold {style}"), f"  {_duration_ms(span):.1f} ms"
    )
    if status == "ERROR":
        label.append(f"  ERROR {attributes.get(names.ERROR_TYPE, '')}", style="red")
    if names.TASK_STATE in attributes:
        label.append(
            f"  [{attributes[names.TASK_STATE]}, {attributes.get(names.TASK_ATTEMPTS, 0)} attempts]",
            style="cyan",
        )
    return label


def _decision(event: dict[str, Any]) -> Text:
    attributes = event.get("attributes", {})
    action = attributes.get(names.RECOVERY_ACTION, "?")
    style = {"retry": "yellow", "repair": "yellow", "elevate": "yellow", "accept_empty": "cyan"}.get(
        action, "magenta"
    )
    details = [f"attempt {attributes.get(names.RECOVERY_ATTEMPT, '?')}"]
    if attributes.get(names.RECOVERY_CATEGORY):
        details.append(str(attributes[names.RECOVERY_CATEGORY]))
    if attributes.get(names.RECOVERY_BACKOFF_MS):
        details.append(f"back-off {attributes[names.RECOVERY_BACKOFF_MS]} ms")
    if attributes.get(names.ERROR_TYPE):
        details.append(str(attributes[names.ERROR_TYPE]))
    return Text.assemble(
        ("◆ ", style),
        (f"{action}", f"bold {style}"),
        f" ({', '.join(details)}): ",
        (str(attributes.get(names.RECOVERY_REASON, "")), "dim"),
    )


def render_trace(trace_id: str, spans: list[dict[str, Any]]) -> Tree:
    children: dict[str, list[dict[str, Any]]] = {}
    for span in spans:
        children.setdefault(span_id(span.get("parent_id")), []).append(span)
    services = sorted({service_of(span) for span in spans})
    tree = Tree(
        Text.assemble(
            ("trace ", "dim"),
            (trace_id, "bold"),
            (f"  {len(spans)} spans, services: {', '.join(services)}", "dim"),
        )
    )

    def grow(node: Tree, span: dict[str, Any]) -> None:
        branch = node.add(_label(span))
        # Events and child spans interleaved by time: a decision shows between the attempts it separates.
        items: list[tuple[str, Any]] = [(event["timestamp"], ("event", event)) for event in decisions(span)]
        items += [
            (child["start_time"], ("span", child))
            for child in children.get(span_id(span["context"]["span_id"]), [])
        ]
        for _, (kind, item) in sorted(items, key=lambda pair: pair[0]):
            if kind == "event":
                branch.add(_decision(item))
            else:
                grow(branch, item)

    for root in roots(spans):
        grow(tree, root)
    return tree
