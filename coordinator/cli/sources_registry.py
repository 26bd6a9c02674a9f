"""`research sources add | remove | check`: bring an MCP server of your own into the research.

`add` writes the entry to the registry file (``coordinator.registry``) once the server has answered:
it is started (or dialled), its tools are listed and kept, and what the planner can use of them is
said. `check` does the same for any source in effect, at any time.
"""

from __future__ import annotations

import json
import os
from typing import TYPE_CHECKING, Annotated, Any

import typer
from rich.console import Console
from rich.table import Table

from coordinator.cli.common import load_registry, load_source, sources_app, usage_error
from coordinator.cli.params import any_source, http_url
from sources.deferred import deferred

if TYPE_CHECKING:
    from pathlib import Path

    import anyio
    import pydantic

    from coordinator import registered_tools, registry_trust
    from coordinator import registry as registries
    from coordinator.planning import tools
    from coordinator.planning.tools import Catalog
    from coordinator.registered_tools import ListedTool
    from coordinator.registry import Registry, SourceEntry
    from sources import settings as source_settings
else:
    anyio = deferred("anyio")
    pydantic = deferred("pydantic")
    registered_tools = deferred("coordinator.registered_tools")
    registry_trust = deferred("coordinator.registry_trust")
    registries = deferred("coordinator.registry")
    tools = deferred("coordinator.planning.tools")
    source_settings = deferred("sources.settings")

_CHECK_TIMEOUT_S = 20.0  # a first `npx -y` may download and unpack its package


# The options of `research sources add`, named here so that the command reads as what it does.
CommandOption = Annotated[
    str | None,
    typer.Option(
        metavar="COMMAND",
        help='Start it over stdio with this command, e.g. "npx -y @modelcontextprotocol/server-filesystem ./docs".',
    ),
]
UrlOption = Annotated[
    str | None,
    typer.Option(parser=http_url, metavar="URL", help="Or reach it over streamable HTTP at this URL."),
]
ScopeOption = Annotated[
    list[str] | None, typer.Option("--scope", metavar="SCOPE", help="A scope its tools need (repeatable).")
]
TimeoutOption = Annotated[
    float | None, typer.Option(metavar="SECONDS", help="Seconds per call (default: the policy's).", min=0.1)
]
PlanOption = Annotated[
    list[str] | None,
    typer.Option(
        "--plan",
        metavar="TOOL:ARG=KIND",
        help="What a tool's argument takes from a question, e.g. read_text_file:path=file (repeatable). "
        "Kinds: path, file, folder, text, customer_id, order_id..., or one --entity defines.",
    ),
]
EntityOption = Annotated[
    list[str] | None,
    typer.Option(
        "--entity",
        metavar="KIND=PATTERN",
        help="A kind of thing of its own, found in a question by a regular expression, e.g. "
        "'timezone=[A-Z][a-z]+/[A-Za-z_]+' (repeatable).",
    ),
]
ErrorOption = Annotated[
    list[str] | None,
    typer.Option(
        "--error",
        metavar="PATTERN=CATEGORY",
        help="What it is known to answer and the category it means, e.g. 'ENOENT=validation' (repeatable).",
    ),
]
EmptyOption = Annotated[
    list[str] | None,
    typer.Option(
        "--empty",
        metavar="TEXT",
        help="How it says a search found nothing (a pattern for its whole answer), e.g. 'No matches found': "
        "such an answer is a valid empty result (repeatable).",
    ),
]
EnvOption = Annotated[
    list[str] | None,
    typer.Option("--env", metavar="NAME=VALUE", help="A variable its process is started with (repeatable)."),
]
CheckOption = Annotated[
    bool, typer.Option(help="Start it and list its tools before it is added (--no-check: add it as it is).")
]


