"""`research ask`: the main job. Its arguments are checked, the query planned, the tasks run with a
live table of their progress, and the report rendered, each step by a function of its own."""

from __future__ import annotations

import functools
import sys
import time
from typing import TYPE_CHECKING, Annotated, Any, NamedTuple

import typer
from rich.console import Console

from coordinator.cli.common import (
    EXIT_COMPLETE,
    EXIT_INTERRUPTED,
    EXIT_PARTIAL,
    ApproveOption,
    FaultsOption,
    GrantOption,
    Llm,
    LlmOption,
    SeedOption,
    Transport,
    app,
    approvals_given,
    claude_or_deterministic,
    exit_now,
    jaeger_ui,
    load_registry,
    registry_catalog,
    start_tracing,
    terminal_confirm,
    usage_error,
)
from coordinator.cli.params import QueryChaos, SourceFaults, query_chaos
from coordinator.cli.started import STARTED_AT  # a deadline counts from it
from sources import bounds
from sources.deferred import deferred
from sources.processes import collector

if TYPE_CHECKING:
    from collections.abc import Mapping

    import anyio
    from opentelemetry import trace
    from opentelemetry.sdk import trace as trace_sdk

    from coordinator import approvals as approving
    from coordinator import ask_service, core, registered_tools
    from coordinator import query_chaos as chaos_kills
    from coordinator.planning import plan as planned
    from coordinator.planning import planner, reading
    from coordinator.planning.plan import Plan
    from coordinator.registry import Registry
    from coordinator.reporting import render
    from coordinator.reporting.report import PlanningSummary, ResearchReport
    from sources import catalogue
    from sources import faults as source_faults
    from sources import settings as source_settings
    from sources.faults import FaultSettings
    from sources.processes import fleet as fleets
    from sources.processes import forked, forked_ahead
    from sources.settings import SourceSettings
    from subagents import broker
    from subagents import claude as claude_mode
    from subagents.writes import Approval
    from traces import setup as tracing
else:
    anyio = deferred("anyio")
    trace = deferred("opentelemetry.trace")
    trace_sdk = deferred("opentelemetry.sdk.trace")
    ask_service = deferred("coordinator.ask_service")
    approving = deferred("coordinator.approvals")
    registered_tools = deferred("coordinator.registered_tools")
    core = deferred("coordinator.core")
    planned = deferred("coordinator.planning.plan")
    planner = deferred("coordinator.planning.planner")
    reading = deferred("coordinator.planning.reading")
    source_settings = deferred("sources.settings")
    fleets = deferred("sources.processes.fleet")
    forked = deferred("sources.processes.forked")
    forked_ahead = deferred("sources.processes.forked_ahead")
    catalogue = deferred("sources.catalogue")
    source_faults = deferred("sources.faults")
    chaos_kills = deferred("coordinator.query_chaos")
    render = deferred("coordinator.reporting.render")
    broker = deferred("subagents.broker")
    claude_mode = deferred("subagents.claude")
    tracing = deferred("traces.setup")

# The arguments of `research ask`, named here so that the command reads as what it does.
QueryArgument = Annotated[
    str,
    typer.Argument(
        help="The question, naming a customer (email, CUST-NNNNN or name) and what to know; - reads it "
        "from stdin (a pasted email, say)."
    ),
]
JsonOption = Annotated[
    bool, typer.Option("--json", help="Print the report as JSON (the stable interface for scripts).")
]
DeadlineOption = Annotated[float, typer.Option(metavar="SECONDS", help="Seconds for the whole query.")]
TransportOption = Annotated[
    Transport,
    typer.Option(
        help="stdio (start the sources for this query) or http (the running fleet: `research sources up`)."
    ),
]
ChaosOption = Annotated[
    QueryChaos | None,
    typer.Option(
        "--chaos",
        parser=query_chaos,
        metavar="KIND:SOURCE,...",
        help="Faults for this query's spawned sources, e.g. 'kill:customers@0.5s,hang:tickets,flaky:orders=0.3'.",
    ),
]
OtlpOption = Annotated[
    bool,
    typer.Option(
        "--otlp",
        help="Also send the trace over OTLP/HTTP (Jaeger on localhost:4318 unless OTEL_EXPORTER_OTLP_ENDPOINT says otherwise).",
    ),
]
TracePayloadsOption = Annotated[
    bool,
    typer.Option(
        "--trace-payloads",
        help="Keep queries, arguments and answers with personal data unredacted in traces, recordings and logs (local debugging only).",
    ),
]


