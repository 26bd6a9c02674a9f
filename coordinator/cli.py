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
import uuid
from typing import Annotated, Any

import anyio
import typer
from mcp import Client, StdioServerParameters
from opentelemetry import trace
from rich.console import Console
from rich.table import Table

from coordinator.plan import QueryError, plan_query
from coordinator.render import LiveProgress, print_report
from coordinator.research import ResearchOptions, research
from sources.auth import CREDENTIAL_META_KEY, issue_credential
from sources.catalogue import SOURCES
from sources.contract import Decision
from sources.faults import FaultSettings
from sources.settings import SourceSettings
from subagents.broker import CredentialBroker, Grant
from subagents.connection import Connections, stdio_target
from subagents.policy import RecoveryPolicy
from subagents.subagent import Runtime, Task, run_subagent
from traces.files import load_traces
from traces.setup import configure_tracing, exporter_names
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
                f"--faults takes SOURCE:SETTINGS with a source among {', '.join(SOURCES)}, e.g. tickets:transient=0.5,seed=4; got {spec!r}"
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
            help="Inject faults into one spawned source, e.g. 'tickets:transient=0.5,seed=4' (repeatable).",
        ),
    ] = None,
    seed: Annotated[int | None, typer.Option(help="Seed of the back-off jitter, to replay a run.")] = None,
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
    if fault_settings and transport == "http":
        raise _usage_error(
            "--faults applies to spawned (stdio) sources; with --transport http use the fleet's chaos commands"
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
    options = ResearchOptions(deadline_s=deadline, transport=transport, faults=fault_settings, seed=seed)
    console = Console(stderr=True)
    with LiveProgress(plan, console) as progress:
        report = anyio.run(lambda: research(query, options, settings=settings, observer=progress, plan=plan))
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
