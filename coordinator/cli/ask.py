"""`research ask` (the main job) and `research task` (one subagent)."""

from __future__ import annotations

import dataclasses
import json
import os
import sys
import time
from typing import TYPE_CHECKING, Annotated, Any

import typer
from rich.console import Console

from coordinator.cli.common import (
    EXIT_COMPLETE,
    EXIT_INTERRUPTED,
    EXIT_PARTIAL,
    JAEGER_UI,
    FaultsOption,
    GrantOption,
    Llm,
    LlmOption,
    SeedOption,
    Transport,
    app,
    claude_for,
    exit_now,
    json_object,
    known_source,
    usage_error,
)
from sources.catalogue import SOURCES

if TYPE_CHECKING:
    from collections.abc import Sequence

    from coordinator.report import ResearchReport
    from sources.contract import Decision
    from sources.faults import FaultSettings
    from sources.settings import SourceSettings
    from subagents.subagent import Task


def _start_tracing(settings: SourceSettings, full_payloads: bool) -> SourceSettings:
    """Configure this process's tracing; the returned settings carry the run's id to the sources."""
    from traces.setup import start_run  # here, not at the top: start-up time

    full_payloads = full_payloads or settings.full_payloads
    try:
        run_id = start_run("research-coordinator", settings.traces_path, full_payloads=full_payloads)
    except ValueError as exc:
        raise usage_error(str(exc)) from None
    return dataclasses.replace(settings, run_id=run_id, full_payloads=full_payloads)


def _source_faults(specs: list[str]) -> dict[str, FaultSettings]:
    if not specs:
        return {}
    from sources.faults import FaultSettings  # here, not at the top: start-up time

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
        str,
        typer.Argument(
            help="The question, naming a customer (email, CUST-NNNNN or name) and what to know; - reads it "
            "from stdin (a pasted email, say)."
        ),
    ],
    json_output: Annotated[
        bool, typer.Option("--json", help="Print the report as JSON (the stable interface for scripts).")
    ] = False,
    deadline: Annotated[float, typer.Option(help="Seconds for the whole query.")] = 30.0,
    transport: Annotated[
        Transport,
        typer.Option(
            help="stdio (start the sources for this query) or http (the running fleet: `research sources up`)."
        ),
    ] = Transport.stdio,
    faults: FaultsOption = None,
    seed: SeedOption = None,
    llm: LlmOption = Llm.auto,
    grant: GrantOption = None,
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
    query = _query_text(query)
    if not deadline > 0:
        raise usage_error(f"--deadline must be a positive number of seconds, e.g. 30; got {deadline:g}")
    fault_settings = _source_faults(faults or [])
    claude = claude_for(llm)
    if (
        transport == "http"
        and claude is None
        and not (fault_settings or chaos_spec or otlp or trace_payloads)
    ):
        _ask_the_coordinator_service(query, deadline, seed, json_output, grant or [])  # returns if none
    if transport == "stdio" and query.strip():
        from sources.forked import prestart

        # Before planning, so the sources' imports overlap this process's from the start. A query the
        # planner then refuses leaves the fork server to finish importing and leave on its own.
        prestart()
    from coordinator.planner import QueryError, plan_query  # light: reading a query imports no SDK

    try:
        plan = plan_query(query)
    except QueryError as exc:
        raise usage_error(str(exc)) from None
    # Here, after the cheap checks of the arguments and the query, not at the top: start-up time.
    import anyio
    from opentelemetry import trace

    from coordinator.cli import STARTED_AT  # the instant this command started: its deadline counts from it
    from coordinator.llm import TokenBudget
    from coordinator.query_chaos import kill_at, parse_query_chaos
    from coordinator.render import LiveProgress, print_report
    from coordinator.research import DEFAULT_GRANTS, ResearchOptions, make_plan, research
    from sources.settings import SourceSettings
    from subagents.broker import Grant

    try:
        chaos_faults, kills = parse_query_chaos(chaos_spec)
    except ValueError as exc:
        raise usage_error(str(exc)) from None
    fault_settings = {**fault_settings, **chaos_faults}
    if (fault_settings or kills) and transport == "http":
        raise usage_error(
            "--faults and --chaos apply to spawned (stdio) sources; with --transport http use `research chaos`"
        )

    if otlp and "otlp" not in os.environ.get("OTEL_TRACES_EXPORTER", ""):
        os.environ["OTEL_TRACES_EXPORTER"] = ",".join(
            filter(None, [os.environ.get("OTEL_TRACES_EXPORTER", "file"), "otlp"])
        )
    settings = _start_tracing(SourceSettings.from_environment(), trace_payloads)
    urls = _fleet_urls(settings) if transport == "http" else {}
    options = ResearchOptions(
        deadline_s=deadline, transport=transport, faults=fault_settings, seed=seed, urls=urls, claude=claude,
        grants=(*DEFAULT_GRANTS, *(Grant(scope) for scope in grant or [])),
        started_at=STARTED_AT,  # the deadline covers this command's start-up and planning too
    )  # fmt: skip
    budget, planning = None, None
    if claude is not None:  # planned before the run, so the progress shows Claude's plan
        budget = TokenBudget(claude.token_budget)
        plan, planning = anyio.run(make_plan, query, options, budget)
    console = Console(stderr=True)
    from coordinator.research import targets_for  # here, not at the top: start-up time
    from subagents.connection import Connections

    async def asking() -> ResearchReport:
        # This command owns the sessions: the report is printed the moment it is ready, and closing
        # the sessions (a hung source's included) happens after.
        async with Connections.opened(targets_for(settings, options)) as connections:
            async with anyio.create_task_group() as chaos_group:
                for source, seconds in kills:
                    chaos_group.start_soon(kill_at, source, seconds)
                report = await research(
                    query, options, settings=settings, observer=progress, plan=plan, planning=planning,
                    budget=budget, connections=connections,
                )  # fmt: skip
                chaos_group.cancel_scope.cancel()
            progress.finished(report)
            progress.close()
            if json_output:
                typer.echo(report.to_json())
            else:
                print_report(report, Console())
        return report

    progress = LiveProgress(plan, console)
    try:
        with progress:
            report = anyio.run(asking)
    except KeyboardInterrupt:  # the run was cancelled and its sessions closed on the way out
        still = progress.running()
        console.print(
            f"interrupted: {', '.join(still) if still else 'no task'} still running; nothing was reported"
        )
        raise typer.Exit(EXIT_INTERRUPTED) from None
    trace.get_tracer_provider().force_flush()  # type: ignore[attr-defined]
    if not json_output:
        from traces.setup import otlp_delivered  # here, not at the top: start-up time

        if otlp_delivered():  # None without --otlp; False when no collector took it (one warning said so)
            Console().print(f"Jaeger: {JAEGER_UI}/trace/{report.trace_id}")
        Console().print(f"[dim]research traces show {report.trace_id}[/]")
    exit_now(EXIT_COMPLETE if report.status == "complete" else EXIT_PARTIAL)


