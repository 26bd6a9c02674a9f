"""`research plan`: the plan a query would run, without running it."""

from __future__ import annotations

import functools
import json
from typing import TYPE_CHECKING, Annotated

import typer
from rich.console import Console
from rich.table import Table
from rich.text import Text

from coordinator.cli.common import (
    EXIT_COMPLETE,
    EXIT_PARTIAL,
    Llm,
    LlmOption,
    app,
    claude_or_deterministic,
    load_registry,
    registry_catalog,
    usage_error,
)
from sources.deferred import deferred

if TYPE_CHECKING:
    import anyio

    from coordinator import llm as claude_planning
    from coordinator.planning import plan as planned
    from coordinator.planning import planner
    from coordinator.planning.plan import Plan
    from coordinator.reporting import render
else:
    anyio = deferred("anyio")
    claude_planning = deferred("coordinator.llm")  # Claude mode only
    planned = deferred("coordinator.planning.plan")
    planner = deferred("coordinator.planning.planner")
    render = deferred("coordinator.reporting.render")


@app.command("plan")
def show_plan(
    query: Annotated[str, typer.Argument(help="The question, as you would give it to `research ask`.")],
    json_output: Annotated[
        bool, typer.Option("--json", help="Print the plan as JSON (tasks, arguments, dependencies, gaps).")
    ] = False,
    llm: LlmOption = Llm.auto,  # the plan `research ask` would make, with the same option
    explain: Annotated[
        bool,
        typer.Option(
            "--explain",
            help="Also show how the query was read: each span, its role, and the tasks it asks for.",
        ),
    ] = False,
) -> None:
    """Show the plan for a question without running it: each task, its arguments, why it was planned,
    what it waits for, and what the query asked that will not be researched.

    Exit status 0 when everything asked is planned, 3 when something is not researched, 2 for a query
    that names nothing researchable.

    Example: research plan "refund 45 quid on ORD-10031?"
    """
    claude = claude_or_deterministic(llm)
    # 30 s: as `research ask`'s default deadline
    catalog = registry_catalog(load_registry(), 30.0 * planned.PLANNING_SHARE)
    try:
        if claude is None:
            plan = planner.plan_query(query, catalog)
        else:
            plan, _ = anyio.run(
                functools.partial(claude_planning.claude_plan, query, claude, catalog=catalog)
            )
    except planner.QueryError as exc:
        raise usage_error(render.shown(str(exc), keep="")) from None
    if json_output:
        typer.echo(json.dumps(plan.describe(), ensure_ascii=False, indent=2))
    else:
        _print_plan(plan, Console())
        if explain:
            _print_spans(plan, Console())
    raise typer.Exit(EXIT_PARTIAL if plan.unplanned else EXIT_COMPLETE)


def _print_plan(plan: Plan, console: Console) -> None:
    """The plan's tasks, what is not researched and the notes: what they quote of the query is
    ``shown`` (a control or bidi character in it is printed escaped)."""
    tasks = plan.describe()["tasks"]
    waits_for = [[*task["depends_on"], *task["gated_by"]] for task in tasks]  # its inputs, and its gates
    waits = any(waits_for)  # the column only where a task waits
    table = Table(box=None, pad_edge=False)
    table.add_column("task")
    table.add_column("call", overflow="fold")  # a call is shown whole, folded where it must be: never cut
    if waits:
        table.add_column("waits for")
    table.add_column("why")
    for task, waited in zip(tasks, waits_for, strict=True):
        arguments = ", ".join(
            f"{name}={json.dumps(value, ensure_ascii=False)}" for name, value in task["arguments"].items()
        )
        call = f"{task['source']}.{task['tool']}({arguments})"
        cells = [task["id"], call, *([", ".join(waited) or "-"] if waits else []), task["why"]]
        table.add_row(*(Text(render.shown(cell)) for cell in cells))
    console.print(table)
    for item in plan.unplanned:
        console.print(
            Text.assemble(
                ("not researched: ", "yellow"),
                render.shown(item.what),
                " -> ",
                (render.shown(item.next_step), "bold"),
            )
        )
        console.print(Text(f"  why: {render.shown(item.why)}", style="dim"))
    for follow_up in plan.follow_ups:  # what a later round adds from this one's findings
        console.print(Text(f"next round: {render.shown(str(follow_up))}", style="cyan"))
    for note in plan.notes:
        console.print(Text(f"note: {render.shown(note)}", style="dim"))


def _print_spans(plan: Plan, console: Console) -> None:
    """Every span of the query and what became of it (the deterministic planner's reading)."""
    if not plan.spans:
        console.print(
            Text("how it was read: the plan is a model's; only what it names is checked", style="dim")
        )
        return
    table = Table("span", "role", "tasks", "how", box=None, pad_edge=False, title="how it was read")
    for span in plan.describe()["spans"]:
        # Its words on one line; a character of the query shown escaped, never split on: the
        # separators U+2028 and U+2029 are white space to split(), and would vanish.
        text = " ".join(render.shown(str(span["text"])).split())
        cells = (text, span["role"], ", ".join(span["tasks"]) or "-", span["how"])
        table.add_row(*(Text(render.shown(str(cell))) for cell in cells))
    console.print(table)