class _Asked(NamedTuple):
    """What `research ask` was asked to do, its arguments checked."""

    query: str
    deadline: float
    transport: Transport
    faults: Mapping[str, FaultSettings]  # --faults and --chaos together, per source
    kills: tuple[tuple[str, float], ...]  # --chaos kill:SOURCE@TIME
    seed: int | None
    claude: claude_mode.ClaudeSettings | None
    claude_missing: bool  # --llm claude, and Claude cannot be asked (no key): deterministic, said so
    grants: tuple[str, ...]
    approvals: tuple[Approval, ...]  # --approve: the writes approved before the run
    json_output: bool
    otlp: bool
    trace_payloads: bool
    registry: Registry  # the sources in effect: the demo sources and those added to research.toml

    @property
    def for_the_service(self) -> bool:
        """Whether the fleet's coordinator service can answer it: over HTTP, deterministic, no more.
        The service knows the five demo sources only: with sources of the registry's own, the query is
        researched here (the demo sources at the fleet's URLs, the others as their entries say)."""
        untouched = not (
            self.faults or self.kills or self.otlp or self.trace_payloads or self.registry.entries
            or self.claude_missing  # its report says why it is deterministic
        )  # fmt: skip
        return self.transport == Transport.http and self.claude is None and untouched


@app.command("ask")
def ask(
    query: QueryArgument,
    json_output: JsonOption = False,
    deadline: DeadlineOption = 30.0,
    transport: TransportOption = Transport.stdio,
    faults: FaultsOption = None,
    seed: SeedOption = None,
    llm: LlmOption = Llm.auto,
    grant: GrantOption = None,
    approve: ApproveOption = None,
    chaos: ChaosOption = None,
    otlp: OtlpOption = False,
    trace_payloads: TracePayloadsOption = False,
) -> None:
    """Research a question across the five sources; every gap is annotated, nothing is dropped.

    Exit status 0 when the answer is complete, 3 when it is partial (see its gaps), 2 for a usage error.

    Example: research ask "Investigate jane.doe@example.com: recent orders, open tickets, and whether a £750 refund on ORD-10023 is allowed"
    """
    claude = claude_or_deterministic(llm)
    asked = _Asked(
        query=_query_text(query), deadline=_positive_deadline(deadline), transport=transport,
        faults=_merged_faults(faults or [], chaos), kills=chaos.kills if chaos is not None else (),
        seed=seed, claude=claude, claude_missing=llm == Llm.claude and claude is None,
        grants=tuple(grant or ()), approvals=approvals_given(approve), json_output=json_output, otlp=otlp,
        trace_payloads=trace_payloads, registry=load_registry(),
    )  # fmt: skip
    if asked.for_the_service:
        _ask_the_coordinator_service(asked)  # returns when there is no service to answer
    _check_spawned_only(asked)
    if asked.transport == Transport.stdio and asked.query.strip():
        # Before planning, so the sources' imports overlap this process's from the start. A query the
        # planner then refuses leaves the fork server to finish importing and leave on its own.
        forked.prestart()
    plan = _plan(asked.query, asked.registry, asked.deadline)
    _research_here(asked, plan)


def _query_text(query: str) -> str:
    """The query as given, or read from stdin for ``-`` (a query too long for a command line)."""
    if query != "-":
        return query
    if sys.stdin.isatty():
        raise usage_error(
            "`research ask -` reads the query from stdin: pipe it in, e.g. research ask - < email.txt"
        )
    limit = reading.MAX_QUERY_BYTES
    try:  # never more than a query's most bytes: 200 MB piped in costs this process those, not 200 MB
        return bounds.read_at_most(sys.stdin.buffer, limit).decode()
    except bounds.TooLarge:
        raise usage_error(
            f"the query on stdin is longer than {limit:,} bytes; keep it under "
            f"{reading.MAX_QUERY_CHARS:,} characters, e.g. the email's own text without its attachments"
        ) from None
    except UnicodeDecodeError:
        raise usage_error("the query on stdin is not UTF-8 text") from None


def _positive_deadline(deadline: float) -> float:
    if not deadline > 0:
        raise usage_error(f"--deadline must be a positive number of seconds, e.g. 30; got {deadline:g}")
    return deadline


def _merged_faults(faults: list[SourceFaults], chaos: QueryChaos | None) -> dict[str, FaultSettings]:
    """Each source's faults: the last --faults that names it, unless --chaos names it too."""
    merged = {given.source: given.settings for given in faults}
    return {**merged, **(chaos.faults if chaos is not None else {})}


def _check_spawned_only(asked: _Asked) -> None:
    if (asked.faults or asked.kills) and asked.transport == Transport.http:
        raise usage_error(
            "--faults and --chaos apply to spawned (stdio) sources; with --transport http use `research chaos`"
        )


