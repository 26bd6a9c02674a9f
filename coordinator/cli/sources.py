"""`research sources`: list and call the sources; start, watch and stop the fleet."""

from __future__ import annotations

import json
import time
from typing import TYPE_CHECKING, Annotated, Any, NamedTuple, cast

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
    terminal_confirm,
    usage_error,
)
from coordinator.cli.params import MemberPort, http_url, member_port
from sources.catalogue import SOURCES, input_schemas
from sources.deferred import deferred

if TYPE_CHECKING:
    import anyio
    import mcp
    from mcp import StdioServerParameters
    from mcp.types import CallToolResult, RequestParamsMeta

    from coordinator import approvals as approving
    from coordinator import ask_service, registered_tools, runtime
    from sources import contract
    from sources import settings as source_settings
    from sources.processes.fleet import MemberStatus
    from sources.security import auth
    from sources.settings import SourceSettings
    from subagents import hooks, writes
    from subagents.sessions import connection
    from traces import spans
else:
    anyio = deferred("anyio")
    mcp = deferred("mcp")
    ask_service = deferred("coordinator.ask_service")
    registered_tools = deferred("coordinator.registered_tools")
    approving = deferred("coordinator.approvals")
    runtime = deferred("coordinator.runtime")
    hooks = deferred("subagents.hooks")
    writes = deferred("subagents.writes")
    contract = deferred("sources.contract")
    source_settings = deferred("sources.settings")
    auth = deferred("sources.security.auth")
    connection = deferred("subagents.sessions.connection")
    spans = deferred("traces.spans")

_CALL_TIMEOUT_SECONDS = 15.0  # listing a source's tools, or one call of `sources call`


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

    A source that answers it is warming up (a transient error with retryAfterMs, as kb does on its first
    start) is called once more after the time it asked for, at most a few seconds (a write only if it
    is safe to resend: idempotent, or keyed).

    A tool that does not say it only reads (readOnlyHint) is a write: it is called only with a yes at
    the prompt in a terminal, or --yes, and within the write guards (the refund limit among them).
    Exit status 0 for a result (valid empty results included), 1 for a tool error or a source that
    cannot be reached, 2 for a usage error.

    Example: research sources call billing refund_eligibility '{"order_id": "ORD-10023", "amount": 750}' --scope billing:read
    """
    registry, entry = load_source(source)
    if entry.demo:
        _check_tool(source, tool)  # a registered server answers an unknown tool itself (classified)
    # The call's tracing: one trace, its run's id passed to the source.
    settings = start_tracing(source_settings.SourceSettings.from_environment())
    call = _ToolCall(source, tool, dict(arguments or {}), _credential(settings, source, scope or []))
    effects = registered_tools.tool_effects(registry, settings.data_dir).of(source, tool)
    if effects.writes:  # a write: only with a yes, within the write guards
        _stop_unless_allowed(call, registry, settings, yes)
    where = url or (
        connection.stdio_parameters(source, settings)
        if entry.demo
        else registered_tools.target_of(entry, settings.data_dir / "logs")
    )
    try:
        is_error, payload = anyio.run(_call, call, where, effects.resendable(call.arguments))
    except Exception as exc:  # whatever the transport raised: one line, never a traceback
        typer.echo(
            f"error: could not call {source} at {url or entry.where}: {registered_tools.one_line(exc)}",
            err=True,
        )
        raise typer.Exit(1) from None
    Console().print_json(data={"isError": is_error, **(payload or {})})
    raise typer.Exit(1 if is_error else 0)


def _stop_unless_allowed(call: _ToolCall, registry: Any, settings: SourceSettings, yes: bool) -> None:
    """A write goes only with a yes and within the write guards; else its contract error, exit 1."""
    approval = writes.Approval(call.tool, by="--yes" if yes else "the prompt")
    given: tuple[Any, ...] = (approval,) if yes else ()
    if not yes:
        request = approving.WriteRequest(call.source, call.tool, call.arguments, "you called it", approval)
        given = approving.approvals_for([request], (), terminal_confirm())[0]
    tool_call = hooks.ToolCall(call.source, call.tool, call.arguments, attempt=1)
    refused = runtime.one_call_refused(
        tool_call, registry=registry, data_dir=settings.data_dir, approvals=given
    )
    if refused is not None:
        Console().print_json(data={"isError": True, **refused.to_wire()})
        raise typer.Exit(1)


def _check_tool(source: str, tool: str) -> None:
    tools = input_schemas()[source]
    if tool not in tools:
        raise usage_error(f"{source} has no tool {tool!r}; its tools are {', '.join(tools)}")


class _ToolCall(NamedTuple):
    source: str
    tool: str
    arguments: dict[str, Any]
    meta: RequestParamsMeta | None  # the credential, when the call asks for scopes


def _credential(settings: SourceSettings, source: str, scopes: list[str]) -> RequestParamsMeta | None:
    """A credential holding ``scopes`` for ``source``, as a call's ``_meta``; None for no scope."""
    if not scopes:
        return None
    token = auth.issue_credential(settings.signing_key(), "research-cli", scopes, source=source)
    # An open TypedDict (extra_items=Any, PEP 728), which mypy does not model yet: the SDK casts so too.
    return cast("RequestParamsMeta", {auth.CREDENTIAL_META_KEY: token})


