"""The `research` command line.

    research ask "Investigate jane.doe@example.com: recent orders, open tickets, and whether a £750 refund on ORD-10023 is allowed"

research sources list
research sources call customers customer_lookup '{"identifier": "jane.doe@example.com"}'
research sources call billing list_invoices '{"customer_id": "CUST-00042"}' --scope billing:read
"""

from __future__ import annotations

import dataclasses
import json
import os
import sys
import tempfile
import time
import uuid
from collections import Counter
from collections.abc import Callable
from pathlib import Path
from typing import Annotated, Any

import anyio
import typer
from mcp import Client, StdioServerParameters
from opentelemetry import trace
from rich.console import Console
from rich.table import Table

from coordinator import chaos
from coordinator.plan import QueryError, plan_query
from coordinator.render import LiveProgress, print_report
from coordinator.report import ResearchReport
from coordinator.research import ResearchOptions, research
from sources.auth import CREDENTIAL_META_KEY, issue_credential
from sources.catalogue import SOURCES
from sources.contract import Decision
from sources.faults import FaultSettings
from sources.fleet import Fleet, FleetError
from sources.settings import SourceSettings
from sources.world import ensure_world
from subagents.broker import CredentialBroker, Grant
from subagents.connection import Connections, stdio_target
from subagents.policy import RecoveryPolicy
from subagents.subagent import Runtime, Task, run_subagent
from traces.files import load_traces
from traces.setup import configure_tracing, ensure_tracing, exporter_names
from traces.viewer import latest_trace_id, render_trace, trace_table

app = typer.Typer(
    help="Research coordinator: fan a question out to five MCP sources, recover from their failures, "
    'annotate every gap.\n\nExample: research ask "Investigate jane.doe@example.com: recent orders and open tickets"',
    no_args_is_help=True,
)
sources_app = typer.Typer(
    help="The five MCP sources: list them, call one.\n\nExample: research sources call customers customer_lookup "
    '\'{"identifier": "CUST-00042"}\'',
    no_args_is_help=True,
)
app.add_typer(sources_app, name="sources")
traces_app = typer.Typer(
    help="Traces written by research runs to the local files.\n\nExample: research traces show latest",
    no_args_is_help=True,
)
app.add_typer(traces_app, name="traces")

JAEGER_UI = "http://localhost:16686"

chaos_app = typer.Typer(
    help="Break a running fleet on purpose: kill, hang, slow, flaky, garbage, heal.\n\n"
    "Example: research sources up --chaos && research chaos kill customers",
    no_args_is_help=True,
)
app.add_typer(chaos_app, name="chaos")

_CALL_TIMEOUT_SECONDS = 15.0

# Exit statuses of `research ask`.
EXIT_COMPLETE, EXIT_FAILED, EXIT_USAGE, EXIT_PARTIAL = 0, 1, 2, 3


def _usage_error(message: str) -> typer.Exit:
    """A usage error: one line on stderr, the usage exit status, no traceback."""
    typer.echo(f"error: {message}", err=True)
    return typer.Exit(EXIT_USAGE)


