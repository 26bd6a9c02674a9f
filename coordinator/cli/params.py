"""The value grammars of the command line: one typed converter per grammar.

Each converter is given to typer as an option's or argument's ``parser``: typer calls it on every
value given, and a value it refuses is a usage error on one line (exit status 2) that names the
option, the form it takes and an example. What a converter needs of the project is deferred
(``sources.deferred``): it loads when the converter is first called, so `research --help` and the
usage errors of other options stay quick. The values are typed
``NamedTuple``s, as are the commands' other records: every command module is imported for any
command, and a ``NamedTuple`` costs a fifth of a frozen dataclass to define (start-up time).

| grammar                             | converter        | e.g.                                        |
|-------------------------------------|------------------|---------------------------------------------|
| `--faults SOURCE:SETTINGS`          | `source_faults`  | `tickets:transient=0.5,seed=13`             |
| `--chaos KIND:SOURCE[=VALUE][@TIME]` | `query_chaos`   | `kill:customers@0.5s,flaky:orders=0.3`      |
| `--port NAME=PORT`                  | `member_port`    | `kb=9105`                                   |
| `--url URL`                         | `http_url`       | `http://127.0.0.1:8101/mcp`                 |
| `--kind KIND`                       | `trace_kind`     | `query`                                     |
| a JSON object of arguments          | `json_object`    | `'{"identifier": "CUST-00042"}'`            |
| a source; a member of the fleet     | `known_source`, `known_member` | `customers`; `coordinator`    |
| a source, registered ones included  | `any_source`     | `docs`                                      |
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from typing import TYPE_CHECKING, Any, Literal, NamedTuple
from urllib.parse import urlsplit

import typer

from sources import bounds
from sources.catalogue import SOURCES
from sources.deferred import deferred

if TYPE_CHECKING:
    from coordinator import ask_service, registry_trust
    from coordinator import query_chaos as chaos_grammar
    from coordinator import registry as registries
    from coordinator.registry import Registry
    from sources import faults as fault_settings
    from sources import settings as source_settings
    from sources.faults import FaultSettings
    from sources.security import listen
else:
    ask_service = deferred("coordinator.ask_service")
    registry_trust = deferred("coordinator.registry_trust")
    chaos_grammar = deferred("coordinator.query_chaos")  # it imports the fault settings and psutil
    registries = deferred("coordinator.registry")
    fault_settings = deferred("sources.faults")  # it imports pydantic
    source_settings = deferred("sources.settings")
    listen = deferred("sources.security.listen")  # it imports the mcp SDK's request checks

__all__ = [
    "TRACE_KINDS",
    "JsonObject",
    "MemberPort",
    "QueryChaos",
    "SourceFaults",
    "SourceUrl",
    "TraceKind",
    "any_source",
    "http_url",
    "json_object",
    "known_member",
    "known_source",
    "member_port",
    "query_chaos",
    "source_faults",
    "source_names",
    "source_url",
    "trace_kind",
    "unapproved",
]


class SourceFaults(NamedTuple):
    """``--faults SOURCE:SETTINGS``: the faults of one spawned source."""

    source: str
    settings: FaultSettings


def source_faults(value: str) -> SourceFaults:
    source, sep, settings = value.partition(":")
    if not sep or source not in source_names():
        raise typer.BadParameter(
            f"--faults takes SOURCE:SETTINGS with a source among {', '.join(source_names())}, e.g. tickets:transient=0.5,seed=13; got {value!r}"
        )
    try:
        return SourceFaults(source, fault_settings.FaultSettings.parse(settings))
    except ValueError as exc:
        raise typer.BadParameter(f"--faults {source}: {exc}") from None


class QueryChaos(NamedTuple):
    """``--chaos KIND:SOURCE[=VALUE][@TIME],...``: faults for one query's spawned sources, and timed kills."""

    faults: Mapping[str, FaultSettings]
    kills: tuple[tuple[str, float], ...]  # (source, seconds from the start of the run)


def query_chaos(value: str) -> QueryChaos:
    try:
        faults, kills = chaos_grammar.parse_query_chaos(value, source_names())
    except ValueError as exc:
        raise typer.BadParameter(str(exc)) from None
    return QueryChaos(faults, tuple(kills))


class MemberPort(NamedTuple):
    """``--port NAME=PORT``: where one member of the fleet serves."""

    name: str
    port: int


def member_port(value: str) -> MemberPort:
    name, sep, port = value.partition("=")
    members = (*SOURCES, ask_service.NAME)
    if not sep or name not in members or not port.isdigit() or not 0 < int(port) < 65536:
        raise typer.BadParameter(
            f"--port takes NAME=PORT with a name among {', '.join(members)}, e.g. kb=9105; got {value!r}"
        )
    return MemberPort(name, int(port))


def listen_address(value: str) -> str:
    """``--host``: one IP address to listen on, never every interface."""
    try:
        return listen.checked_address(value)
    except ValueError as exc:
        raise typer.BadParameter(str(exc).removeprefix("--host ")) from None