def _plan(query: str, registry: Registry, deadline_s: float) -> Plan:
    """The deterministic planner's plan, or the usage error of a query it cannot research."""
    try:
        return planner.plan_query(query, registry_catalog(registry, deadline_s * planned.PLANNING_SHARE))
    except planner.QueryError as exc:
        raise usage_error(render.shown(str(exc), keep="")) from None


def _research_here(asked: _Asked, plan: Plan) -> None:
    """Research in this process: trace the run, plan with Claude in Claude mode, run the tasks with
    their progress on stderr, print the report, and exit by its status."""
    settings = start_tracing(
        source_settings.SourceSettings.from_environment(), full_payloads=asked.trace_payloads, otlp=asked.otlp
    )
    try:
        _fork_sources_ahead(asked, plan, settings)
        coordinator = _coordinator(asked, settings)
        collector.started_up()  # what the run needs is loaded (held off since the head start)
        budget, planning = None, None
        if asked.claude is not None:  # planned before the run, so the progress shows Claude's plan
            budget = claude_mode.TokenBudget(asked.claude.token_budget)
            plan, planning = anyio.run(
                functools.partial(
                    coordinator.plan,
                    asked.query,
                    deadline_s=asked.deadline,
                    started_at=STARTED_AT,
                    budget=budget,
                )
            )
        approvals, started_at = _approved(asked, plan, coordinator)
    except KeyboardInterrupt:  # before the run: the sources forked ahead leave as this process ends
        Console(stderr=True).print("interrupted: before any task started; nothing was reported")
        raise typer.Exit(EXIT_INTERRUPTED) from None
    report = _run_with_progress(asked, plan, coordinator, planning, budget, approvals, started_at)
    _after_the_report(report, asked.json_output)
    exit_now(EXIT_COMPLETE if report.status == "complete" else EXIT_PARTIAL)


def _fork_sources_ahead(asked: _Asked, plan: Plan, settings: SourceSettings) -> None:
    """The demo sources the plan calls, forked now with the environment their sessions will fork them
    with (``DemoSource.connect``, as ``core.Config.targets`` gives it faults): they start while this
    process imports the mcp client, not while it waits for their first answers. Only where the plan is
    the one that runs over stdio, and every source is a demo source."""
    if asked.transport != Transport.stdio or asked.claude is not None or asked.registry.entries:
        return
    for source in sorted({task.source for task in plan.tasks.values()} & set(catalogue.SOURCES)):
        faults = asked.faults.get(source, source_faults.FaultSettings())
        forked_ahead.fork_ahead(source, settings.with_faults(faults).child_environment())


def _approved(asked: _Asked, plan: Plan, coordinator: core.Coordinator) -> tuple[tuple[Approval, ...], float]:
    """The writes approved for this run: by --approve, and at a prompt in a terminal for each other
    write the run may make. A person's time at the prompt is not the query's: its deadline then
    counts from the last answer."""
    config = coordinator.config
    effects = registered_tools.tool_effects(config.registry, config.settings.data_dir)
    requests = approving.write_requests(plan, coordinator.asked_writes(asked.query), effects)
    approvals, prompted = approving.approvals_for(requests, asked.approvals, terminal_confirm())
    return approvals, (time.monotonic() if prompted else STARTED_AT)


def _coordinator(asked: _Asked, settings: SourceSettings) -> core.Coordinator:
    return core.Coordinator(
        core.Config.for_ask(
            settings, asked.registry, asked.claude, grants=map(broker.Grant, asked.grants), faults=asked.faults,
            fleet=_fleet_urls(settings) if asked.transport == Transport.http else None,
        )
    )  # fmt: skip


def _fleet_urls(settings: SourceSettings) -> dict[str, str]:
    """The running fleet's sources; no fleet at all is the way out named, not five unreachable gaps."""
    fleet = fleets.Fleet(settings)
    if not any(member.alive() for member in fleet.members().values()):
        raise usage_error(
            "no fleet is running for --transport http: start one with `research sources up`, "
            "or leave out --transport http to start the sources for this query"
        )
    return fleet.urls()


def _run_with_progress(
    asked: _Asked, plan: Plan, coordinator: core.Coordinator, planning: PlanningSummary | None,
    budget: claude_mode.TokenBudget | None, approvals: tuple[Approval, ...], started_at: float,
) -> ResearchReport:  # fmt: skip
    """Run the plan with a live table of its tasks on stderr; Ctrl-C cancels it and says what ran."""
    console = Console(stderr=True)
    progress = render.LiveProgress(plan, console)

    async def asking() -> ResearchReport:
        return await _research_and_print(
            asked, plan, coordinator, planning, budget, progress, approvals, started_at
        )

    try:
        with progress:
            return anyio.run(asking)
    except KeyboardInterrupt:  # the run was cancelled and its sessions closed on the way out
        still = progress.running()
        console.print(
            f"interrupted: {', '.join(still) if still else 'no task'} still running; nothing was reported"
        )
        raise typer.Exit(EXIT_INTERRUPTED) from None


