"""`research traces`: the traces in the local files, as a list or a tree."""

from __future__ import annotations

from typing import Annotated

import typer
from rich.console import Console

from coordinator.cli.common import (
    traces_app,
    usage_error,
)
from sources.settings import SourceSettings
from traces.files import load_traces
from traces.viewer import latest_trace_id, render_trace, trace_table


@traces_app.command("list")
def list_traces() -> None:
    """List the traces in the local trace files, newest first.

    Example: research traces list
    """
    traces = load_traces(SourceSettings.from_environment().traces_path)
    if not traces:
        typer.echo("no traces yet: run `research ask ...` first", err=True)
        raise typer.Exit(1)
    Console().print(trace_table(traces))


@traces_app.command("show")
def show_trace(
    trace_id: Annotated[str, typer.Argument(help="A trace id (32 hex) or 'latest'.")] = "latest",
) -> None:
    """Show one trace as a tree: services, durations, status, and every recovery decision.

    Example: research traces show latest
    """
    traces = load_traces(SourceSettings.from_environment().traces_path)
    wanted = latest_trace_id(traces) if trace_id == "latest" else trace_id.lower().removeprefix("0x")
    if wanted is None or wanted not in traces:
        known = "no traces yet: run `research ask ...` first" if not traces else "see `research traces list`"
        raise usage_error(f"no trace {trace_id!r} in the local trace files; {known}")
    Console().print(render_trace(wanted, traces[wanted]))
