"""`research ask` (the main job) and `research task` (one subagent)."""

from __future__ import annotations

import dataclasses
import functools
import json
import os
import time
import uuid
from typing import Annotated, Any

import anyio
import typer
from opentelemetry import trace
from rich.console import Console

from coordinator import chaos
from coordinator.cli.common import (
    EXIT_COMPLETE,
    EXIT_PARTIAL,
    JAEGER_UI,
    LLM_HELP,
    app,
    claude_for,
    json_object,
    known_source,
    usage_error,
)
from coordinator.llm import TokenBudget, claude_plan
from coordinator.planner import QueryError, plan_query
from coordinator.render import LiveProgress, print_report
from coordinator.report import ResearchReport
from coordinator.research import PLANNING_SHARE, ResearchOptions, research
from sources.catalogue import SOURCES
from sources.contract import Decision
from sources.faults import FaultSettings
from sources.fleet import Fleet
from sources.settings import SourceSettings
from subagents.broker import CredentialBroker, Grant
from subagents.connection import Connections, stdio_target
from subagents.policy import RecoveryPolicy
from subagents.subagent import Runtime, Task, run_subagent
from subagents.tool_loop import claude_subagents
from traces.setup import configure_tracing, exporter_names


def _start_tracing(settings: SourceSettings, full_payloads: bool) -> SourceSettings:
    """Configure this process's tracing; the returned settings carry the run's id to the sources."""
    try:
        exporters = exporter_names()
    except ValueError as exc:
        raise usage_error(str(exc)) from None
    run_id = uuid.uuid4().hex[:12]
    settings = dataclasses.replace(
        settings, run_id=run_id, full_payloads=full_payloads or settings.full_payloads
    )
    configure_tracing(
        "research-coordinator", traces_dir=settings.traces_path, run_id=run_id,
        full_payloads=settings.full_payloads, exporters=exporters,
    )  # fmt: skip
    return settings


def _source_faults(specs: list[str]) -> dict[str, FaultSettings]:
    faults = {}
    for spec in specs:
        source, sep, settings = spec.partition(":")
        if not sep or source not in SOURCES:
            raise usage_error(
                f"--faults takes SOURCE:SETTINGS with a source among {', '.join(SOURCES)}, e.g. tickets:transient=0.5,seed=13; got {spec!r}"
            )
        try:
            faults[source] = FaultSettings.parse(settings)
        except ValueError as exc:
            raise usage_error(f"--faults {source}: {exc}") from None
    return faults


@app.command("ask")
def ask(
    query: Annotated[
        str, typer.Argument(help="The question, naming a customer (email or CUST-NNNNN) and what to know.")
    ],
    json_output: Annotated[
        bool, typer.Option("--json", help="Print the report as JSON (the stable interface for scripts).")
    ] = False,
    deadline: Annotated[float, typer.Option(help="Seconds for the whole query.")] = 30.0,
    transport: Annotated[
        str, typer.Option(help="stdio (spawn the sources, the default) or http (use running sources).")
    ] = "stdio",
    faults: Annotated[
        list[str] | None,
        typer.Option(
            "--faults",
            help="Inject faults into one spawned source, e.g. 'tickets:transient=0.5,seed=13' (repeatable).",
        ),
    ] = None,
    seed: Annotated[int | None, typer.Option(help="Seed of the back-off jitter, to replay a run.")] = None,
    llm: Annotated[str, typer.Option("--llm", help=LLM_HELP)] = "auto",
    chaos_spec: Annotated[
        str,
        typer.Option(
            "--chaos",
            help="Faults for this query's spawned sources, e.g. 'kill:customers@0.5s,hang:tickets,flaky:orders=0.3'.",
        ),
    ] = "",
    otlp: Annotated[
        bool,
        typer.Option(
            "--otlp",
            help="Also send the trace over OTLP/HTTP (Jaeger on localhost:4318 unless OTEL_EXPORTER_OTLP_ENDPOINT says otherwise).",
        ),
    ] = False,
    trace_payloads: Annotated[
        bool,
        typer.Option(
            "--trace-payloads",
            help="Record queries and arguments unredacted in the trace (local debugging only).",
        ),
    ] = False,
) -> None:
    """Research a question across the five sources; every gap is annotated, nothing is dropped.

    Exit status 0 when the answer is complete, 3 when it is partial (see its gaps), 2 for a usage error.

    Example: research ask "Investigate jane.doe@example.com: recent orders, open tickets, and whether a £750 refund on ORD-10023 is allowed"
    """
    if transport not in ("stdio", "http"):
        raise usage_error(f"--transport must be stdio or http, not {transport!r}")
    if not deadline > 0:
        raise usage_error(f"--deadline must be a positive number of seconds, e.g. 30; got {deadline:g}")
    fault_settings = _source_faults(faults or [])
    claude = claude_for(llm)
    try:
        chaos_faults, kills = chaos.parse_query_chaos(chaos_spec)
    except ValueError as exc:
        raise usage_error(str(exc)) from None
    fault_settings = {**fault_settings, **chaos_faults}
    if (fault_settings or kills) and transport == "http":
        raise usage_error(
            "--faults and --chaos apply to spawned (stdio) sources; with --transport http use `research chaos`"
        )
    try:
        plan = plan_query(query)
    except QueryError as exc:
        raise usage_error(str(exc)) from None
    if otlp and "otlp" not in os.environ.get("OTEL_TRACES_EXPORTER", ""):
        os.environ["OTEL_TRACES_EXPORTER"] = ",".join(
            filter(None, [os.environ.get("OTEL_TRACES_EXPORTER", "file"), "otlp"])
        )
    settings = _start_tracing(SourceSettings.from_environment(), trace_payloads)
    urls = Fleet(settings).urls() if transport == "http" else {}
    budget, planning = None, None
    if claude is not None:
        budget = TokenBudget(claude.token_budget)
        started = time.monotonic()  # planned before the run, so the progress shows the plan
        plan, planning = anyio.run(
            functools.partial(claude_plan, query, claude, budget, within_s=deadline * PLANNING_SHARE)
        )
        deadline -= time.monotonic() - started  # the query's deadline covers the planning
    options = ResearchOptions(
        deadline_s=deadline, transport=transport, faults=fault_settings, seed=seed, urls=urls, claude=claude
    )
    console = Console(stderr=True)

    async def asking() -> ResearchReport:
        async with anyio.create_task_group() as chaos_group:
            for source, seconds in kills:
                chaos_group.start_soon(chaos.kill_at, source, seconds)
            report = await research(
                query, options, settings=settings, observer=progress, plan=plan, planning=planning,
                budget=budget,
            )  # fmt: skip
            chaos_group.cancel_scope.cancel()
        return report

    with LiveProgress(plan, console) as progress:
        report = anyio.run(asking)
        progress.finished(report)
    trace.get_tracer_provider().force_flush()  # type: ignore[attr-defined]
    if json_output:
        typer.echo(report.to_json())
    else:
        print_report(report, Console())
        if "otlp" in exporter_names():
            Console().print(f"Jaeger: {JAEGER_UI}/trace/{report.trace_id}")
        Console().print(f"[dim]research traces show {report.trace_id}[/]")
    raise typer.Exit(EXIT_COMPLETE if report.status == "complete" else EXIT_PARTIAL)