@sources_app.command("add")
def add_source(
    name: Annotated[str, typer.Argument(help="The source's name in plans and reports, e.g. docs.")],
    command: CommandOption = None,
    url: UrlOption = None,
    scope: ScopeOption = None,
    timeout: TimeoutOption = None,
    plan: PlanOption = None,
    entity: EntityOption = None,
    error: ErrorOption = None,
    empty: EmptyOption = None,
    env: EnvOption = None,
    check: CheckOption = True,
) -> None:
    """Add an MCP server to the sources: it is started, its tools listed, and the entry written.

    A relative path in the command is the server's own business: it runs in this folder.

    Example: research sources add docs --command "npx -y @modelcontextprotocol/server-filesystem ./docs" --plan read_text_file:path=file --plan list_directory:path=folder --error ENOENT=validation
    """
    registry = load_registry(to_change=True)
    entry = _entry(name, command, url, scope, timeout, plan, entity, error, empty, env)
    try:
        updated = registry.added(entry)
    except registries.RegistryError as exc:
        raise usage_error(str(exc)) from None
    listed = _listed_or_exit(entry) if check else None
    path = _saved(updated, updated.path)
    typer.echo(f"added {entry.name} to {path}")
    if listed is not None:
        _print_check(entry, listed, _catalog_with(entry, listed), Console())


def _entry(
    name: str, command: str | None, url: str | None, scopes: list[str] | None, timeout: float | None,
    plan: list[str] | None, entities: list[str] | None, errors: list[str] | None,
    empty: list[str] | None, env: list[str] | None,
) -> SourceEntry:  # fmt: skip
    """The entry the options describe (a repeatable option not given is None); an option that does not
    read is a usage error naming it."""
    fields: dict[str, Any] = {
        "name": name,
        "command": command,
        "url": url,
        "scopes": scopes or [],
        "timeout": timeout,
    }
    if command is not None:
        fields["cwd"] = os.getcwd()  # the command's relative paths mean what they mean here
    fields["plan"] = _hints(plan or [])
    fields["entities"] = dict(
        _pair(item, "--entity", "KIND=PATTERN", "timezone=[A-Z][a-z]+/[A-Za-z_]+") for item in entities or []
    )
    fields["empty"] = empty or []
    fields["env"] = dict(_pair(item, "--env", "NAME=VALUE", "LOG_LEVEL=info") for item in env or [])
    fields["errors"] = dict(
        _pair(item, "--error", "PATTERN=CATEGORY", "ENOENT=validation") for item in errors or []
    )
    try:
        return registries.SourceEntry.model_validate(
            {key: value for key, value in fields.items() if value is not None}
        )
    except pydantic.ValidationError as exc:
        raise usage_error(f"source {name!r}: {registries.one_line_error(exc)}") from None


def _hints(plan: list[str]) -> dict[str, dict[str, str]]:
    hints: dict[str, dict[str, str]] = {}
    for item in plan:
        tool, sep, rest = item.partition(":")
        argument, kind = (
            _pair(rest, "--plan", "TOOL:ARG=KIND", "read_text_file:path=file") if sep else ("", "")
        )
        if not sep or not tool:
            raise usage_error(f"--plan takes TOOL:ARG=KIND, e.g. read_text_file:path=file; got {item!r}")
        hints.setdefault(tool, {})[argument] = kind
    return hints


def _pair(item: str, option: str, form: str, example: str) -> tuple[str, str]:
    left, sep, right = item.rpartition("=") if option == "--error" else item.partition("=")
    if not sep or not left or not right:
        raise usage_error(f"{option} takes {form}, e.g. {example}; got {item!r}")
    return left, right


def _listed_or_exit(entry: SourceEntry) -> list[ListedTool]:
    """The server's tools, or one line saying why it could not be listed (exit 1)."""
    settings = source_settings.SourceSettings.from_environment()
    try:
        within = entry.timeout or _CHECK_TIMEOUT_S  # its own timeout bounds a handshake that never ends
        target = entry.listing_target(settings)
        listed = anyio.run(lambda: registered_tools.tools_at(target, timeout_s=within))
    except Exception as exc:  # whatever starting it raised: one line, never a traceback
        typer.echo(
            f"error: {entry.name} ({entry.where}) did not list its tools: {registered_tools.one_line(exc)}; "
            f"its log: {settings.data_dir / 'logs' / (entry.name + '.log')}",
            err=True,
        )
        raise typer.Exit(1) from None
    if entry.known_tools() is None:  # kept for a source whose tools only its server knows
        registered_tools.keep_tools(entry, settings.data_dir, listed)
    return listed


