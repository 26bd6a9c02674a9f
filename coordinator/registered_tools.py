"""What a registered source offers: its tools as its server lists them, kept so planning starts no process.

The demo sources' tools are recorded in ``sources/tools.json``. A registered server's are asked of
the server itself (``tools/list``) by `research sources add` and `sources check`, and kept in the data
folder, one file per source, with the entry they were listed under: an entry changed since (another
command, another URL) is listed again. A query that needs a source never listed lists it first,
within the query's deadline.
"""

from __future__ import annotations

import hashlib
import json
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import TYPE_CHECKING, Any

import anyio

from coordinator.planning.tools import Catalog, demo_catalog, with_registered
from coordinator.registry import Registry, SourceEntry, target_of
from sources.deferred import deferred
from subagents.writes import EffectsTable, ToolEffects
from traces.private_files import private_folder, publish_file

if TYPE_CHECKING:
    import mcp

    from subagents.sessions import bounded
else:
    mcp = deferred("mcp")  # planning reads the tools kept; only listing them again starts a server
    bounded = deferred("subagents.sessions.bounded")

__all__ = [
    "ListedTool",
    "allowed_tools",
    "cached_tools",
    "catalog_of",
    "keep_tools",
    "list_tools",
    "listing_file",
    "one_line",
    "tool_effects",
    "tools_at",
]

_LIST_TIMEOUT_S = 20.0  # starting a server (npx may unpack a package) and its handshake


@dataclass(frozen=True)
class ListedTool:
    """One tool as its server lists it: name, input schema, whether it says it only reads, and its
    annotations as listed (camelCase; none kept: the specification's defaults, a write)."""

    name: str
    input_schema: dict[str, Any]
    read_only: bool
    description: str = ""
    annotations: dict[str, Any] = field(default_factory=dict)

    @property
    def effects(self) -> ToolEffects:
        return ToolEffects.of({"readOnlyHint": self.read_only, **self.annotations}, self.input_schema)


async def catalog_of(registry: Registry, data_dir: Path, *, timeout_s: float = _LIST_TIMEOUT_S) -> Catalog:
    """The tools the planner may use: the demo sources' and the registered sources' (listed now if they
    never were, concurrently, within ``timeout_s``). A source that cannot be listed is not usable, and
    says why; so is an entry the registry left out."""
    if not registry.entries and not registry.problems:
        return demo_catalog()
    entries = list(registry.entries.values())
    found: dict[str, list[ListedTool] | str] = {}

    async def listed(entry: SourceEntry) -> None:
        kept = cached_tools(entry, data_dir)
        if kept is None:
            try:
                kept = await list_tools(entry, timeout_s=timeout_s, log_dir=data_dir / "logs")
            except Exception as exc:  # whatever starting it raised: the source is unusable, and says why
                found[entry.name] = f"could not list its tools: {one_line(exc)}"
                return
            keep_tools(entry, data_dir, kept)
        found[entry.name] = kept

    async with anyio.create_task_group() as group:
        for entry in entries:
            group.start_soon(listed, entry)
    catalog = demo_catalog()
    for entry in entries:
        tools = found[entry.name]
        if isinstance(tools, str):
            catalog = catalog.without(entry.name, tools, entry)
        else:
            catalog = with_registered(catalog, entry.name, tools, entry)
    return replace(catalog, not_usable={**catalog.not_usable, **registry.problems})


def tool_effects(registry: Registry, data_dir: Path) -> EffectsTable:
    """What every tool in effect says it does: the demo sources' and each registered source's, as
    kept (a tool never listed, or a source never listed, is taken as a write: the MCP defaults)."""
    registered = {
        name: {tool.name: tool.effects for tool in cached_tools(entry, data_dir) or []}
        for name, entry in registry.entries.items()
    }
    return EffectsTable.demo().joined(registered)


def allowed_tools(registry: Registry, data_dir: Path) -> dict[str, frozenset[str]]:
    """Each registered source's tools that research may call (``subagents.hooks.AllowedTools``): those
    its server says only read, and those its entry names, from its tools as kept. A source whose tools
    were never listed may be called with none (nothing was planned on it either)."""
    allowed: dict[str, frozenset[str]] = {}
    for name, entry in registry.entries.items():
        listed = cached_tools(entry, data_dir) or []
        named = {tool.name for tool in listed if tool.read_only} | set(entry.plan)
        allowed[name] = frozenset(named)
    return allowed


def one_line(exc: BaseException) -> str:
    """The innermost cause of a failure, in one line (the SDK wraps transport errors in groups)."""
    while isinstance(exc, BaseExceptionGroup) and exc.exceptions:
        exc = exc.exceptions[0]
    text = str(exc).strip().splitlines()[0] if str(exc).strip() else ""
    return f"{type(exc).__name__}: {text}" if text else type(exc).__name__


async def list_tools(
    entry: SourceEntry, *, timeout_s: float = _LIST_TIMEOUT_S, log_dir: Path | None = None
) -> list[ListedTool]:
    """Ask the server for its tools (starting it, for a command); raises what the attempt raised."""
    return await tools_at(target_of(entry, log_dir), timeout_s=timeout_s)


async def tools_at(target: Any, *, timeout_s: float = _LIST_TIMEOUT_S) -> list[ListedTool]:
    """The tools of the server at ``target`` (anything ``mcp.Client`` opens), as it lists them."""
    with anyio.fail_after(timeout_s):
        # Opened as a session is (each answer bounded): a server's tool list is its answer too.
        async with mcp.Client(bounded.opened_transport(target), read_timeout_seconds=timeout_s) as client:
            listed = (await client.list_tools()).tools
    return [
        ListedTool(
            tool.name,
            dict(tool.input_schema),
            bool(tool.annotations and tool.annotations.read_only_hint),
            tool.description or "",
            tool.annotations.model_dump(by_alias=True, exclude_none=True, mode="json")
            if tool.annotations
            else {},
        )
        for tool in listed
    ]


def listing_file(entry: SourceEntry, data_dir: Path) -> Path:
    """Where the tools of ``entry`` are kept: named after the source and what reaches it."""
    reached = json.dumps([entry.command, entry.url, entry.cwd, sorted(entry.env.items())])
    digest = hashlib.sha256(reached.encode()).hexdigest()[:12]
    return data_dir / "registered" / f"{entry.name}-{digest}.json"


def cached_tools(entry: SourceEntry, data_dir: Path) -> list[ListedTool] | None:
    """The tools kept for ``entry``, or None if it was never listed as it is now written."""
    try:
        kept = json.loads(listing_file(entry, data_dir).read_text(encoding="utf-8"))
        return [ListedTool(**tool) for tool in kept]
    except (OSError, ValueError, TypeError):
        return None


def keep_tools(entry: SourceEntry, data_dir: Path, tools: list[ListedTool]) -> None:
    path = listing_file(entry, data_dir)
    private_folder(path.parent)
    publish_file(path, json.dumps([tool.__dict__ for tool in tools], indent=1), replace=True)  # whole, 0600