def _start_tracing(settings: SourceSettings, full_payloads: bool) -> SourceSettings:
    """Configure this process's tracing; the returned settings carry the run's id to the sources."""
    try:
        exporters = exporter_names()
    except ValueError as exc:
        raise _usage_error(str(exc)) from None
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
            raise _usage_error(
                f"--faults takes SOURCE:SETTINGS with a source among {', '.join(SOURCES)}, e.g. tickets:transient=0.5,seed=13; got {spec!r}"
            )
        try:
            faults[source] = FaultSettings.parse(settings)
        except ValueError as exc:
            raise _usage_error(f"--faults {source}: {exc}") from None
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
        raise _usage_error(f"--transport must be stdio or http, not {transport!r}")
    if not deadline > 0:
        raise _usage_error(f"--deadline must be a positive number of seconds, e.g. 30; got {deadline:g}")
    fault_settings = _source_faults(faults or [])
    try:
        chaos_faults, kills = chaos.parse_query_chaos(chaos_spec)
    except ValueError as exc:
        raise _usage_error(str(exc)) from None
    fault_settings = {**fault_settings, **chaos_faults}
    if (fault_settings or kills) and transport == "http":
        raise _usage_error(
            "--faults and --chaos apply to spawned (stdio) sources; with --transport http use `research chaos`"
        )
    try:
        plan = plan_query(query)
    except QueryError as exc:
        raise _usage_error(str(exc)) from None
    if otlp and "otlp" not in os.environ.get("OTEL_TRACES_EXPORTER", ""):
        os.environ["OTEL_TRACES_EXPORTER"] = ",".join(
            filter(None, [os.environ.get("OTEL_TRACES_EXPORTER", "file"), "otlp"])
        )
    settings = _start_tracing(SourceSettings.from_environment(), trace_payloads)
    urls = Fleet(settings).urls() if transport == "http" else {}
    options = ResearchOptions(
        deadline_s=deadline, transport=transport, faults=fault_settings, seed=seed, urls=urls
    )
    console = Console(stderr=True)

    async def asking() -> ResearchReport:
        async with anyio.create_task_group() as chaos_group:
            for source, seconds in kills:
                chaos_group.start_soon(chaos.kill_at, source, seconds)
            report = await research(query, options, settings=settings, observer=progress, plan=plan)
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


def _stdio(source: str, settings: SourceSettings) -> StdioServerParameters:
    # A stdio child sees only a safe subset of this environment: pass what it needs explicitly.
    return StdioServerParameters(
        command=sys.executable, args=["-m", f"sources.{source}"], env=settings.child_environment()
    )


def _json_object(arguments: str) -> dict[str, Any]:
    try:
        parsed: Any = json.loads(arguments)
    except json.JSONDecodeError as exc:
        raise typer.BadParameter(
            f'arguments must be a JSON object, e.g. \'{{"identifier": "CUST-00042"}}\': {exc}'
        ) from None
    if not isinstance(parsed, dict):
        raise typer.BadParameter('arguments must be a JSON object, e.g. \'{"identifier": "CUST-00042"}\'')
    return parsed


def _known_source(source: str) -> str:
    if source not in SOURCES:
        raise typer.BadParameter(f"unknown source {source!r}; choose one of {', '.join(SOURCES)}")
    return source


@sources_app.command("list")
def list_sources() -> None:
    """List the five sources and their tools (each source is spawned over stdio to ask it).

    Example: research sources list
    """

    async def listing() -> dict[str, list[str]]:
        settings = SourceSettings.from_environment()
        found: dict[str, list[str]] = {}

        async def ask(source: str) -> None:
            async with Client(_stdio(source, settings), read_timeout_seconds=_CALL_TIMEOUT_SECONDS) as client:
                found[source] = [tool.name for tool in (await client.list_tools()).tools]

        with anyio.fail_after(_CALL_TIMEOUT_SECONDS):
            async with anyio.create_task_group() as group:
                for source in SOURCES:
                    group.start_soon(ask, source)
        return found

    table = Table("source", "tools", "transport")
    found = anyio.run(listing)
    for source in SOURCES:
        tools = found[source]
        table.add_row(source, ", ".join(tools), f"stdio: python -m sources.{source}")
    Console().print(table)


