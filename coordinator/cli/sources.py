"""`research sources`: list and call the sources; start, watch and stop the fleet."""

from __future__ import annotations

import functools
import json
import time
from typing import TYPE_CHECKING, Annotated, Any, NamedTuple

import typer
from rich.console import Console
from rich.table import Table

from coordinator.cli.common import (
    ArgumentsArgument,
    SourceArgument,
    fleet,
    fleet_call,
    load_registry,
    load_source,
    sources_app,
    start_tracing,
    usage_error,
)
from coordinator.cli.params import MemberPort, http_url, listen_address, member_port
from coordinator.cli.task import approvals_for_task, run_one
from sources.catalogue import SOURCES, input_schemas
from sources.deferred import deferred

if TYPE_CHECKING:
    import anyio

    from coordinator import ask_service, core, registered_tools
    from coordinator.registry import SourceEntry
    from sources import settings as source_settings
    from sources.processes.fleet import MemberStatus
    from subagents import subagent
    from subagents.sessions import connection
    from subagents.sessions.connection import Target
else:
    anyio = deferred("anyio")
    ask_service = deferred("coordinator.ask_service")
    core = deferred("coordinator.core")
    registered_tools = deferred("coordinator.registered_tools")
    source_settings = deferred("sources.settings")
    subagent = deferred("subagents.subagent")
    connection = deferred("subagents.sessions.connection")

_CALL_TIMEOUT_SECONDS = 15.0  # listing a source's tools, or one call of `sources call`


def _call_target(entry: SourceEntry, settings: source_settings.SourceSettings, url: str | None) -> Target:
    """Where `sources call` reaches a source: spawned for the one call, or at ``url``. A demo source
    there is dialled with the bearer token a fleet off loopback requires (as a batch's worker dials
    it); a registered source's URL is its own server's, called as given."""
    if url is None:
        return entry.connect(settings, settings.faults, over="spawn")
    if entry.name in SOURCES:
        return entry.connect(settings, settings.faults, over="http", url=url)
    return connection.http_target(url)


@sources_app.command("list")
def list_sources(
    live: Annotated[
        bool,
        typer.Option(
            "--live",
            help="Spawn each source over stdio and ask it for its tools, instead of reading the catalogue.",
        ),
    ] = False,
    json_output: Annotated[
        bool, typer.Option("--json", help="Print {source: [tool, ...]} as JSON, for scripts.")
    ] = False,
) -> None:
    """List the sources and their tools: the five demo sources, read from the catalogue, and those
    added to the registry (`research sources add`), as last listed. No source is started.

    The catalogue (sources/tools.json) is what the planner checks arguments against; tests keep it
    equal to what the sources answer. With --live, each demo source is spawned over stdio and asked.

    Example: research sources list
    """
    registry = load_registry()
    found = _live_tools() if live else {source: list(tools) for source, tools in input_schemas().items()}
    rows: list[tuple[str, list[str] | None, str]] = [
        (source, found[source], f"stdio: python -m sources.{source}") for source in SOURCES
    ]
    for entry in registry.entries.values():  # its tools as last listed (None if never): no source starts
        kept = registered_tools.cached_tools(entry, source_settings.data_dir_from())
        rows.append((entry.name, [tool.name for tool in kept] if kept is not None else None, entry.where))
    if json_output:
        typer.echo(json.dumps({name: tools or [] for name, tools, _ in rows}, indent=2))
        return
    table = Table("source", "tools", "transport")
    for name, tools, where in rows:
        shown = ", ".join(tools) if tools is not None else "(not listed yet: `research sources check`)"
        table.add_row(name, shown, where)
    Console().print(table)


