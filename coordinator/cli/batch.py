"""`research batch QUESTIONS --out DIR`: many questions against one shared fleet, a report each.

Exit status 0 when every question was answered completely, 3 when some answers are partial or some
questions failed (see DIR), 2 for a usage error (a DIR an earlier batch wrote into without --resume,
or a file in it that is not this project's), 130 when interrupted (every finished report kept).
"""

from __future__ import annotations

import importlib.util
import sys
from pathlib import Path
from typing import TYPE_CHECKING, Annotated, Any

import typer
from rich.console import Console

from coordinator.cli.common import (
    EXIT_COMPLETE,
    EXIT_INTERRUPTED,
    EXIT_PARTIAL,
    ApproveOption,
    FaultsOption,
    Llm,
    LlmOption,
    app,
    approvals_given,
    claude_or_deterministic,
    fleet_call,
    load_registry,
    usage_error,
)
from coordinator.cli.params import SourceUrl, listen_address, source_url
from sources.deferred import deferred

if TYPE_CHECKING:
    from collections.abc import Callable

    from rich import progress as rich_progress

    from coordinator.batch import local, loopback, ray_engine
    from coordinator.batch import questions as batch_questions
    from coordinator.batch import run as batch_run
    from coordinator.batch import summary as batch_summary
    from coordinator.batch.run import Batch, Engine
    from coordinator.batch.summary import Tally
    from coordinator.batch.work import Answer, Setup
    from sources import settings as source_settings
else:
    rich_progress = deferred("rich.progress")  # only a batch shows it: its import is not cheap
    local = deferred("coordinator.batch.local")
    loopback = deferred("coordinator.batch.loopback")
    ray_engine = deferred("coordinator.batch.ray_engine")  # imports Ray, which is optional: see `_engine`
    batch_questions = deferred("coordinator.batch.questions")
    batch_run = deferred("coordinator.batch.run")
    batch_summary = deferred("coordinator.batch.summary")
    source_settings = deferred("sources.settings")

QuestionsArgument = Annotated[
    Path,
    typer.Argument(
        help='JSON lines, one {"id": ..., "query": ...} a line (optional "deadline", "grant"), or one question a line.'
    ),
]
EngineOption = Annotated[str, typer.Option("--engine", metavar="ENGINE", help="local (this process) or ray.")]


@app.command()
def batch(
    questions: QuestionsArgument,
    out: Annotated[Path, typer.Option("--out", metavar="DIR", help="The folder for the reports, traces and summary.json.")],
    engine: EngineOption = "local",
    address: Annotated[str | None, typer.Option("--address", metavar="ADDRESS", help="A Ray cluster to join: its head's HEAD_IP:6379 (see `ray start --head`), or auto; local Ray by default.")] = None,
    concurrency: Annotated[int, typer.Option("--concurrency", min=1, metavar="N", help="Questions in flight at once.")] = 8,
    workers: Annotated[int, typer.Option("--workers", min=1, metavar="N", help="Ray worker processes.")] = 2,
    deadline: Annotated[float, typer.Option("--deadline", min=0.1, metavar="SECONDS", help="Seconds per question.")] = 30.0,
    seed: Annotated[int, typer.Option("--seed", metavar="N", help="Seed of the back-off jitter (per question).")] = 0,
    retry_budget: Annotated[float, typer.Option("--retry-budget", min=0.0, max=1.0, metavar="SHARE", help="Retries at most this share of the last 10 s of first attempts, per source, fleet-wide, plus a reserve of 1 a second (10 at the start).")] = 0.1,
    bulkhead: Annotated[int, typer.Option("--bulkhead", min=1, metavar="N", help="Concurrent calls per source, fleet-wide.")] = 8,
    faults: FaultsOption = None,
    url: Annotated[list[SourceUrl] | None, typer.Option("--url", parser=source_url, metavar="SOURCE=URL", help="SOURCE=URL of a running source (all five); by default the running fleet, or one started for the batch.")] = None,
    fleet_host: Annotated[str, typer.Option("--fleet-host", parser=listen_address, metavar="ADDRESS", help="The address the batch's own fleet listens on, one every node of the cluster reaches, e.g. 10.0.0.5; every request then needs a bearer token, which the workers send.")] = "127.0.0.1",
    llm: LlmOption = Llm.none,
    total_tokens: Annotated[int | None, typer.Option("--total-tokens", min=1, metavar="TOKENS", help="Claude mode: the whole batch's token budget.")] = None,
    approve: ApproveOption = None,
    resume: Annotated[bool, typer.Option("--resume", help="Carry on with the batch DIR holds: its reports kept (each checked to be this project's, for that question), the other questions asked. Without it, a DIR an earlier batch wrote into is refused.")] = False,
) -> None:  # fmt: skip
    """Research every question of a file; one report (as `ask --json`) and one trace each, in DIR.

    Example: research batch questions.jsonl --out runs/tonight --engine ray --concurrency 16
    """
    if engine not in ("local", "ray"):
        raise usage_error(f"--engine takes local or ray; got {engine!r}")
    asked = batch_run.Batch(
        questions, out, engine, address, concurrency, workers, deadline, seed, retry_budget, bulkhead,
        {each.source: each.settings for each in faults or []}, dict(url or []), claude=claude_or_deterministic(llm),
        total_tokens=total_tokens, approvals=approvals_given(approve), registry=load_registry(), resume=resume,
        fleet_host=fleet_host,
    )  # fmt: skip
    if engine == "ray" and address is None:
        _on_loopback(asked)
    summary = _run(asked)
    complete = summary["answered"] == summary["questions"]
    raise typer.Exit(EXIT_COMPLETE if complete else EXIT_PARTIAL)


