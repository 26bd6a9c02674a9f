"""`research replay`: run a recorded query again from what its sources answered, and compare."""

from __future__ import annotations

import json
from pathlib import Path
from typing import TYPE_CHECKING, Annotated

import typer

from coordinator.cli.common import EXIT_COMPLETE, EXIT_FAILED, app, load_registry, start_tracing, usage_error
from sources.deferred import deferred

if TYPE_CHECKING:
    import anyio

    from coordinator import recorded_run, replay
    from coordinator.replay import Replayed
    from coordinator.reporting import render
    from sources import settings as source_settings
else:
    anyio = deferred("anyio")
    recorded_run = deferred("coordinator.recorded_run")
    replay = deferred("coordinator.replay")
    render = deferred("coordinator.reporting.render")
    source_settings = deferred("sources.settings")


@app.command("replay")
def replay_run(
    trace_id: Annotated[
        str,
        typer.Argument(
            help="The trace id of a recorded run (32 hex) or a prefix of it that is its own, "
            "or 'latest': the newest recording."
        ),
    ] = "latest",
    json_output: Annotated[
        bool, typer.Option("--json", help="Print the outcome as JSON: same, differences, caveats.")
    ] = False,
) -> None:
    """Run a recorded query again against what its sources answered, and compare the decisions.

    Every run of `research ask`, `chaos run`, `batch` and the service is kept beside its trace
    (<data folder>/traces/recordings/<trace id>.json, redacted as traces are). The replay runs the
    recorded plan through today's code, each attempt answered as recorded, at the time it was, and
    compares each task's decisions with the recorded ones. Exit status 0 when they are the same,
    1 with a diff of what changed (the code decides otherwise, or the recording was edited).

    Example: research replay latest
    """
    settings = start_tracing(source_settings.SourceSettings.from_environment())
    path = _recording(settings.traces_path / "recordings", trace_id)
    try:
        run = recorded_run.load_recording(path)
    except recorded_run.RecordingError as exc:
        raise usage_error(str(exc)) from None
    replayed = anyio.run(replay.replay, run, settings, load_registry())  # its sources' own error rules
    _show(replayed, json_output)
    raise typer.Exit(EXIT_FAILED if replayed.differences else EXIT_COMPLETE)


def _show(replayed: Replayed, json_output: bool) -> None:
    run, same = replayed.recorded, not replayed.differences
    if json_output:
        typer.echo(
            json.dumps(
                {
                    "trace_id": run.trace_id,
                    "replay_trace_id": replayed.report.trace_id,
                    "same": same,
                    "differences": replayed.differences,
                    "caveats": replayed.caveats,
                },
                indent=2,
            )
        )
    else:
        decisions = sum(len(outcome.decisions) for outcome in run.outcomes)
        what = f"{len(run.outcomes)} tasks, {len(run.attempts)} attempts, {decisions} decisions"
        verdict = "every decision as recorded" if same else f"{len(replayed.differences)} difference(s)"
        typer.echo(f"replayed {run.trace_id}: {verdict}\n  ({what})")  # 80 columns: the id takes 32
        for difference in replayed.differences:  # it quotes what sources said: escaped for a terminal
            typer.echo(render.shown(difference))
        for caveat in replayed.caveats:
            typer.echo(f"note: {caveat}", err=True)
        typer.echo(f"the replay's own trace: {replayed.report.trace_id}", err=True)


def _recording(folder: Path, trace_id: str) -> Path:
    """The recording ``trace_id`` names: the newest for 'latest', else the one whose id it is or begins."""
    kept = sorted(folder.glob("*.json"), key=lambda path: path.stat().st_mtime) if folder.is_dir() else []
    if not kept:
        raise usage_error(f"no recorded runs in {folder} yet: run `research ask ...` first")
    if trace_id == "latest":
        return kept[-1]
    wanted = trace_id.strip().lower().removeprefix("0x")
    matches = [path for path in kept if path.stem.startswith(wanted)] if wanted else []
    if not matches:
        raise usage_error(
            f"no recorded run {trace_id!r} in {folder}; `research traces list` shows the traces"
        )
    if len(matches) > 1:
        named = ", ".join(path.stem for path in matches[:4])
        raise usage_error(f"{trace_id!r} begins {len(matches)} recorded runs ({named}); give more of the id")
    return matches[0]