def _live_tools() -> dict[str, list[str]]:
    """Each source's tools as the source itself answers ``tools/list``, spawned over stdio."""

    async def listing() -> dict[str, list[str]]:
        settings = source_settings.SourceSettings.from_environment()
        found: dict[str, list[str]] = {}

        async def ask(source: str) -> None:
            target = connection.stdio_parameters(source, settings)
            listed = await registered_tools.tools_at(target, timeout_s=_CALL_TIMEOUT_SECONDS)
            found[source] = [tool.name for tool in listed]

        with anyio.fail_after(_CALL_TIMEOUT_SECONDS):
            async with anyio.create_task_group() as group:
                for source in SOURCES:
                    group.start_soon(ask, source)
        return found

    return anyio.run(listing)


@sources_app.command("call")
def call_source(
    source: SourceArgument,
    tool: Annotated[str, typer.Argument(help="The tool to call, e.g. customer_lookup.")],
    arguments: ArgumentsArgument = None,
    scope: Annotated[
        list[str] | None,
        typer.Option(
            "--scope", metavar="SCOPE", help="Call with a credential holding this scope (repeatable)."
        ),
    ] = None,
    url: Annotated[
        str | None,
        typer.Option(
            parser=http_url,
            metavar="URL",
            help="Call the source serving streamable HTTP at this URL (e.g. http://127.0.0.1:8101/mcp, "
            "a fleet's: `research sources status`) instead of spawning it.",
        ),
    ] = None,
    yes: Annotated[
        bool, typer.Option("--yes", help="Approve the call if its tool writes (as a yes at the prompt).")
    ] = False,
) -> None:
    """Call one tool of one source and print the contract JSON it answers with.

    Made through the coordinator, as `research task` makes its task: a transient failure is sent once
    more (after the retryAfterMs it gave, as kb does warming up on its first start; never past the
    call's deadline; a write only if it is safe to resend: idempotent, or keyed).

    A tool that does not say it only reads (readOnlyHint) is a write: it is called only with a yes at
    the prompt in a terminal, or --yes, and within the write guards (the refund limit among them).
    Exit status 0 for a result (valid empty results included), 1 for a tool error or a source that
    cannot be reached, 2 for a usage error.

    Example: research sources call billing refund_eligibility '{"order_id": "ORD-10023", "amount": 750}' --scope billing:read
    """
    registry, entry = load_source(source)
    known = entry.known_tools()  # None: its server answers an unknown tool itself (classified)
    if known is not None and tool not in known:
        raise usage_error(f"{source} has no tool {tool!r}; its tools are {', '.join(known)}")
    settings = start_tracing(source_settings.SourceSettings.from_environment())  # one trace, the source's too
    config = core.Config.for_call(settings, registry)
    task = subagent.Task(f"{source}.{tool}", source, tool, dict(arguments or {}), purpose="you called it")
    approvals, _ = approvals_for_task(task, config, (), yes, why="you called it")
    target = _call_target(entry, settings, url)
    answers = _Answers()
    report = anyio.run(
        functools.partial(
            run_one, "call", task, config, target, _CALL_TIMEOUT_SECONDS, approvals=approvals,
            base_scopes=frozenset(scope or ()), post_call=(answers,), observer=_WarmingUp(),
        )
    )  # fmt: skip
    last = answers[-1] if answers else None
    if last is not None and not last.answered:  # the source never answered
        why = last.error.description
        typer.echo(f"error: could not call {source} at {url or entry.where}: {why}", err=True)
        raise typer.Exit(1)
    said = last.result if last is not None else report.escalation  # no answer: not sent (a guard's refusal)
    Console().print_json(data={"isError": report.state.is_gap, **(said.to_wire() if said else {})})
    raise typer.Exit(1 if report.state.is_gap else 0)


class _Answers(list[Any]):
    """Each answer the call got, as classified: a post-call hook that changes nothing (and trims nothing)."""

    def __call__(self, call: Any, outcome: Any) -> Any:
        self.append(outcome)
        return outcome