def _on_loopback(asked: Batch) -> None:
    """A local Ray kept on loopback: this command runs again in a network namespace of loopback alone
    (``coordinator.batch.loopback`` says why Ray cannot be kept there itself); else one line says why not."""
    if loopback.inside():
        loopback.up()
        return
    reason = loopback.obstacle(asked, source_settings.SourceSettings.from_environment(), sys.argv)
    if reason is None:
        loopback.enter(sys.argv)
    Console(stderr=True).print(
        f"note: local Ray listens on every interface of this machine: no namespace of loopback alone, as {reason}",
        highlight=False,
    )


def _run(asked: Batch) -> dict[str, Any]:
    console = Console(stderr=True)
    progress = BarProgress(console)
    try:
        with progress.bar:
            summary: dict[str, Any] = fleet_call(
                lambda: batch_run.run_batch(
                    asked, source_settings.SourceSettings.from_environment(), _engine(asked), progress
                )
            )
    except (batch_questions.QuestionsError, batch_run.BatchError) as exc:
        raise usage_error(str(exc)) from None
    except KeyboardInterrupt:
        console.print(
            f"interrupted: the finished reports are in {asked.out}; run the same command with --resume to go on"
        )
        raise typer.Exit(EXIT_INTERRUPTED) from None
    Console().print(batch_summary.summary_table(summary))
    typer.echo(f"reports: {asked.out / 'reports'}   summary: {asked.out / 'summary.json'}")
    return summary


def _engine(asked: Batch) -> Callable[[Setup], Engine]:
    def make(setup: Setup) -> Engine:
        if asked.engine == "ray":
            # Asked before the deferred module runs: its `import ray` would fail there without Ray.
            if importlib.util.find_spec("ray") is None:
                raise usage_error("--engine ray needs Ray: pip install '.[ray]'")
            return ray_engine.RayEngine(
                setup, workers=asked.workers, retry_share=asked.retry_share, bulkhead=asked.bulkhead,
                address=asked.address,
            )  # fmt: skip
        return local.LocalEngine(setup, retry_share=asked.retry_share, bulkhead=asked.bulkhead)

    return make


class BarProgress:
    """A progress bar on stderr: questions done, complete / partial / failed, and the retry ratio."""

    def __init__(self, console: Console) -> None:
        self.bar = rich_progress.Progress(
            rich_progress.TextColumn("batch"), rich_progress.BarColumn(), rich_progress.MofNCompleteColumn(),
            rich_progress.TextColumn("{task.fields[counts]}"), rich_progress.TimeElapsedColumn(),
            console=console, transient=False,
        )  # fmt: skip
        self._task: Any = None

    def started(self, total: int, skipped: int) -> None:
        counts = f"{skipped} already answered" if skipped else ""
        self._task = self.bar.add_task("batch", total=total, completed=skipped, counts=counts)

    def answered(self, answer: Answer, tally: Tally) -> None:
        counts = tally.counts
        text = (
            f"complete {counts['complete']}  partial {counts['partial']}  failed {counts['failed']}"
            f"  retries {tally.retry_ratio:.1%}"
        )
        if tally.violations:
            text += f"  invariant violations {tally.violations}"
        self.bar.update(self._task, advance=1, counts=text)
