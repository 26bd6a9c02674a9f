"""The sources registry: which MCP servers a research calls, how to reach each, what the planner may know.

The five demo sources are the registry's defaults. A ``research.toml`` adds servers of a user's own
(any MCP server: a command spawned over stdio, or a streamable-HTTP URL), each under a name of its
own (a demo source's name is taken)::

    [[source]]
    name = "docs"
    command = ["npx", "-y", "@modelcontextprotocol/server-filesystem", "./docs"]
    cwd = "/home/me/project"          # where the command runs (`sources add` records the folder)
    timeout = 10                      # seconds per call
    scopes = []                       # scopes the broker may grant for calls to it (any purpose)
    empty = ["No matches found"]      # how it says a search found nothing (the whole text): resultCount 0

    [source.plan]                     # which argument of which tool takes what a question names
    read_text_file = { path = "file" }
    list_directory = { path = "folder" }

    [source.entities]                 # kinds of thing of its own, found in a question by a pattern
    # timezone = '\\b[A-Z][a-z]+/[A-Z][A-Za-z_]+\\b'

    [source.errors]                   # what it is known to answer (a pattern) -> the category it means
    "ENOENT" = "validation"

The file is the first of: ``research --sources FILE``, ``RESEARCH_SOURCES``, ``./research.toml``, the
user configuration folder's ``research.toml``. An entry that is wrong (no command and no URL, a bad
pattern, a second entry of one name) is left out with a one-line error that names it; the others
still work. A file that is not TOML at all is one error that names the file and the line.
"""

from __future__ import annotations

import os
import re
import shlex
import tomllib
from collections.abc import AsyncIterator, Callable, Iterable, Mapping
from contextlib import asynccontextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any, ClassVar, Literal

import platformdirs
from pydantic import (
    BaseModel,
    ConfigDict,
    Field,
    ValidationError,
    ValidationInfo,
    field_validator,
    model_validator,
)

from coordinator.registry_trust import fingerprint
from sources import bounds
from sources.catalogue import SOURCES, input_schemas
from sources.contract import ErrorCategory
from sources.deferred import deferred
from traces.logs import redacting_pipe
from traces.private_files import open_private_file, private_folder, publish_file

# Deferred: the registry is read by every command, most of which start no session and write no file.
if TYPE_CHECKING:
    import mcp
    import tomli_w

    from coordinator import query_chaos
    from sources.faults import FaultSettings
    from sources.processes import fleet as fleets
    from sources.processes.fleet import Fleet
    from sources.settings import SourceSettings
    from subagents import broker, classify
    from subagents.broker import Grant
    from subagents.classify import Classifier
    from subagents.sessions import bearer, bounded, client_faults, connection
    from subagents.sessions.connection import Target
else:
    tomli_w = deferred("tomli_w")  # only `sources add` and `remove` write
    mcp = deferred("mcp")  # only a registered source's session starts its server
    query_chaos = deferred("coordinator.query_chaos")
    fleets = deferred("sources.processes.fleet")
    broker = deferred("subagents.broker")
    classify = deferred("subagents.classify")
    client_faults = deferred("subagents.sessions.client_faults")
    bounded = deferred("subagents.sessions.bounded")  # a spawned server's answers, each bounded
    connection = deferred("subagents.sessions.connection")
    bearer = deferred("subagents.sessions.bearer")

__all__ = [
    "BUILT_IN_KINDS",
    "DEMO",
    "ENVIRONMENT_VARIABLE",
    "DemoSource",
    "Registry",
    "RegistryError",
    "SourceEntry",
    "fleet_target",
    "one_line_error",
    "registered_target",
    "registry_file",
    "target_of",
]

ENVIRONMENT_VARIABLE = "RESEARCH_SOURCES"
FILE_NAME = "research.toml"
# What a question names that a registered tool's argument may take, beyond the kinds an entry defines.
BUILT_IN_KINDS = frozenset(
    {
        "customer_id",
        "customer",
        "order_id",
        "sku",
        "article_id",
        "date",
        "text",
        "name",
        "path",
        "file",
        "folder",
    }
)
_NAME = re.compile(r"[a-z][a-z0-9_-]{0,31}")
_MAX_FILE_BYTES = 1024 * 1024  # thousands of entries: a file larger than that is not a registry
_KIND = re.compile(r"[a-z][a-z0-9_]{0,31}")