def _query_text(query: str) -> str:
    """The query as given, or read from stdin for ``-`` (a query too long for a command line)."""
    if query != "-":
        return query
    if sys.stdin.isatty():
        raise usage_error(
            "`research ask -` reads the query from stdin: pipe it in, e.g. research ask - < email.txt"
        )
    try:
        return sys.stdin.read()
    except UnicodeDecodeError:
        raise usage_error("the query on stdin is not UTF-8 text") from None


def _fleet_urls(settings: SourceSettings) -> dict[str, str]:
    """The running fleet's sources; no fleet at all is the way out named, not five unreachable gaps."""
    from sources.fleet import Fleet

    fleet = Fleet(settings)
    if not any(member.alive() for member in fleet.members().values()):
        raise usage_error(
            "no fleet is running for --transport http: start one with `research sources up`, "
            "or leave out --transport http to start the sources for this query"
        )
    return fleet.urls()


def _ask_the_coordinator_service(
    query: str, deadline: float, seed: int | None, json_output: bool, grants: list[str]
) -> None:
    """Against a running fleet, its coordinator service (``coordinator.service``) answers warm: this
    process imports neither the mcp SDK nor the sources. Returns only when there is no such service,
    or it does not answer (then this process researches itself, within what is left of the deadline)."""
    from coordinator import ask_service
    from coordinator.cli import STARTED_AT
    from sources.fleet import Fleet
    from sources.settings import SourceSettings, data_dir_from

    fleet = Fleet(SourceSettings(data_dir=data_dir_from()))
    service = fleet.members().get(ask_service.NAME)
    if service is None:  # no fleet: researching here says what is missing
        return
    if not service.alive():
        Console(stderr=True).print(
            f"[dim]the coordinator service is not running (`research chaos heal {ask_service.NAME}` restarts it); "
            "researching in this process[/]"
        )
        return
    console = Console()
    output = {"json": json_output, "width": console.width, "terminal": console.is_terminal}
    output["color_system"] = console.color_system
    try:
        answer = ask_service.ask(
            service.url, fleet.secret(), query, deadline_s=max(STARTED_AT + deadline - time.monotonic(), 0.01),
            seed=seed, output=output, grants=grants,
        )  # fmt: skip
    except ask_service.QueryRefused as refused:
        raise usage_error(str(refused)) from None
    except (ask_service.ServiceUnavailable, ValueError) as exc:  # ValueError: an unreadable fleet secret
        Console(stderr=True).print(f"[dim]{exc}; researching in this process[/]")
        return
    except KeyboardInterrupt:  # the service cancels the query when this process hangs up
        Console(stderr=True).print("interrupted: the query was cancelled; nothing was reported")
        raise typer.Exit(EXIT_INTERRUPTED) from None
    sys.stderr.write(answer.tasks)  # the tasks' table, as a query in this process leaves it on stderr
    sys.stdout.write(answer.output if answer.output.endswith("\n") else answer.output + "\n")
    if not json_output:
        console.print(f"[dim]research traces show {answer.trace_id}[/]")
    exit_now(EXIT_COMPLETE if answer.status == "complete" else EXIT_PARTIAL)


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
    grant: GrantOption = None,
    faults: FaultsOption = None,
    timeout: Annotated[float, typer.Option(help="Seconds per call.", min=0.1)] = 5.0,
    deadline: Annotated[float, typer.Option(help="Seconds for the whole task.", min=0.1)] = 30.0,
    seed: SeedOption = None,
    llm: LlmOption = Llm.auto,
) -> None:
    """Run one task through a subagent, showing every recovery decision, then its report as JSON.

    With --llm claude, Claude drives the subagent's calls and the code keeps its bounds and hooks.

    Exit status 0 for ok or a valid empty result, 1 when the task was escalated.

    Example: research task customers customer_lookup '{"identifier": " Jane.Doe@Example.com "}'
    """
    known_source(source)
    parsed = json_object(arguments)
    fault_settings = _source_faults(faults or [])
    if set(fault_settings) - {source}:
        raise usage_error(
            f"--faults names {', '.join(sorted(set(fault_settings) - {source}))}; this task calls {source}"
        )
    # Here, after the source and the arguments are checked, not at the top: start-up time.
    import random

    import anyio

    from sources.faults import FaultSettings
    from sources.settings import SourceSettings

    # Traced like a query: this process's spans and the source's join one trace (the run's id goes to it).
    settings = _start_tracing(
        SourceSettings.from_environment().with_faults(fault_settings.get(source, FaultSettings())), False
    )
    claude = claude_for(llm)
    from coordinator.cli import STARTED_AT  # the instant this command started: its deadline counts from it
    from subagents.broker import CredentialBroker, Grant
    from subagents.connection import Connections, stdio_target
    from subagents.policy import RecoveryPolicy
    from subagents.subagent import Runtime, Task, run_subagent
    from subagents.tool_loop import claude_subagents

    console = Console(stderr=True)

    async def running() -> Any:
        from traces.spans import command_span, end_command  # here, not at the top: start-up time

        # One root span for the command: the session's handshake and every call are its children.
        with command_span("task", f"{source}.{tool}") as span:
            async with (
                Connections.opened({source: stdio_target(source, settings)}) as connections,
                claude_subagents(claude) as model,
            ):
                runtime = Runtime(
                    connections=connections,
                    broker=CredentialBroker(
                        settings.signing_key(), grants=tuple(Grant(scope, purpose) for scope in grant or [])
                    ),
                    policy=RecoveryPolicy(call_timeout_s=timeout),
                    rng=random.Random(seed),  # noqa: S311  (back-off jitter, not cryptography)
                    observer=_Progress(console),
                    model=model,
                )
                task = Task(
                    id=f"{source}.{tool}", source=source, tool=tool, arguments=parsed, purpose=purpose
                )
                report = await run_subagent(
                    task, runtime, deadline=STARTED_AT + deadline
                )  # monotonic, as the clock
            end_command(span, status=report.state)
            return report

    report = anyio.run(running)
    Console().print_json(report.model_dump_json(exclude_none=True, by_alias=True))
    raise typer.Exit(1 if report.state == "escalated" else 0)