async def _research_and_print(
    asked: _Asked, plan: Plan, coordinator: core.Coordinator, planning: PlanningSummary | None,
    budget: claude_mode.TokenBudget | None, progress: render.LiveProgress,
    approvals: tuple[Approval, ...], started_at: float,
) -> ResearchReport:  # fmt: skip
    """Research on sessions this command owns, killing sources at the times --chaos says, and print
    the report the moment it is ready: closing the sessions (a hung source's included) comes after."""
    async with coordinator:
        async with anyio.create_task_group() as chaos_group:
            for source, seconds in asked.kills:
                registered = source in asked.registry.entries
                chaos_group.start_soon(
                    functools.partial(chaos_kills.kill_at, source, seconds, registered=registered)
                )
            report = await coordinator.research(
                asked.query, deadline_s=asked.deadline, seed=asked.seed, plan=plan, planning=planning,
                budget=budget, observer=progress, approvals=approvals,
                started_at=started_at,  # the deadline covers this command's start-up and planning too
            )  # fmt: skip
            chaos_group.cancel_scope.cancel()
        if asked.claude_missing:
            note = (
                f"a deterministic run: --llm claude, but {claude_mode.MISSING_KEY}; "
                "the plan, the calls and the answer are the code's"
            )
            report = report.model_copy(update={"notes": [*report.notes, note]})
        progress.finished(report)
        progress.close()
        _print_report(report, asked.json_output)
    return report


def _print_report(report: ResearchReport, json_output: bool) -> None:
    if json_output:
        typer.echo(report.to_json())
    else:
        render.print_report(report, Console())


def _after_the_report(report: ResearchReport, json_output: bool) -> None:
    """Flush the trace; under a report for people, say where to see it."""
    provider = trace.get_tracer_provider()
    if isinstance(provider, trace_sdk.TracerProvider):  # the SDK's, as the run configured it
        provider.force_flush()
    if json_output:
        return
    if tracing.otlp_delivered():  # None without --otlp; False when no collector took it (one warning said so)
        Console().print(f"Jaeger: {jaeger_ui()}/trace/{report.trace_id}")
    Console().print(f"[dim]research traces show {report.trace_id}[/]")


def _ask_the_coordinator_service(asked: _Asked) -> None:
    """Against a running fleet, its coordinator service (``coordinator.service``) answers warm: this
    process imports neither the mcp SDK nor the sources. Returns only when there is no such service,
    or it does not answer (then this process researches itself, within what is left of the deadline)."""
    fleet = fleets.Fleet(source_settings.SourceSettings(data_dir=source_settings.data_dir_from()))
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
    try:
        answer = ask_service.ask(
            service.url, fleet.secret(), asked.query,
            deadline_s=max(STARTED_AT + asked.deadline - time.monotonic(), 0.01), seed=asked.seed,
            output=_terminal(console, asked.json_output), grants=list(asked.grants),
            approvals=[str(approval) for approval in asked.approvals],
        )  # fmt: skip
    except ask_service.QueryRefused as refused:
        raise usage_error(render.shown(str(refused), keep="")) from None
    except (ask_service.ServiceUnavailable, ValueError) as exc:  # ValueError: an unreadable fleet secret
        Console(stderr=True).print(f"[dim]{exc}; researching in this process[/]")
        return
    except KeyboardInterrupt:  # the service cancels the query when this process hangs up
        Console(stderr=True).print("interrupted: the query was cancelled; nothing was reported")
        raise typer.Exit(EXIT_INTERRUPTED) from None
    sys.stderr.write(answer.tasks)  # the tasks' table, as a query in this process leaves it on stderr
    sys.stdout.write(answer.output if answer.output.endswith("\n") else answer.output + "\n")
    if not asked.json_output:
        console.print(f"[dim]research traces show {answer.trace_id}[/]")
    exit_now(EXIT_COMPLETE if answer.status == "complete" else EXIT_PARTIAL)


def _terminal(console: Console, json_output: bool) -> dict[str, Any]:
    """How the service is to render its answer for this terminal."""
    return {
        "json": json_output,
        "width": console.width,
        "terminal": console.is_terminal,
        "color_system": console.color_system,
    }