class RegistryError(ValueError):
    """The registry file cannot be read or written; the message names the file and what to do."""


class SourceEntry(BaseModel):
    """One source: how to reach it, and what the planner and the classifier may know of it."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    name: str
    command: tuple[str, ...] | None = None
    url: str | None = None
    cwd: str | None = None
    env: dict[str, str] = Field(default_factory=dict)
    timeout: float | None = Field(default=None, gt=0, le=600)
    scopes: tuple[str, ...] = ()
    plan: dict[str, dict[str, str]] = Field(default_factory=dict)  # tool -> argument -> kind
    entities: dict[str, str] = Field(default_factory=dict)  # kind -> pattern found in a question
    errors: dict[str, ErrorCategory] = Field(default_factory=dict)  # pattern -> category
    empty: tuple[
        str, ...
    ] = ()  # how it says a search found nothing ("No matches found"): whole-text patterns
    demo: ClassVar[bool] = False  # one of the five demo sources (``DemoSource``)

    @field_validator("name")
    @classmethod
    def _named(cls, name: str) -> str:
        if name in SOURCES:
            raise ValueError(f"{name!r} is a demo source's name; choose another, e.g. my-{name}")
        if not _NAME.fullmatch(name):
            raise ValueError(f"must be lower case letters, digits, - or _, e.g. docs (got {name!r})")
        return name

    @field_validator("command", mode="before")
    @classmethod
    def _split(cls, command: Any) -> Any:
        """A command written as one string is split as a shell would ("npx -y pkg ./docs")."""
        if isinstance(command, str):
            command = shlex.split(command)
        if command is not None and not command:
            raise ValueError('is empty; give the program and its arguments, e.g. "npx -y PACKAGE DIR"')
        return command

    @field_validator("command", "cwd", "env")
    @classmethod
    def _no_nul(cls, value: Any) -> Any:
        """A NUL cannot reach a process (its arguments, folder and environment are C strings)."""
        texts = (
            [*value, *value.values()]
            if isinstance(value, dict)
            else value
            if isinstance(value, tuple)
            else [value]
        )
        if any("\x00" in str(text) for text in texts):
            raise ValueError("holds a NUL character, which no process can be given; remove it")
        return value

    @field_validator("url")
    @classmethod
    def _http(cls, url: str | None) -> str | None:
        if url is not None and not re.match(r"https?://[^/\s]+", url):
            raise ValueError(f"must be an http(s) URL, e.g. http://127.0.0.1:9000/mcp (got {url!r})")
        return url

    @field_validator("entities", "errors", "empty", mode="before")
    @classmethod
    def _patterns(cls, table: Any, info: ValidationInfo) -> Any:
        # errors: pattern -> category; entities: kind -> pattern; empty: a list of patterns.
        written = table.values() if info.field_name == "entities" and isinstance(table, dict) else table
        for pattern in written if isinstance(written, Iterable) and not isinstance(written, str) else ():
            if not isinstance(pattern, str) or not pattern.strip():
                raise ValueError(f"pattern {pattern!r} is empty; write the text to match, e.g. ENOENT")
            try:
                re.compile(pattern)
            except re.error as exc:
                raise ValueError(f"pattern {pattern!r} is not a regular expression: {exc}") from None
        return table

    @model_validator(mode="after")
    def _reachable(self) -> SourceEntry:
        if (self.command is None) == (self.url is None):
            raise ValueError('give exactly one of command (e.g. "npx -y PACKAGE DIR") or url')
        own = set(self.entities)
        for kind in own:
            if not _KIND.fullmatch(kind) or kind in BUILT_IN_KINDS:
                raise ValueError(
                    f"entities.{kind}: a kind of its own is a new lower-case word, e.g. timezone"
                )
        for tool, arguments in self.plan.items():
            for argument, kind in arguments.items():
                if kind not in BUILT_IN_KINDS | own:
                    raise ValueError(
                        f"plan.{tool}.{argument}: unknown kind {kind!r}; use one of "
                        f"{', '.join(sorted(BUILT_IN_KINDS | own))}, or define it under entities"
                    )
        return self

    @property
    def where(self) -> str:
        """How it is reached, in words: its command line or its URL."""
        return shlex.join(self.command) if self.command else str(self.url)

    def known_tools(self) -> tuple[str, ...] | None:
        """Its tools, where known before it is called; None: its server says (an unknown tool, classified)."""
        return None

    def listing_target(self, settings: SourceSettings) -> Any:
        """Where ``mcp.Client`` lists its tools: started (or dialled) as the entry says, its log kept."""
        return target_of(self, settings.data_dir / "logs")

    def connect(
        self,
        settings: SourceSettings,
        faults: FaultSettings,
        *,
        over: Literal["stdio", "spawn", "http"] = "stdio",
        url: str | None = None,
    ) -> Target:
        """Where a session with this source opens: the one place a source is forked, spawned or dialled.
        A registered source is reached as its entry says, its faults injected client-side (it has no
        layer of its own); ``over`` and ``url`` are a demo source's (``DemoSource.connect``)."""
        target = registered_target(self, settings.data_dir / "logs")
        return client_faults.with_client_faults(target, faults) if faults.active else target