async def _call(
    call: _ToolCall, where: str | StdioServerParameters | Any, resendable: bool
) -> tuple[bool, dict[str, Any] | None]:
    """Call the tool on a session of its own, once more if the source said it is warming up; the
    result's JSON. One root span for the command: the handshake, tools/list and the call are its children."""
    with (
        spans.command_span("call", f"{call.source}.{call.tool}") as span,
        anyio.fail_after(_CALL_TIMEOUT_SECONDS),
    ):
        async with mcp.Client(where, read_timeout_seconds=_CALL_TIMEOUT_SECONDS) as client:
            result = await client.call_tool(
                call.tool, call.arguments, read_timeout_seconds=_CALL_TIMEOUT_SECONDS, meta=call.meta
            )
            wait_ms = _warming_up(result) if resendable else None
            if wait_ms is not None:  # once, bounded: a source that said when it will be ready
                Console(stderr=True).print(
                    f"[dim]{call.source} is warming up; calling again in {wait_ms / 1000:.2f} s, as it asked[/]"
                )
                await anyio.sleep(wait_ms / 1000)
                result = await client.call_tool(
                    call.tool, call.arguments, read_timeout_seconds=_CALL_TIMEOUT_SECONDS, meta=call.meta
                )
        spans.end_command(span, status="error" if result.is_error else "ok")
    if result.structured_content is not None:
        return result.is_error, result.structured_content
    return result.is_error, _json_of(result)


# The longest wait for a source warming up that `sources call` accepts; kb asks for about a second.
_MAX_WARM_UP_WAIT_MS = 5000


def _warming_up(result: CallToolResult) -> float | None:
    """The wait a transient error asked for (``retryAfterMs``), when it asked for a short one."""
    if not result.is_error:
        return None
    payload = _json_of(result)
    wait = payload.get("retryAfterMs")
    if payload.get("errorCategory") != "transient" or not isinstance(wait, int | float):
        return None
    return float(wait) if 0 < wait <= _MAX_WARM_UP_WAIT_MS else None


def _json_of(result: CallToolResult) -> dict[str, Any]:
    """A result's text block as JSON (errors travel as text only), or the text itself when it is not JSON."""
    text = contract.result_text(result)
    try:
        payload = json.loads(text)
    except json.JSONDecodeError:
        return {"text": text}
    return payload if isinstance(payload, dict) else {"text": text}


@sources_app.command("up")
def fleet_up(
    chaos: Annotated[
        bool,
        typer.Option("--chaos", help="Accept run-time faults (hang, slow, flaky, garbage) on 127.0.0.1."),
    ] = False,
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
    members = fleet_call(lambda: fleet().up(ports, chaos_control=chaos, services=service))
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
