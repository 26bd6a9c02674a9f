"""`research compare`: the same seeded chaos through generic errors and through the contract."""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING, Annotated

import typer
from rich.console import Console
from rich.table import Table

from coordinator.cli.common import Llm, LlmOption, app, claude_with_key, usage_error
from sources.deferred import deferred

if TYPE_CHECKING:
    from coordinator import chaos
    from coordinator.chaos.catalogue import Scenario
    from coordinator.compare import plot as plotting
    from coordinator.compare import runner
    from coordinator.compare.figures import Figures
    from coordinator.compare.runner import Comparison
    from traces import setup as tracing
else:
    chaos = deferred("coordinator.chaos")  # it imports the five sources
    plotting = deferred("coordinator.compare.plot")
    runner = deferred("coordinator.compare.runner")
    tracing = deferred("traces.setup")

# The rows of the table: (figure, what it says, whether more is better).
_ROWS = (
    ("questions_answered", "questions fully answered", True),
    ("tasks_answered", "tasks answered", True),
    ("calls_sent", "calls sent", False),
    ("calls_wasted", "calls wasted (could never succeed)", False),
    ("partial_results_kept", "partial results kept", True),
    ("escalations_routed", "escalations routed to the right next step", True),
    ("empties_reported_as_failures", "valid empty results reported as failures", False),
    ("refunds_above_limit_attempted", "refunds above the limit that reached billing", False),
    ("wall_s", "wall time (s, summed over scenarios)", False),
)


@app.command("compare")
def compare_command(
    scenarios: Annotated[
        int, typer.Option("--scenarios", min=1, metavar="N", help="How many random scenarios.")
    ] = 50,
    seed: Annotated[
        int, typer.Option(metavar="N", help="Seed of the scenario dice: the same seed, the same scenarios.")
    ] = 1,
    llm: LlmOption = Llm.none,
    as_json: Annotated[bool, typer.Option("--json", help="Print the figures as JSON.")] = False,
    plot: Annotated[
        Path | None, typer.Option("--plot", metavar="FILE", help="Write a bar chart (PNG) to this file.")
    ] = None,
) -> None:
    """Run the same chaos scenarios through generic errors ("Operation failed") and through the contract.

    Three coordinators differ only in what a failed call tells them: generic (retry anything up to the
    cap, then go on without the branch), generic-abort (abandon the query at the first failed branch)
    and structured (the contract). Each figure is judged against what every call truly returned.

    Example: research compare --scenarios 200 --seed 1 --plot compare.png
    """
    claude = claude_with_key(llm)
    if plot is not None:
        _check_plot(plot)
    tracing.ensure_tracing("research-coordinator")
    progress = Console(stderr=True)
    comparison = runner.compare(
        chaos.scenarios(scenarios, seed), seed, claude, on_scenario=_progress(progress, scenarios)
    )
    if as_json:
        typer.echo(json.dumps(comparison.as_dict()))
    else:
        Console().print(_table(comparison))
    if plot is not None:
        progress.print(f"chart: {plotting.plot(comparison.modes, scenarios, seed, plot)}")


def _check_plot(plot: Path) -> None:
    """A chart's file: a .png in a folder that is there (none is created), and not a folder itself."""
    if plot.suffix.lower() != ".png":
        raise usage_error(f"--plot takes a .png file, e.g. compare.png; got {str(plot)!r}")
    folder = plot.parent
    if not folder.is_dir():
        raise usage_error(
            f"--plot {str(plot)!r}: there is no folder {str(folder)!r}; name a file in a folder that exists"
        )
    if plot.is_dir():
        raise usage_error(
            f"--plot {str(plot)!r} is a folder; name a .png file, e.g. {str(plot / 'compare.png')!r}"
        )


def _progress(console: Console, total: int) -> Callable[[int, Scenario, dict[str, Figures]], None]:
    def said(index: int, scenario: Scenario, figures: dict[str, Figures]) -> None:
        calls = "  ".join(
            f"{mode} {f.calls_sent} calls/{f.calls_wasted} wasted" for mode, f in figures.items()
        )
        console.print(
            f"{index:4}/{total} seed {scenario.seed:<11} {scenario.describe():44.44} {calls}", highlight=False
        )

    return said


def _table(comparison: Comparison) -> Table:
    modes = comparison.modes
    table = Table(title=f"{comparison.scenarios} scenarios, seed {comparison.seed}")
    table.add_column("figure")
    for mode in modes:
        table.add_column(mode, justify="right")
    table.add_column("structured / generic", justify="right")
    for name, label, _ in _ROWS:
        values = [getattr(figures, name) for figures in modes.values()]
        generic, structured = getattr(modes["generic"], name), getattr(modes["structured"], name)
        ratio = f"{structured / generic:.2f}x" if generic else "-"
        table.add_row(
            label, *(f"{value:.1f}" if isinstance(value, float) else str(value) for value in values), ratio
        )
    return table