class DemoSource(SourceEntry):
    """One of the five demo sources: an entry like a user's, whose tools are the catalogue's and
    whose server is ``python -m sources.NAME``, with a fault layer of its own."""

    demo: ClassVar[bool] = True

    @property
    def where(self) -> str:
        return f"python -m sources.{self.name} (a demo source)"

    def known_tools(self) -> tuple[str, ...] | None:
        return tuple(input_schemas()[self.name])

    def listing_target(self, settings: SourceSettings) -> Any:
        return connection.stdio_parameters(self.name, settings)

    def connect(
        self, settings: SourceSettings, faults: FaultSettings, *,
        over: Literal["stdio", "spawn", "http"] = "stdio", url: str | None = None,
    ) -> Target:  # fmt: skip
        """Forked from the fork server with its fault layer set (``"stdio"``), spawned (``"spawn"``:
        one source for one task, where starting the fork server costs more), or dialled over HTTP at
        ``url``, else where the fleet of the settings' data folder has it each time a session opens
        (never on a default port)."""
        if over == "http":
            return self.over_http(settings, url if url else fleet_target(fleets.Fleet(settings), self.name))
        if over == "spawn":
            return connection.stdio_target(self.name, settings.with_faults(faults))
        return connection.forked_target(self.name, settings.with_faults(faults))

    def over_http(self, settings: SourceSettings, where: str | Callable[[], str]) -> Target:
        """Dialled over HTTP at ``where`` (or where ``where()`` says when a session opens), with the
        bearer token a source off loopback requires (``subagents.sessions.bearer``)."""
        return connection.http_target(where, bearer.BearerCredential(settings.signing_key(), self.name))


def fleet_target(fleet: Fleet, source: str) -> Callable[[], str]:
    """A source of the running fleet, looked up in its state each time a session opens: a member
    healed or moved is found where it is now, and a fleet without it is nothing to connect to."""

    def where() -> str:
        try:
            return fleet.url(source)
        except fleets.FleetError as exc:  # no fleet, or none with this source
            raise ConnectionRefusedError(str(exc)) from None
        except ValueError as exc:
            raise ConnectionRefusedError(
                f"the fleet's state {fleet.state_file} is not readable: {exc}"
            ) from None

    return where


