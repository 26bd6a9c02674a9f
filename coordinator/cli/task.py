"""`research task`: one task through one subagent, every recovery decision shown as it is made."""

from __future__ import annotations

import dataclasses
import functools
import json
import time
from typing import TYPE_CHECKING, Annotated, Any

import typer
from rich.console import Console
from rich.text import Text

from coordinator.cli.common import (
    ApproveOption,
    ArgumentsArgument,
    FaultsOption,
    GrantOption,
    Llm,
    LlmOption,
    SeedOption,
    SourceArgument,
    app,
    approvals_given,
    claude_or_deterministic,
    load_source,
    registry_catalog,
    start_tracing,
    terminal_confirm,
    usage_error,
)
from coordinator.cli.params import SourceFaults
from coordinator.cli.started import STARTED_AT  # a deadline counts from it
from sources.deferred import deferred

if TYPE_CHECKING:
    from collections.abc import Sequence

    import anyio

    from coordinator import approvals as approving
    from coordinator import core, registered_tools
    from coordinator.reporting import render
    from sources import faults as fault_settings
    from sources import settings as source_settings
    from sources.faults import FaultSettings
    from subagents import broker, subagent, writes
    from subagents.decisions import Decision
    from subagents.sessions.connection import Target
    from subagents.subagent import SubagentReport, Task
    from subagents.writes import Approval
    from traces import spans
else:
    anyio = deferred("anyio")
    core = deferred("coordinator.core")
    approving = deferred("coordinator.approvals")
    registered_tools = deferred("coordinator.registered_tools")
    writes = deferred("subagents.writes")
    render = deferred("coordinator.reporting.render")
    fault_settings = deferred("sources.faults")
    source_settings = deferred("sources.settings")
    broker = deferred("subagents.broker")
    subagent = deferred("subagents.subagent")
    spans = deferred("traces.spans")


@app.command("task")
def run_task(
    source: SourceArgument,
    tool: Annotated[str, typer.Argument(help="The tool to call, e.g. search_orders.")],
    arguments: ArgumentsArgument = None,
    purpose: Annotated[
        str,
        typer.Option(metavar="PURPOSE", help="What the task is for; the broker grants scopes by purpose."),
    ] = "research",
    grant: GrantOption = None,
    faults: FaultsOption = None,
    timeout: Annotated[float, typer.Option(metavar="SECONDS", help="Seconds per call.", min=0.1)] = 5.0,
    deadline: Annotated[
        float, typer.Option(metavar="SECONDS", help="Seconds for the whole task.", min=0.1)
    ] = 30.0,
    seed: SeedOption = None,
    llm: LlmOption = Llm.auto,
    approve: ApproveOption = None,
    yes: Annotated[
        bool, typer.Option("--yes", help="Approve this task's call if it writes (as a yes at the prompt).")
    ] = False,
) -> None:
    """Run one task through a subagent, showing every recovery decision, then its report as JSON.

    With --llm claude, Claude drives the subagent's calls and the code keeps its bounds and hooks.
    A tool that writes is called only once approved: at a prompt in a terminal, or with --yes or
    --approve; the task is then the one write it may make, exactly as given.

    Exit status 0 for ok or a valid empty result, 1 for any other state (a gap: escalated,
    blocked, deadline).

    Example: research task customers customer_lookup '{"identifier": " Jane.Doe@Example.com "}'
    """
    source_faults = _faults_of(source, faults or [])
    registry, entry = load_source(source)
    if entry.known_tools() is None:  # listed (and kept) first: what each tool says decides its approval
        registry_catalog(registry, deadline * 0.5)
    # Traced like a query: this process's spans and the source's join one trace (the run's id goes to it).
    settings = start_tracing(source_settings.SourceSettings.from_environment().with_faults(source_faults))
    grants = tuple(broker.Grant(scope, purpose) for scope in grant or ())
    config = core.Config.for_task(settings, registry, claude_or_deterministic(llm), timeout, grants)
    task = subagent.Task(
        id=f"{source}.{tool}", source=source, tool=tool, arguments=dict(arguments or {}), purpose=purpose
    )
    approvals, prompted = approvals_for_task(task, config, approvals_given(approve), yes)
    config = dataclasses.replace(config, approvals=approvals)
    # A person's time at the prompt is not the task's: its deadline then counts from the answer.
    started_at = time.monotonic() if prompted else STARTED_AT
    target = entry.connect(settings, settings.faults, over="spawn")  # spawned: one source for one task
    report = anyio.run(
        functools.partial(
            run_one, "task", task, config, target, deadline, started_at=started_at, seed=seed,
            observer=_Progress(Console(stderr=True)),
        )
    )  # fmt: skip
    Console().print_json(report.model_dump_json(exclude_none=True, by_alias=True))
    raise typer.Exit(1 if report.state.is_gap else 0)


def approvals_for_task(
    task: Task, config: core.Config, given: tuple[Approval, ...], yes: bool, why: str = "you ran this task"
) -> tuple[tuple[Approval, ...], bool]:
    """This task's approval if its tool writes: --yes, --approve, or a yes at the prompt; and
    whether anyone was asked."""
    effects = registered_tools.tool_effects(config.registry, config.settings.data_dir)
    if not effects.of(task.source, task.tool).writes:
        return given, False
    request = approving.WriteRequest(
        task.source, task.tool, dict(task.arguments), why,
        writes.Approval(task.tool, by="--yes" if yes else "the prompt"),
    )  # fmt: skip
    if yes:
        return (*given, request.approval), False
    return approving.approvals_for([request], given, terminal_confirm())


def _faults_of(source: str, faults: list[SourceFaults]) -> FaultSettings:
    """The faults given for the task's source (the last --faults for it); --faults for another is refused."""
    others = sorted({given.source for given in faults} - {source})
    if others:
        raise usage_error(f"--faults names {', '.join(others)}; this task calls {source}")
    return next((given.settings for given in reversed(faults)), fault_settings.FaultSettings())


async def run_one(
    kind: str, task: Task, config: core.Config, target: Target, deadline_s: float, **options: Any
) -> SubagentReport:
    """The task on ``target``, under one root span for the command (``kind``): the session's handshake
    and every call are its children."""
    with spans.command_span(kind, task.id) as span:
        async with core.Coordinator(config, targets={task.source: target}) as coordinator:
            report = await coordinator.run_task(task, deadline_s=deadline_s, **options)
        spans.end_command(span, status=report.state)
        return report


class _Progress:
    """Prints each attempt and decision of a subagent as it happens."""

    def __init__(self, console: Console) -> None:
        self._console = console

    def attempt(self, task: Task, attempt: int, arguments: dict[str, Any]) -> None:
        self._console.print(f"[dim]{task.source}[/] attempt {attempt}: {task.tool} {json.dumps(arguments)}")

    def ended(self, task_id: str, state: str, attempts: int, decisions: Sequence[Decision]) -> None:
        pass  # the report that follows says how the task ended

    def decided(self, task: Task, decision: Decision) -> None:
        wait = f" in {decision.backoff_ms / 1000:.2f} s" if decision.backoff_ms else ""
        category = f" ({decision.category})" if decision.category else ""
        self._console.print(
            f"[dim]{task.source}[/] [bold]{decision.action}[/]{category}{wait}: ",
            Text(render.shown(decision.reason)),  # the reason quotes what a source said: printed escaped
            sep="",
        )