@sources_app.command("call")
def call_source(
    source: Annotated[str, typer.Argument(help="customers, orders, billing, tickets or kb.")],
    tool: Annotated[str, typer.Argument(help="The tool to call, e.g. customer_lookup.")],
    arguments: Annotated[
        str, typer.Argument(help='The arguments as a JSON object, e.g. \'{"identifier": "CUST-00042"}\'.')
    ] = "{}",
    scope: Annotated[
        list[str] | None,
        typer.Option("--scope", help="Call with a credential holding this scope (repeatable)."),
    ] = None,
    url: Annotated[
        str | None,
        typer.Option(help="Call a source already serving HTTP at this URL instead of spawning it."),
    ] = None,
) -> None:
    """Call one tool of one source and print the contract JSON it answers with.

    Exit status 0 for a result (valid empty results included), 1 for a tool error.

    Example: research sources call billing refund_eligibility '{"order_id": "ORD-10023", "amount": 750}' --scope billing:read
    """
    _known_source(source)
    parsed = _json_object(arguments)
    settings = SourceSettings.from_environment()
    meta = {CREDENTIAL_META_KEY: issue_credential(settings.key(), "research-cli", scope)} if scope else None

    async def calling() -> tuple[bool, Any]:
        with anyio.fail_after(_CALL_TIMEOUT_SECONDS):
            async with Client(
                url or _stdio(source, settings), read_timeout_seconds=_CALL_TIMEOUT_SECONDS
            ) as client:
                result = await client.call_tool(
                    tool, parsed, read_timeout_seconds=_CALL_TIMEOUT_SECONDS, meta=meta
                )
        return result.is_error, result.structured_content

    is_error, payload = anyio.run(calling)
    Console().print_json(data={"isError": is_error, **(payload or {})})
    raise typer.Exit(1 if is_error else 0)


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
) -> None:
    """Run one task through a subagent, showing every recovery decision, then its report as JSON.

    Exit status 0 for ok or a valid empty result, 1 when the task was escalated.

    Example: research task customers customer_lookup '{"identifier": " Jane.Doe@Example.com "}'
    """
    _known_source(source)
    parsed = _json_object(arguments)
    try:
        fault_settings = FaultSettings.parse(faults)
    except ValueError as exc:
        raise typer.BadParameter(str(exc)) from None
    settings = SourceSettings.from_environment().with_faults(fault_settings)
    console = Console(stderr=True)

    async def running() -> Any:
        async with Connections.opened({source: stdio_target(source, settings)}) as connections:
            runtime = Runtime(
                connections=connections,
                broker=CredentialBroker(
                    settings.key(), grants=tuple(Grant(scope, purpose) for scope in grant or [])
                ),
                policy=RecoveryPolicy(call_timeout_s=timeout),
                observer=_Progress(console),
            )
            task = Task(id=f"{source}.{tool}", source=source, tool=tool, arguments=parsed, purpose=purpose)
            return await run_subagent(task, runtime, deadline=runtime.clock.now() + deadline)

    report = anyio.run(running)
    Console().print_json(report.model_dump_json(exclude_none=True, by_alias=True))
    raise typer.Exit(1 if report.state == "escalated" else 0)


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
        raise _usage_error(f"no trace {trace_id!r} in the local trace files; {known}")
    Console().print(render_trace(wanted, traces[wanted]))


def _fleet() -> Fleet:
    return Fleet(SourceSettings.from_environment())


def _fleet_call(action: Callable[[], Any]) -> Any:
    try:
        return action()
    except FleetError as exc:
        typer.echo(f"error: {exc}", err=True)
        raise typer.Exit(1) from None


def _ports(specs: list[str]) -> dict[str, int]:
    ports = {}
    for spec in specs:
        source, sep, port = spec.partition("=")
        if not sep or source not in SOURCES or not port.isdigit() or not 0 < int(port) < 65536:
            raise _usage_error(
                f"--port takes SOURCE=PORT with a source among {', '.join(SOURCES)}, e.g. kb=9105; got {spec!r}"
            )
        ports[source] = int(port)
    return ports


@sources_app.command("up")
def fleet_up(
    chaos: Annotated[
        bool,
        typer.Option("--chaos", help="Accept run-time faults (hang, slow, flaky, garbage) on 127.0.0.1."),
    ] = False,
    port: Annotated[
        list[str] | None,
        typer.Option("--port", help="SOURCE=PORT to move a source off its default port (repeatable)."),
    ] = None,
) -> None:
    """Start the five sources as streamable-HTTP services on 127.0.0.1:8101-8105 and wait until each answers.

    Example: research sources up --chaos
    """
    ports = _ports(port or [])
    members = _fleet_call(lambda: _fleet().up(ports, chaos_control=chaos))
    for member in members.values():
        typer.echo(f"{member.source:10} pid {member.pid:<7} {member.url}")