def target_of(entry: SourceEntry, log_dir: Path | None = None) -> Any:
    """Where ``mcp.Client`` finds a registered source: its URL, or a transport spawning its command.

    A spawned server's stderr (its banner, its logs) goes to ``log_dir/NAME.log`` when given, so it
    does not interleave with what the command prints; the SDK's default is this process's stderr.
    """
    if entry.url is not None:
        return entry.url
    assert entry.command is not None  # an entry has a command or a URL (SourceEntry checks)
    program, *arguments = entry.command
    # The SDK passes a child a safe subset of this environment (PATH, HOME...); the entry adds its own.
    # Named in its environment, which what it starts inherits: a chaos kill finds the whole tree.
    environment = {**entry.env, query_chaos.SOURCE_NAME_VARIABLE: entry.name}
    parameters = mcp.StdioServerParameters(command=program, args=arguments, env=environment, cwd=entry.cwd)
    if log_dir is None:
        return parameters
    return _logged(bounded.bounded_stdio, parameters, log_dir / f"{entry.name}.log")


@asynccontextmanager
async def _logged(open_stdio: Any, parameters: Any, log: Path) -> AsyncIterator[Any]:
    private_folder(log.parent)  # in the data folder, 0700; the log 0600: it may quote what was asked
    with open_private_file(log, "a") as kept:
        async with redacting_pipe(kept) as errlog, open_stdio(parameters, errlog=errlog) as streams:
            yield streams


def registered_target(entry: SourceEntry, log_dir: Path) -> Callable[[], Any]:
    """A registered source as a ``subagents.sessions.connection`` target: each session spawns (or dials) anew."""
    return lambda: target_of(entry, log_dir)


# The demo sources, built as they are (their names are refused to a registered entry).
DEMO = {name: DemoSource.model_construct(name=name) for name in SOURCES}


