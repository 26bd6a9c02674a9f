"""The `research` command line.

research sources list
research sources call customers customer_lookup '{"identifier": "jane.doe@example.com"}'
research sources call billing list_invoices '{"customer_id": "CUST-00042"}' --scope billing:read
"""

from __future__ import annotations

import json
import sys
from typing import Annotated, Any

import anyio
import typer
from mcp import Client, StdioServerParameters
from rich.console import Console
from rich.table import Table

from sources.auth import CREDENTIAL_META_KEY, issue_credential
from sources.settings import SourceSettings
from sources.world import SOURCES

app = typer.Typer(help="Research coordinator: fan a question out to five MCP sources.", no_args_is_help=True)
sources_app = typer.Typer(help="The five MCP sources: list them, call one.", no_args_is_help=True)
app.add_typer(sources_app, name="sources")

_CALL_TIMEOUT_SECONDS = 15.0


def _stdio(source: str, settings: SourceSettings) -> StdioServerParameters:
    # A stdio child sees only a safe subset of this environment: pass what it needs explicitly.
    return StdioServerParameters(
        command=sys.executable, args=["-m", f"sources.{source}"], env=settings.child_environment()
    )


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
    try:
        parsed: Any = json.loads(arguments)
    except json.JSONDecodeError as exc:
        raise typer.BadParameter(
            f'arguments must be a JSON object, e.g. \'{{"identifier": "CUST-00042"}}\': {exc}'
        ) from None
    if not isinstance(parsed, dict):
        raise typer.BadParameter('arguments must be a JSON object, e.g. \'{"identifier": "CUST-00042"}\'')
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