class _WarmingUp:
    """Says when a source asked to be called again later (retryAfterMs, as kb does on its first start)."""

    def attempt(self, task: Any, attempt: int, arguments: dict[str, Any]) -> None:
        pass

    def decided(self, task: Any, decision: Any) -> None:
        if decision.action == "retry" and decision.backoff_ms:  # a wait only when the source asked for one
            wait_s = decision.backoff_ms / 1000
            Console(stderr=True).print(
                f"[dim]{task.source} is warming up; calling again in {wait_s:.2f} s, as it asked[/]"
            )

    def ended(self, task_id: str, state: str, attempts: int, decisions: Any) -> None:
        pass


@sources_app.command("up")
def fleet_up(
    chaos: Annotated[
        bool,
        typer.Option(
            "--chaos", help="Accept run-time faults (hang, slow, flaky, garbage), with the fleet's secret."
        ),
    ] = False,
    host: Annotated[
        str,
        typer.Option(
            "--host",
            parser=listen_address,
            metavar="ADDRESS",
            help="The one address the sources listen on, e.g. 10.0.0.5 for a cluster's workers; off "
            "loopback every request needs a bearer token. The coordinator service stays on 127.0.0.1.",
        ),
    ] = "127.0.0.1",
    port: Annotated[
        list[MemberPort] | None,
        typer.Option(
            "--port",
            parser=member_port,
            metavar="NAME=PORT",
            help="Move a source or the coordinator off its default port, e.g. kb=9105 (repeatable).",
        ),
    ] = None,
) -> None:
    """Start the five sources as streamable-HTTP services on 127.0.0.1:8101-8105, and the coordinator
    service on 8100 (`ask --transport http` is answered there, warm), and wait until each answers.

    Example: research sources up --chaos
    """
    ports = {given.name: given.port for given in port or []}
    service = {ask_service.NAME: (ask_service.MODULE, ports.pop(ask_service.NAME, ask_service.DEFAULT_PORT))}
    members = fleet_call(lambda: fleet().up(ports, chaos_control=chaos, services=service, host=host))
    for member in members.values():
        typer.echo(f"{member.source:10} pid {member.pid:<7} {member.url}")


class _MemberRow(NamedTuple):
    """One member of the fleet as `research sources status` shows it (its JSON object, for scripts)."""

    name: str
    pid: int
    port: int
    url: str
    uptime_s: int | None
    health: str
    faults: str

    @classmethod
    def of(cls, status: MemberStatus) -> _MemberRow:
        member = status.member
        return cls(
            name=member.source, pid=member.pid, port=member.port, url=member.url,
            uptime_s=round(time.time() - member.started_at) if status.alive else None,
            health="ok" if status.health else ("dead" if not status.alive else "not answering"),
            faults=str((status.health or {}).get("faults") or ""),
        )  # fmt: skip


@sources_app.command("status")
def fleet_status(
    json_output: Annotated[bool, typer.Option("--json", help="Print a JSON list, for scripts.")] = False,
) -> None:
    """Show each member of the fleet (the sources, the coordinator service): pid, port, uptime, health.

    Example: research sources status
    """
    probed = fleet().status()
    if not probed:
        typer.echo("no fleet: `research sources up` starts one", err=True)
        raise typer.Exit(1)
    rows = [_MemberRow.of(status) for status in probed]
    if json_output:
        typer.echo(json.dumps([row._asdict() for row in rows], indent=2))
        return
    table = Table("member", "pid", "port", "uptime", "health", "faults")
    for row in rows:
        uptime = f"{row.uptime_s} s" if row.uptime_s is not None else "-"
        table.add_row(row.name, str(row.pid), str(row.port), uptime, row.health, row.faults or "-")
    Console().print(table)


@sources_app.command("down")
def fleet_down() -> None:
    """Stop every source of the fleet.

    Example: research sources down
    """
    stopped = fleet().down()
    typer.echo(f"stopped {', '.join(stopped)}" if stopped else "nothing was running")