@sources_app.command("status")
def fleet_status() -> None:
    """Show each source of the fleet: pid, port, uptime, health.

    Example: research sources status
    """
    fleet = _fleet()
    members = fleet.members()
    if not members:
        typer.echo("no fleet: `research sources up` starts one", err=True)
        raise typer.Exit(1)
    table = Table("source", "pid", "port", "uptime", "health", "faults")
    for member in members.values():
        alive = member.alive()
        health = fleet.health(member) if alive else None
        uptime = f"{time.time() - member.started_at:.0f} s" if alive else "-"
        state = "ok" if health else ("dead" if not alive else "not answering")
        table.add_row(
            member.source,
            str(member.pid),
            str(member.port),
            uptime,
            state,
            (health or {}).get("faults") or "-",
        )
    Console().print(table)


@sources_app.command("down")
def fleet_down() -> None:
    """Stop every source of the fleet.

    Example: research sources down
    """
    stopped = _fleet().down()
    typer.echo(f"stopped {', '.join(stopped)}" if stopped else "nothing was running")


def _chaos(source: str, faults: FaultSettings) -> None:
    _known_source(source)
    state = _fleet_call(lambda: _fleet().set_faults(source, faults))
    typer.echo(f"{source}: faults now {state['faults'] or 'none'}")


@chaos_app.command("kill")
def chaos_kill(source: Annotated[str, typer.Argument(help="The source to SIGKILL.")]) -> None:
    """SIGKILL one source of the fleet.

    Example: research chaos kill customers
    """
    _known_source(source)
    member = _fleet_call(lambda: _fleet().kill(source))
    typer.echo(f"{source}: killed (pid {member.pid})")


@chaos_app.command("heal")
def chaos_heal(source: Annotated[str, typer.Argument(help="The source to bring back to normal.")]) -> None:
    """Back to normal: restart a dead source where it was, or clear a live one's faults.

    Example: research chaos heal customers
    """
    _known_source(source)
    member = _fleet_call(lambda: _fleet().heal(source))
    typer.echo(f"{source}: healthy (pid {member.pid}, {member.url})")


@chaos_app.command("hang")
def chaos_hang(
    source: Annotated[str, typer.Argument(help="The source that will accept calls and never answer.")],
) -> None:
    """Make a source accept every call and never answer.

    Example: research chaos hang tickets
    """
    _chaos(source, FaultSettings(hang=1))


@chaos_app.command("slow")
def chaos_slow(
    source: Annotated[str, typer.Argument(help="The source to slow down.")],
    ms: Annotated[float, typer.Option("--ms", min=0, help="Added latency per call, in milliseconds.")] = 1000,
    jitter: Annotated[
        float, typer.Option("--jitter", min=0, help="Latency varies by up to this much either way.")
    ] = 0,
) -> None:
    """Add latency (with jitter) to every call of a source.

    Example: research chaos slow orders --ms 800 --jitter 200
    """
    _chaos(source, FaultSettings(latency_ms=ms, jitter_ms=jitter))


@chaos_app.command("flaky")
def chaos_flaky(
    source: Annotated[str, typer.Argument(help="The source to make flaky.")],
    rate: Annotated[
        float, typer.Option("--rate", min=0, max=1, help="Probability of a transient failure per call.")
    ] = 0.5,
    seed: Annotated[int, typer.Option(help="Seed of the fault dice.")] = 0,
) -> None:
    """Fail a share of a source's calls with a transient error.

    Example: research chaos flaky orders --rate 0.3
    """
    _chaos(source, FaultSettings(transient=rate, seed=seed))


@chaos_app.command("garbage")
def chaos_garbage(
    source: Annotated[str, typer.Argument(help="The source whose answers get corrupted.")],
    rate: Annotated[float, typer.Option("--rate", min=0, max=1, help="Probability per call.")] = 1.0,
) -> None:
    """Corrupt a source's answers on the wire.

    Example: research chaos garbage kb
    """
    _chaos(source, FaultSettings(garbage=rate))


