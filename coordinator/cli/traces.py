"""`research traces`: the traces in the local files, as a list or a tree."""

from __future__ import annotations

import dataclasses
import json
from typing import TYPE_CHECKING, Annotated, Any

import typer
from rich.console import Console

from coordinator.cli.common import traces_app, usage_error
from coordinator.cli.params import TraceKind, trace_kind
from sources.deferred import deferred

if TYPE_CHECKING:
    from sources import settings as source_settings
    from traces import files, viewer
    from traces import summary as trace_summary
    from traces.summary import TraceSummary
else:
    source_settings = deferred("sources.settings")
    files = deferred("traces.files")  # it imports the OpenTelemetry SDK
    trace_summary = deferred("traces.summary")
    viewer = deferred("traces.viewer")

_KIND_HELP = "Only traces of this kind: query (research ask), task (research task), call (research sources call), other."


def _load() -> dict[str, list[dict[str, Any]]]:
    return files.load_traces(source_settings.SourceSettings.from_environment().traces_path)


_COMMANDS = {"query": "research ask ...", "task": "research task ...", "call": "research sources call ..."}


def _none_yet(kind: str | None) -> str:
    traces = f"{kind} traces" if kind else "traces"
    return f"no {traces} yet: run `{_COMMANDS.get(kind or 'query', 'research ask ...')}` first"


@traces_app.command("list")
def list_traces(
    kind: Annotated[TraceKind | None, typer.Option("--kind", parser=trace_kind, help=_KIND_HELP)] = None,
    limit: Annotated[
        int, typer.Option("--limit", min=1, metavar="N", help="Show at most this many traces.")
    ] = 20,
    json_output: Annotated[bool, typer.Option("--json", help="Print a JSON list, for scripts.")] = False,
) -> None:
    """List the traces in the local trace files, newest first: what each was, when, how it ended.

    Example: research traces list --kind query --limit 5
    """
    loaded = _load()
    found: list[TraceSummary] = trace_summary.summaries(loaded, kind=kind)
    if not found:
        typer.echo(_none_yet(kind), err=True)
        raise typer.Exit(1)
    if json_output:
        typer.echo(json.dumps([dataclasses.asdict(summary) for summary in found[:limit]], indent=2))
    else:
        console = Console()
        # An id is cut no shorter than what names it alone among all the traces `traces show` reads.
        console.print(
            viewer.trace_table(
                found[:limit], width=console.width, id_length=trace_summary.unique_length(loaded)
            )
        )
    if len(found) > limit:
        traces = f"{kind} traces" if kind else "traces"
        typer.echo(f"the newest {limit} of {len(found)} {traces}; --limit N shows more", err=True)


@traces_app.command("show")
def show_trace(
    trace_id: Annotated[
        str,
        typer.Argument(
            help="A trace id (32 hex) or any prefix of it that is its own (as `traces list` shows it), "
            "or 'latest': the newest trace of --kind."
        ),
    ] = "latest",
    kind: Annotated[
        TraceKind, typer.Option("--kind", parser=trace_kind, help="What 'latest' means. " + _KIND_HELP)
    ] = "query",
) -> None:
    """Show one trace as a tree: services, durations, status, and every recovery decision.

    Example: research traces show latest
    """
    traces = _load()
    latest = trace_id == "latest"
    if latest:
        newest = trace_summary.latest_trace_id(traces, kind)
        matches = [newest] if newest is not None else []
    else:
        matches = trace_summary.starting_with(traces, trace_id)  # the id, or the traces it is a prefix of
    if len(matches) > 1:
        raise usage_error(f"{_ambiguous(trace_id, matches)}; give more of the id")
    if not matches:
        if not traces:
            known = _none_yet(None)
        elif latest:
            known = f"{_none_yet(kind)}, or see `research traces list`"
        else:
            known = "see `research traces list`"
        what = f"no {kind} trace" if latest else f"no trace {trace_id!r}"
        raise usage_error(f"{what} in the local trace files; {known}")
    (wanted,) = matches
    Console().print(viewer.render_trace(wanted, traces[wanted]))


_NAMED_AT_MOST = 4  # the ids an ambiguous prefix's refusal names; the list shows the rest


def _ambiguous(given: str, matches: list[str]) -> str:
    named = ", ".join(matches[:_NAMED_AT_MOST])
    more = len(matches) - _NAMED_AT_MOST
    rest = f" and {more} more (`research traces list` shows them)" if more > 0 else ""
    return f"{given!r} begins {len(matches)} traces: {named}{rest}"