class _Progress:
    """Prints each attempt and decision of a subagent as it happens."""

    def __init__(self, console: Console) -> None:
        self._console = console

    def attempt(self, task: Task, attempt: int, arguments: dict[str, Any]) -> None:
        self._console.print(f"[dim]{task.source}[/] attempt {attempt}: {task.tool} {json.dumps(arguments)}")

    def decided(self, task: Task, decision: Decision) -> None:
        wait = f" in {decision.backoff_ms / 1000:.2f} s" if decision.backoff_ms else ""
        category = f" ({decision.category})" if decision.category else ""
        self._console.print(
            f"[dim]{task.source}[/] [bold]{decision.action}[/]{category}{wait}: {decision.reason}"
        )


@app.command("task")
def run_task(
    source: Annotated[str, typer.Argument(help="customers, orders, billing, tickets or kb.")],
    tool: Annotated[str, typer.Argument(help="The tool to call, e.g. search_orders.")],
    arguments: Annotated[str, typer.Argument(help="The arguments as a JSON object.")] = "{}",
    purpose: Annotated[
        str, typer.Option(help="What the task is for; the broker grants scopes by purpose.")
    ] = "research",
    grant: Annotated[
        list[str] | None,
        typer.Option("--grant", help="Let the broker grant this scope for this task's purpose (repeatable)."),
    ] = None,
    faults: Annotated[
        str, typer.Option(help="Fault layer settings for the spawned source, e.g. 'transient=0.5,seed=3'.")
    ] = "",
    timeout: Annotated[float, typer.Option(help="Seconds per call.", min=0.1)] = 5.0,
    deadline: Annotated[float, typer.Option(help="Seconds for the whole task.", min=0.1)] = 30.0,
    llm: Annotated[str, typer.Option("--llm", help=LLM_HELP)] = "none",
) -> None:
    """Run one task through a subagent, showing every recovery decision, then its report as JSON.

    With --llm claude, Claude drives the subagent's calls and the code keeps its bounds and hooks.

    Exit status 0 for ok or a valid empty result, 1 when the task was escalated.

    Example: research task customers customer_lookup '{"identifier": " Jane.Doe@Example.com "}'
    """
    known_source(source)
    parsed = json_object(arguments)
    try:
        fault_settings = FaultSettings.parse(faults)
    except ValueError as exc:
        raise typer.BadParameter(str(exc)) from None
    settings = SourceSettings.from_environment().with_faults(fault_settings)
    claude = claude_for(llm)
    console = Console(stderr=True)

    async def running() -> Any:
        async with (
            Connections.opened({source: stdio_target(source, settings)}) as connections,
            claude_subagents(claude) as model,
        ):
            runtime = Runtime(
                connections=connections,
                broker=CredentialBroker(
                    settings.key(), grants=tuple(Grant(scope, purpose) for scope in grant or [])
                ),
                policy=RecoveryPolicy(call_timeout_s=timeout),
                observer=_Progress(console),
                model=model,
            )
            task = Task(id=f"{source}.{tool}", source=source, tool=tool, arguments=parsed, purpose=purpose)
            return await run_subagent(task, runtime, deadline=runtime.clock.now() + deadline)

    report = anyio.run(running)
    Console().print_json(report.model_dump_json(exclude_none=True, by_alias=True))
    raise typer.Exit(1 if report.state == "escalated" else 0)