@chaos_app.command("run")
def chaos_run(
    scenarios: Annotated[
        int, typer.Option("--scenarios", min=1, help="How many random scenarios to run.")
    ] = 20,
    seed: Annotated[
        int, typer.Option(help="Seed of the scenario dice: the same seed, the same scenarios.")
    ] = 1,
    replay: Annotated[
        int | None, typer.Option(help="Run exactly the one scenario with this seed (printed on a violation).")
    ] = None,
    soak: Annotated[
        int | None,
        typer.Option(
            help="Instead: run this many queries through this one process against the HTTP fleet, and report "
            "memory, open files and child processes."
        ),
    ] = None,
) -> None:
    """Run random fault scenarios against the sources and check the invariants after each.

    Exit status 1 when any invariant is violated; each violation prints the command that replays it.

    Example: research chaos run --scenarios 200 --seed 1
    """
    if soak is not None:
        _soak(soak, seed)
        return
    chosen = [chaos.scenario_from(replay)] if replay is not None else chaos.scenarios(scenarios, seed)
    console = Console()
    with tempfile.TemporaryDirectory() as data_dir:  # a world of its own: chaos refunds stay out of yours
        settings = SourceSettings(
            data_dir=Path(data_dir), kb_warmup_ms=0, tickets_rate_per_second=1000, tickets_burst=1000
        )
        ensure_world(settings.data_dir, settings.seed)
        ensure_tracing("research-coordinator")
        started = time.monotonic()
        results = []
        for index, scenario in enumerate(chosen, 1):
            result = anyio.run(lambda scenario=scenario: chaos.run_scenario(scenario, settings))
            results.append(result)
            mark = "[red]VIOLATION[/]" if result.violations else "[green]ok[/]"
            console.print(
                f"{index:4}/{len(chosen)} seed {scenario.seed:<11} {scenario.describe():48} {result.elapsed_s:5.2f} s {mark}"
            )
        elapsed = time.monotonic() - started
    faults = Counter(name for result in results for name in result.scenario.faults.values())
    violations = Counter(kind for result in results for kind, _ in result.violations)
    table = Table("scenarios", "faults injected", "violations by invariant", "time")
    table.add_row(
        str(len(results)),
        "\n".join(f"{name} {count}" for name, count in sorted(faults.items())),
        "\n".join(f"{kind} {count}" for kind, count in sorted(violations.items())) or "none",
        f"{elapsed:.1f} s",
    )
    console.print(table)
    for result in results:
        for kind, what in result.violations:
            console.print(f"[red]{kind}[/] seed {result.scenario.seed}: {what}")
            console.print(f"  replay: research chaos run --replay {result.scenario.seed}")
    raise typer.Exit(1 if violations else 0)


def _soak(count: int, seed: int) -> None:
    settings = SourceSettings.from_environment()
    fleet = Fleet(settings)
    urls = fleet.urls()
    if not urls or not all(member.alive() for member in fleet.members().values()):
        raise _usage_error("the soak runs against the HTTP fleet: `research sources up --chaos` first")
    ensure_tracing("research-coordinator")
    flaky = "orders"
    if all(member.chaos_control for member in fleet.members().values()):
        fleet.set_faults(flaky, FaultSettings(transient=0.3, seed=seed))
    started = time.monotonic()
    samples = anyio.run(chaos.soak, count, urls, settings, seed)
    if all(member.chaos_control for member in fleet.members().values()):
        fleet.set_faults(flaky, FaultSettings())
    table = Table("after queries", "memory (RSS)", "open files", "child processes")
    for point in samples:
        table.add_row(
            str(point.queries), f"{point.rss_mb:.1f} MB", str(point.open_files), str(point.children)
        )
    console = Console()
    console.print(table)
    early = next((point for point in samples if point.queries >= min(count, 50)), samples[-1])
    growth = (samples[-1].rss_mb / early.rss_mb - 1) * 100
    console.print(
        f"{count} queries in {time.monotonic() - started:.0f} s; memory {growth:+.1f} % since query {early.queries} "
        f"(target within 10 %); open files {samples[1].open_files if len(samples) > 1 else samples[0].open_files} -> "
        f"{samples[-1].open_files}; child processes {samples[0].children} -> {samples[-1].children}"
    )