@dataclass
class Registry:
    """The sources in effect: the demo sources, then the file's; and the entries left out, and why."""

    path: Path | None
    entries: dict[str, SourceEntry] = field(default_factory=dict)  # the file's own, as written
    problems: dict[str, str] = field(default_factory=dict)  # an entry left out -> its one-line error
    # The SHA-256 of the bytes parsed (or written): what an approval is checked against, so the file
    # approved is the file read, whatever happens to the name in between (coordinator.registry_trust).
    digest: str = ""

    @classmethod
    def load(cls, path: Path | None = None, environ: Mapping[str, str] | None = None) -> Registry:
        """The registry of ``path`` (or the file found as the module says); the defaults without one."""
        path = path or registry_file(environ)
        registry = cls(path)
        if path is None or not path.exists():
            return registry
        try:  # read once: these bytes are parsed, and these are checked
            content = bounds.read_file_at_most(path, _MAX_FILE_BYTES)
            document = tomllib.loads(content.decode("utf-8"))
        except bounds.TooLarge:
            raise RegistryError(
                f"{path}: larger than {_MAX_FILE_BYTES // 1024} KB; a registry lists sources, "
                'each a [[source]] table such as name = "docs" and command = "..."'
            ) from None
        except (OSError, UnicodeDecodeError, tomllib.TOMLDecodeError) as exc:
            raise RegistryError(f"{path}: not a readable TOML file: {exc}") from None
        registry.digest = fingerprint(content)
        listed = document.get("source", [])
        if not isinstance(listed, list) or set(document) - {"source"}:
            raise RegistryError(f"{path}: entries are written [[source]] tables, each with a name")
        for index, table in enumerate(listed, start=1):
            registry._read(index, table)
        return registry

    def _read(self, index: int, table: Any) -> None:
        name = table.get("name") if isinstance(table, dict) else None
        label = f"source {name!r}" if isinstance(name, str) else f"source #{index}"
        if isinstance(name, str) and (name in self.entries or name in self.problems):
            self.problems[f"{name} (#{index})"] = (
                f"{label} (entry #{index}): a second source named {name!r}; names must differ"
            )
            return
        try:
            entry = SourceEntry.model_validate(table)
        except ValidationError as exc:
            self.problems[name if isinstance(name, str) else f"#{index}"] = f"{label}: {one_line_error(exc)}"
            return
        self.entries[entry.name] = self._anchored(entry)

    def _anchored(self, entry: SourceEntry) -> SourceEntry:
        """``entry`` with its folder made absolute against the registry file's own folder: a command's
        relative paths ("python notes_server.py") mean the files beside the registry, never whatever
        folder a command happens to be run from."""
        if entry.command is None or self.path is None:
            return entry
        folder = self.path.resolve().parent / (entry.cwd or ".")
        return entry.model_copy(update={"cwd": str(folder.resolve())})

    def sources(self) -> dict[str, SourceEntry]:
        """Every source in effect, the demo sources first, by name."""
        return {**DEMO, **self.entries}

    def get(self, name: str) -> SourceEntry:
        """The source named ``name``; a ``KeyError`` whose message lists the sources there are."""
        found = self.sources().get(name)
        if found is None:
            why = self.problems.get(name) or f"no source is named {name!r}"
            raise KeyError(f"{why}; the sources are {', '.join(self.sources())}")
        return found

    def timeouts(self) -> dict[str, float]:
        """Each registered source's own per-call timeout, where its entry sets one."""
        return {name: entry.timeout for name, entry in self.entries.items() if entry.timeout is not None}

    def grants(self) -> tuple[Grant, ...]:
        """What the credential broker may grant for calls to a registered source: the scopes its tools need."""
        return tuple(
            broker.Grant(scope, None, name) for name, entry in self.entries.items() for scope in entry.scopes
        )

    def classifier(self) -> Classifier:
        """The classification boundary with each registered source's own rules and words for nothing found."""
        rules = {
            name: tuple(classify.TextRule.of(pattern, category) for pattern, category in entry.errors.items())
            for name, entry in self.entries.items()
        }
        return classify.contract_with_rules(
            rules, {name: entry.empty for name, entry in self.entries.items()}
        )

    def added(self, entry: SourceEntry) -> Registry:
        if entry.name in self.sources():
            raise RegistryError(
                f"a source named {entry.name!r} exists already; `research sources remove {entry.name}` first"
            )
        return Registry(self.path, {**self.entries, entry.name: self._anchored(entry)}, dict(self.problems))

    def removed(self, name: str) -> Registry:
        """Without the registered source ``name``; the demo sources stay."""
        entries = dict(self.entries)
        if name in DEMO:
            raise RegistryError(
                f"{name} is a demo source: only the sources added to the registry can be removed"
            )
        if entries.pop(name, None) is None:
            raise RegistryError(f"no source is named {name!r}; the sources are {', '.join(self.sources())}")
        return Registry(self.path, entries, dict(self.problems))

    def save(self, path: Path | None = None) -> Path:
        """Write the file's entries (the defaults are not written). Comments in the file are not kept."""
        target = path or self.path or Path(FILE_NAME)
        tables = [entry.model_dump(exclude_defaults=True) for entry in self.entries.values()]
        text = tomli_w.dumps({"source": tables})
        content = text.encode("utf-8")
        try:  # 0600 and whole, as every file the project writes: an entry's env may hold a token
            publish_file(target, text, replace=True)
        except OSError as exc:
            raise RegistryError(f"{target}: cannot be written: {exc}") from None
        self.path = target
        self.digest = fingerprint(content)
        return target


def registry_file(environ: Mapping[str, str] | None = None) -> Path | None:
    """The registry file in effect: ``RESEARCH_SOURCES``, else ``./research.toml``, else the user's."""
    env = os.environ if environ is None else environ
    if env.get(ENVIRONMENT_VARIABLE):
        return Path(env[ENVIRONMENT_VARIABLE]).expanduser()
    candidates = (Path(FILE_NAME), Path(platformdirs.user_config_dir("research-coordinator")) / FILE_NAME)
    return next((candidate for candidate in candidates if candidate.exists()), None)


def one_line_error(exc: ValidationError) -> str:
    """A pydantic error as one line: where, and what is wrong."""
    error = exc.errors()[0]
    where = ".".join(str(part) for part in error["loc"])
    message = str(error["msg"]).removeprefix("Value error, ")
    if error["type"] == "missing":
        message = "is required"
    elif error["type"] == "extra_forbidden":
        message = "is not a setting of a source (name, command, url, cwd, env, timeout, scopes, plan, entities, errors, empty)"
    return f"{where} {message}" if where else message
