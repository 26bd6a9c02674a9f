"""Render traces from the local files in the terminal: no Jaeger needed.

`research traces list` shows one line per trace; `research traces show [TRACE_ID|latest]` shows one
as a tree (service, span, duration, status) with every recovery decision highlighted under the
subagent span that took it.
"""

from __future__ import annotations

from datetime import datetime
from typing import Any

from rich.table import Table
from rich.text import Text
from rich.tree import Tree

from traces import attributes as names

__all__ = ["latest_trace_id", "render_trace", "trace_table"]

_SHORT_SERVICE = {"research-coordinator": "coordinator"}


def _time(value: str) -> datetime:
    return datetime.fromisoformat(value.replace("Z", "+00:00"))


def _duration_ms(span: dict[str, Any]) -> float:
    return (_time(span["end_time"]) - _time(span["start_time"])).total_seconds() * 1000


def _service(span: dict[str, Any]) -> str:
    name = str(span.get("resource", {}).get("attributes", {}).get(names.SERVICE_NAME, "?"))
    return _SHORT_SERVICE.get(name, name.removeprefix("research-source-"))


def _span_id(value: Any) -> str:
    return str(value or "").removeprefix("0x")


def _roots(spans: list[dict[str, Any]]) -> list[dict[str, Any]]:
    ids = {_span_id(span["context"]["span_id"]) for span in spans}
    return [span for span in spans if _span_id(span.get("parent_id")) not in ids]


def latest_trace_id(traces: dict[str, list[dict[str, Any]]]) -> str | None:
    if not traces:
        return None
    return max(traces, key=lambda trace_id: min(span["start_time"] for span in traces[trace_id]))


def trace_table(traces: dict[str, list[dict[str, Any]]]) -> Table:
    table = Table("trace id", "started", "status", "services", "spans", "decisions", "query")
    ordered = sorted(
        traces.items(), key=lambda item: min(span["start_time"] for span in item[1]), reverse=True
    )
    for trace_id, spans in ordered:
        root = next((span for span in spans if span["name"] == "research"), None)
        attributes = root.get("attributes", {}) if root else {}
        decisions = sum(
            1
            for span in spans
            for event in span.get("events", [])
            if event["name"] == names.RECOVERY_DECISION
        )
        cells = [
            trace_id,
            min(span["start_time"] for span in spans)[:19].replace("T", " "),
            str(attributes.get(names.STATUS, "-")),
            str(len({_service(span) for span in spans})),
            str(len(spans)),
            str(decisions),
            str(attributes.get(names.QUERY, "-"))[:60],
        ]
        table.add_row(*(Text(cell) for cell in cells))  # Text: "[redacted email]" is data, not markup
    return table


def _label(span: dict[str, Any]) -> Text:
    status = span.get("status", {}).get("status_code", "UNSET")
    style = {"ERROR": "red", "OK": "green"}.get(status, "")
    attributes = span.get("attributes", {})
    label = Text.assemble(
        (f"{_service(span)} ", "dim"), (span["name"], f"bold {style}"), f"  {_duration_ms(span):.1f} ms"
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
        children.setdefault(_span_id(span.get("parent_id")), []).append(span)
    services = sorted({_service(span) for span in spans})
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
        items: list[tuple[str, Any]] = [
            (event["timestamp"], ("event", event))
            for event in span.get("events", [])
            if event["name"] == names.RECOVERY_DECISION
        ]
        items += [
            (child["start_time"], ("span", child))
            for child in children.get(_span_id(span["context"]["span_id"]), [])
        ]
        for _, (kind, item) in sorted(items, key=lambda pair: pair[0]):
            if kind == "event":
                branch.add(_decision(item))
            else:
                grow(branch, item)

    for root in sorted(_roots(spans), key=lambda span: span["start_time"]):
        grow(tree, root)
    return tree