def _catalog_with(entry: SourceEntry, listed: list[ListedTool]) -> Catalog:
    """The planner's catalogue with ``entry``'s tools as listed (a demo source's are in it already)."""
    if entry.known_tools() is not None:
        return tools.demo_catalog()
    return tools.with_registered(tools.demo_catalog(), entry.name, listed, entry)


@sources_app.command("remove")
def remove_source(
    name: Annotated[str, typer.Argument(help="A source added with `research sources add`.")],
) -> None:
    """Remove a source added to the registry (the five demo sources stay).

    Example: research sources remove docs
    """
    registry = load_registry(to_change=True)
    try:
        path = _saved(registry.removed(name), registry.path)
    except registries.RegistryError as exc:
        raise usage_error(str(exc)) from None
    typer.echo(f"removed {name} from {path}")


def _saved(registry: Registry, path: Path | None) -> Path:
    """Write the registry and approve what was written: this user wrote it, here, now."""
    try:
        written = registry.save(path)
    except registries.RegistryError as exc:
        raise usage_error(str(exc)) from None
    # The bytes just written, not the file as it is now.
    registry_trust.trust(written, source_settings.data_dir_from(), registry.digest)
    return written


@sources_app.command("trust")
def trust_registry() -> None:
    """Approve the registry file in effect as it is now, after reading it: its sources' commands run
    from now on. A file that arrived with a repository, or that changed since it was approved, runs
    none of them until then.

    Example: research sources trust
    """
    try:
        registry = registries.Registry.load()
    except registries.RegistryError as exc:
        raise usage_error(str(exc)) from None
    if registry.path is None or not registry.path.exists():
        raise usage_error("there is no registry file to approve: `research sources add` writes one")
    # The bytes read and shown below.
    registry_trust.trust(registry.path, source_settings.data_dir_from(), registry.digest)
    typer.echo(f"approved {registry.path}")
    for entry in registry.entries.values():
        typer.echo(f"  {entry.name}: {entry.where}")


@sources_app.command("check")
def check_source(
    name: Annotated[str, typer.Argument(parser=any_source, help="A source in effect, e.g. docs.")],
    json_output: Annotated[
        bool, typer.Option("--json", help="Print the tools and verdicts as JSON.")
    ] = False,
) -> None:
    """Start a source, list its tools with their input schemas, and say what the planner can and
    cannot use of each, and why. Exit status 1 when it does not answer.

    Example: research sources check docs
    """
    _, entry = load_source(name)
    entry_listed = _listed_or_exit(entry)
    catalog = _catalog_with(entry, entry_listed)
    if json_output:
        typer.echo(json.dumps(_verdicts(name, entry_listed, catalog), indent=2))
        return
    _print_check(entry, entry_listed, catalog, Console())


def _verdicts(source: str, listed: list[ListedTool], catalog: Catalog) -> list[dict[str, Any]]:
    """Each tool: its arguments (and the kind the planner takes each as), and whether it can be planned."""
    verdicts = []
    for tool in listed:
        key = f"{source}.{tool.name}"
        arguments = catalog.tools.get(key, {})
        verdicts.append({
            "tool": tool.name,
            "read_only": tool.read_only,
            "input_schema": tool.input_schema,
            "arguments": {name: argument.kind for name, argument in arguments.items()},
            "planned": key in catalog.tools,
            "why_not": catalog.not_usable.get(key, ""),
        })  # fmt: skip
    return verdicts


def _print_check(entry: SourceEntry, listed: list[ListedTool], catalog: Catalog, console: Console) -> None:
    verdicts = _verdicts(entry.name, listed, catalog)
    usable = [verdict["tool"] for verdict in verdicts if verdict["planned"]]
    console.print(f"{entry.name}: {entry.where}: {len(listed)} tools; the planner can use {len(usable)}")
    table = Table("tool", "arguments (kind)", "planner", box=None, pad_edge=False)
    for verdict in verdicts:
        schema_arguments = verdict["input_schema"].get("properties", {})
        shown = (
            ", ".join(f"{name} ({verdict['arguments'].get(name, '-')})" for name in schema_arguments) or "-"
        )
        table.add_row(verdict["tool"], shown, "yes" if verdict["planned"] else f"no: {verdict['why_not']}")
    console.print(table)