def http_url(value: str) -> str:
    """``--url``: an http(s) URL with a host (and a port that is a number, when it has one)."""
    try:
        parts = urlsplit(value)
        parts.port  # noqa: B018  (raises for a port that is not a number)
    except ValueError:
        parts = None
    if parts is None or parts.scheme not in ("http", "https") or not parts.hostname:
        raise typer.BadParameter(
            f"--url must be an http(s) URL such as http://127.0.0.1:8101/mcp; got {value!r}"
        )
    return value


class SourceUrl(NamedTuple):
    """``--url SOURCE=URL``: where one demo source already serves (`research batch`)."""

    source: str
    url: str


def source_url(value: str) -> SourceUrl:
    source, _, url = value.partition("=")
    try:
        return SourceUrl(known_source(source), http_url(url))
    except typer.BadParameter as exc:
        raise typer.BadParameter(
            f"--url takes SOURCE=URL, e.g. orders=http://127.0.0.1:8102/mcp ({exc}); got {value!r}"
        ) from None


TraceKind = Literal["query", "task", "call", "other"]
TRACE_KINDS: tuple[TraceKind, ...] = ("query", "task", "call", "other")


def trace_kind(value: str) -> TraceKind:
    for kind in TRACE_KINDS:
        if value == kind:
            return kind
    raise typer.BadParameter(f"--kind must be one of {', '.join(TRACE_KINDS)}, not {value!r}")


class JsonObject(dict[str, Any]):
    """A tool's arguments, given as a JSON object (the name is the type help shows)."""


def json_object(arguments: str) -> JsonObject:
    too_deep = typer.BadParameter(
        f"arguments nest deeper than {bounds.MAX_NESTING} levels of objects and arrays; flatten them, "
        'e.g. \'{"identifier": "CUST-00042"}\''
    )
    try:
        parsed: Any = json.loads(arguments)
    except json.JSONDecodeError as exc:
        raise typer.BadParameter(
            f'arguments must be a JSON object, e.g. \'{{"identifier": "CUST-00042"}}\': {exc}'
        ) from None
    except RecursionError:  # json's decoder recurses per level: past the interpreter's limit it gives up
        raise too_deep from None
    if not isinstance(parsed, dict):
        raise typer.BadParameter('arguments must be a JSON object, e.g. \'{"identifier": "CUST-00042"}\'')
    if bounds.deeper_than(parsed):  # checked before anything walks them (hooks, traces, the wire)
        raise too_deep
    return JsonObject(parsed)


def known_source(source: str) -> str:
    """One of the five demo sources (what a fleet runs)."""
    if source not in SOURCES:
        raise typer.BadParameter(f"unknown source {source!r}; choose one of {', '.join(SOURCES)}")
    return source


def any_source(source: str) -> str:
    """A source in effect: a demo source or one added to the registry (`research sources add`).

    A registry's source that is not in effect (the file is not approved here, or leaves the entry
    out) is refused here, saying why, before the command looks it up: one line, never a traceback."""
    if source in SOURCES:
        return source
    try:
        registry = registries.Registry.load()
    except registries.RegistryError as exc:
        raise typer.BadParameter(f"source {source!r} is not in effect: {exc}") from None
    if source in registry.problems:
        raise typer.BadParameter(
            f"source {source!r} is not in effect: {registry.path} leaves it out ({registry.problems[source]})"
        )
    why = unapproved(registry)
    if source not in registry.entries:
        in_effect = SOURCES if why is not None else tuple(registry.sources())
        raise typer.BadParameter(f"unknown source {source!r}; choose one of {', '.join(in_effect)}")
    if why is not None:
        raise typer.BadParameter(
            f"source {source!r} is not in effect: {why}; read it, then `research sources trust`"
        )
    return source


def unapproved(registry: Registry) -> str | None:
    """Why a registry's sources are left out when its file is not approved here (what `research
    sources trust` is for); None when they are in effect (no file, or the very bytes read approved)."""
    if registry.path is None or not registry.path.exists():
        return None
    if registry_trust.is_trusted(registry.path, source_settings.data_dir_from(), registry.digest):
        return None
    return f"{registry.path} is not approved here (written elsewhere, or changed since)"


def source_names() -> tuple[str, ...]:
    """The demo sources and the registry's (read only when a name is not a demo source's: start-up time)."""
    try:
        return tuple(registries.Registry.load().sources())
    except registries.RegistryError:
        return SOURCES  # the registry's own error is reported by the command that reads it


def known_member(name: str) -> str:
    """A member of the fleet: a source, or the coordinator service (which can be killed and healed)."""
    if name not in (*SOURCES, ask_service.NAME):
        raise typer.BadParameter(
            f"unknown fleet member {name!r}; choose one of {', '.join((*SOURCES, ask_service.NAME))}"
        )
    return name
