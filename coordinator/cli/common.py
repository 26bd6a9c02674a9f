"""What every `research` command shares: the command groups, exit statuses, the shared options.

Start-up time: every command module is imported for `research --help` and whenever the command
line names no command for certain (a named command loads only its own, ``coordinator.cli.command_modules``),
so the modules load at their top only typer, rich, anyio, the standard library and the command
line's shared modules (this one, ``coordinator.cli.params``). What a command needs to do
its work (mcp, the anthropic SDK, the sources, the planner, the fleet) is declared there too, but
deferred (``sources.deferred``): it loads when the command first uses it, after its arguments are checked.
"""

from __future__ import annotations

import contextlib
import dataclasses
import os
import sys
from collections.abc import Callable
from enum import StrEnum
from typing import TYPE_CHECKING, Annotated, Any, NoReturn

import typer
from typer.core import TyperArgument, TyperCommand

from coordinator.cli.params import JsonObject, SourceFaults, any_source, json_object, source_faults
from coordinator.cli.params import unapproved as not_approved
from sources.deferred import deferred

if TYPE_CHECKING:
    import anyio
    from typer.models import CommandFunctionType

    from coordinator import registered_tools
    from coordinator import registry as registries
    from coordinator.planning import tools
    from coordinator.planning.tools import Catalog
    from coordinator.registry import Registry, SourceEntry
    from coordinator.reporting import render
    from sources import settings as source_settings
    from sources.processes import fleet as fleets
    from sources.processes.fleet import Fleet
    from sources.settings import SourceSettings
    from subagents import claude as claude_mode
    from subagents import writes
    from subagents.claude import ClaudeSettings
    from subagents.writes import Approval
    from traces import logs, private_files
    from traces import setup as tracing
else:
    anyio = deferred("anyio")  # the event loop, needed only once the arguments are checked
    registered_tools = deferred("coordinator.registered_tools")
    registries = deferred("coordinator.registry")
    tools = deferred("coordinator.planning.tools")
    render = deferred("coordinator.reporting.render")
    source_settings = deferred("sources.settings")
    fleets = deferred("sources.processes.fleet")
    private_files = deferred("traces.private_files")
    claude_mode = deferred("subagents.claude")
    writes = deferred("subagents.writes")
    tracing = deferred("traces.setup")
    logs = deferred("traces.logs")

# The exceptions of the click that typer parses with: its own copy since typer 0.2x, else click.
try:
    from typer._click import exceptions as parser_errors
except ImportError:  # an older typer, on the click package
    from click import exceptions as parser_errors  # type: ignore[no-redef]  # the same exceptions, from click itself


class _ArgumentInWords(TyperArgument):
    """An argument as click names it in help: ``QUERY`` in the usage line and the list (``[TRACE_ID]``
    when optional), never typer's ``{query}`` nor its type (``<str>``); what it takes, its help says.
    Its error messages name it as before ("Missing argument 'query'")."""

    def _in_words(self) -> str:
        name = (self.metavar or self.name or "").upper()
        return f"{name}..." if self.nargs != 1 else name

    def get_usage_pieces(self, ctx: Any) -> list[str]:
        return [self._in_words() if self.required else f"[{self._in_words()}]"]

    def get_help_record(self, ctx: Any) -> tuple[str, str] | None:
        record = super().get_help_record(ctx)
        return None if record is None else (self._in_words(), record[1])


class _HelpInWords(TyperCommand):
    """A command whose help names every value in words: each option by its metavar (``--grant SCOPE``,
    ``--faults SOURCE:SETTINGS``: the commands give one to every option that takes a value, but a
    choice's, which lists the choices), each argument as ``_ArgumentInWords`` does."""

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        for param in self.params:
            if type(param) is TyperArgument:
                param.__class__ = _ArgumentInWords  # what typer built, shown in words (no state added)


class _Commands(typer.Typer):
    """A command group whose commands' help is in words (``_HelpInWords``), shown when it is given
    no command."""

    def __init__(self, **kwargs: Any) -> None:
        kwargs.setdefault("no_args_is_help", True)
        # click's plain help: choices listed, no type labels on flags, fits 80 columns
        kwargs.setdefault("rich_markup_mode", None)
        super().__init__(**kwargs)

    def command(
        self, name: str | None = None, **kwargs: Any
    ) -> Callable[[CommandFunctionType], CommandFunctionType]:
        kwargs.setdefault("cls", _HelpInWords)
        return super().command(name, **kwargs)


class _OneLineUsageErrors(_Commands):
    """The command line: a usage error the parser finds (an unknown option, a value not among the
    choices) is one line on stderr and exit 2, like the usage errors the commands find themselves."""

    def __call__(self, *args: Any, **kwargs: Any) -> Any:
        # The program's name in usage lines and hints, however it was started (`python -c`, `-m`).
        kwargs.setdefault("prog_name", "research")
        try:
            status = super().__call__(*args, standalone_mode=False, **kwargs)
        except parser_errors.NoArgsIsHelpError as asked:  # `research sources`: the help it asks for
            asked.show()
            sys.exit(asked.exit_code)
        except parser_errors.UsageError as exc:
            typer.echo(f"error: {_usage_message(exc)}{_way_on(exc)}", err=True)
            sys.exit(EXIT_USAGE)
        # Ctrl-C while the parser or a prompt waits; typer's own click has no Abort of its own, an
        # older typer's click has (an except clause naming a missing one would fail on any exception).
        except (getattr(parser_errors, "Abort", typer.Abort), typer.Abort):
            sys.exit(EXIT_INTERRUPTED)
        except parser_errors.ClickException as exc:
            typer.echo(f"error: {exc.format_message()}", err=True)
            sys.exit(exc.exit_code)
        sys.exit(status if isinstance(status, int) else 0)


# The commands whose question may come on standard input as `-` (`research ask - < email.txt`).
QUERY_ON_STDIN = ("ask",)
_OPTION_SHOWN = 40  # characters of an unknown option's first line quoted: a pasted email is not echoed


def _usage_message(exc: Any) -> str:
    """A usage error's message. A converter's (``coordinator.cli.params``) that names its option
    already (``--url must be an http(s) URL ...``) stands alone, without typer's "Invalid value for
    '--url': " before it."""
    if isinstance(exc, parser_errors.NoSuchOption):
        shown = exc.option_name.splitlines()[0][:_OPTION_SHOWN]
        if shown != exc.option_name:  # one line, whatever was pasted
            return f"No such option: {shown}..."
    param = getattr(exc, "param", None)
    if param is not None and any(exc.message.startswith(f"{name} ") for name in param.opts):
        return str(exc.message)
    # typer checks choices through pydantic, whose "Value error, " adds nothing for a reader
    return str(exc.format_message()).replace("Value error, ", "").rstrip(".")


def _way_on(exc: Any) -> str:
    """What to do after a usage error: the command's help; for an unknown option given to a command
    that takes a question, how to give a question that begins with '-' (a pasted email's
    "---------- Forwarded message"), which the parser reads as an option."""
    if exc.ctx is None:
        return ""
    command, path = exc.ctx.command, exc.ctx.command_path
    if isinstance(exc, parser_errors.NoSuchOption) and any(param.name == "query" for param in command.params):
        stdin = f", or on standard input with `{path} -`" if command.name in QUERY_ON_STDIN else ""
        return f"; a question that begins with '-' goes after `--` ({path} [OPTIONS] -- \"-...\"){stdin}"
    return f"; see `{path} --help`"


app = _OneLineUsageErrors(
    help="Research coordinator: fan a question out to five MCP sources, recover from their failures, "
    'annotate every gap.\n\nExample: research ask "Investigate jane.doe@example.com: recent orders and open tickets"',
)
sources_app = _Commands(
    help="The five MCP sources: list them, call one.\n\nExample: research sources call customers customer_lookup "
    '\'{"identifier": "CUST-00042"}\'',
)
app.add_typer(sources_app, name="sources")


@app.callback()
def _every_command(
    sources: Annotated[
        str | None,
        typer.Option(
            "--sources",
            metavar="FILE",
            help="The sources registry to use (default: $RESEARCH_SOURCES, ./research.toml, then the "
            "user configuration folder's research.toml).",
        ),
    ] = None,
) -> None:
    """What every command shares: the registry file, when given (the sources each command sees)."""
    if sources is not None:
        # Through the environment: the commands' converters read it, and so does anything they start.
        os.environ[registries.ENVIRONMENT_VARIABLE] = sources


def load_registry(*, to_change: bool = False) -> Registry:
    """The sources registry in effect; a file that cannot be read is a usage error on one line.
    An entry it leaves out is said on stderr, once, and the other sources work.

    A file this user has not approved (``coordinator.registry_trust``) runs none of its commands: its
    sources are left out, said in one line; ``to_change`` (`add`, `remove`) refuses it instead, so
    that writing to it never approves what someone else put there.
    """
    try:
        registry = registries.Registry.load()
    except registries.RegistryError as exc:
        raise usage_error(str(exc)) from None
    unapproved = not_approved(registry)
    if unapproved is not None:
        if to_change:
            raise usage_error(f"{unapproved}; read it, then `research sources trust`, and try again")
        if registry.entries or registry.problems:
            names = ", ".join([*registry.entries, *registry.problems])
            typer.echo(
                f"warning: {unapproved}: its sources ({names}) are left out; read it, then `research sources trust`",
                err=True,
            )
        return registries.Registry(registry.path)
    for problem in registry.problems.values():
        typer.echo(f"warning: {registry.path}: {problem} (left out)", err=True)
    return registry


def load_source(name: str) -> tuple[Registry, SourceEntry]:
    """The registry in effect (``load_registry``) and its source ``name``, which the argument's
    converter found in effect: a file changed since is a usage error on one line, as there."""
    registry = load_registry()
    try:
        return registry, registry.get(name)
    except KeyError as exc:
        raise usage_error(str(exc.args[0])) from None


def registry_catalog(registry: Registry, within_s: float) -> Catalog:
    """The tools the planner may use with ``registry``: a registered source never listed is listed now
    (started), within ``within_s``; the demo sources' alone are read from the catalogue."""
    if not registry.entries and not registry.problems:  # without importing the SDK: start-up time
        return tools.demo_catalog()
    return anyio.run(
        lambda: registered_tools.catalog_of(
            registry, source_settings.data_dir_from(), timeout_s=max(within_s, 0.1)
        )
    )


traces_app = _Commands(
    help="Traces written by research runs to the local files.\n\nExample: research traces show latest",
)
app.add_typer(traces_app, name="traces")

JAEGER_UI = "http://localhost:16686"  # where the trace link points; RESEARCH_JAEGER_UI says otherwise


def jaeger_ui() -> str:
    """The Jaeger UI the trace link points at: ``RESEARCH_JAEGER_UI``, or Jaeger's default address."""
    return (os.environ.get("RESEARCH_JAEGER_UI") or JAEGER_UI).rstrip("/")


chaos_app = _Commands(
    help="Break a running fleet on purpose: kill, hang, slow, flaky, garbage, heal, status.\n\n"
    "Example: research sources up --chaos && research chaos kill customers",
)
app.add_typer(chaos_app, name="chaos")

# Exit statuses of `research ask`.
EXIT_COMPLETE, EXIT_FAILED, EXIT_USAGE, EXIT_PARTIAL = 0, 1, 2, 3
EXIT_INTERRUPTED = 130  # Ctrl-C, as shells report a SIGINT


def exit_now(status: int) -> NoReturn:
    """End a command whose work is done (sessions closed, spans flushed, output written) at once.

    Skips the interpreter's teardown, which costs about 0.3 s in a process that loaded the mcp SDK and
    the sources' models, and would make a command exit that long after its deadline; nothing is
    left for it to do.
    """
    for stream in (sys.stdout, sys.stderr):
        with contextlib.suppress(OSError, ValueError):
            stream.flush()
    os._exit(status)


def usage_error(message: str) -> typer.Exit:
    """A usage error: one line on stderr, the usage exit status, no traceback."""
    typer.echo(f"error: {message}", err=True)
    return typer.Exit(EXIT_USAGE)


class Llm(StrEnum):
    """Who decides (``--llm``), the same in every command that can use a model."""

    auto = "auto"
    claude = "claude"
    none = "none"


class Transport(StrEnum):
    """How `research ask` reaches the sources (``--transport``)."""

    stdio = "stdio"
    http = "http"


LLM_HELP = (
    "Who decides: claude (Claude, through the Messages API: ANTHROPIC_API_KEY, ANTHROPIC_BASE_URL; limits "
    "RESEARCH_CLAUDE_MODEL, RESEARCH_CLAUDE_MAX_TOKENS, RESEARCH_CLAUDE_MAX_TURNS, "
    "RESEARCH_CLAUDE_TOKEN_BUDGET), none (the deterministic code), or auto (claude when ANTHROPIC_API_KEY "
    "is set)."
)


# The options that mean one thing in every command that takes them.
LlmOption = Annotated[Llm, typer.Option("--llm", help=LLM_HELP)]
SeedOption = Annotated[
    int | None,
    typer.Option(
        "--seed",
        metavar="N",
        help="Seed of this run's own randomness (the back-off jitter): the same seed replays it.",
    ),
]
FaultsOption = Annotated[
    list[SourceFaults] | None,
    typer.Option(
        "--faults",
        parser=source_faults,
        metavar="SOURCE:SETTINGS",
        help="Faults for one spawned source, e.g. 'tickets:transient=0.5,seed=13' (repeatable).",
    ),
]
SourceArgument = Annotated[
    str,
    typer.Argument(
        parser=any_source,
        help="customers, orders, billing, tickets, kb, or a source added with `sources add`.",
    ),
]
ArgumentsArgument = Annotated[
    JsonObject | None,
    typer.Argument(
        parser=json_object,
        show_default=False,
        help='The arguments as a JSON object, e.g. \'{"identifier": "CUST-00042"}\'; {} when left out.',
    ),
]
GrantOption = Annotated[
    list[str] | None,
    typer.Option(
        "--grant",
        metavar="SCOPE",
        help="Let the credential broker grant this scope when a source asks for it, e.g. billing:read (repeatable).",
    ),
]

ApproveOption = Annotated[
    list[str] | None,
    typer.Option(
        "--approve",
        metavar="TOOL[:ID]",
        help=(
            "Approve a write before the run, e.g. issue_refund:ORD-10031 (repeatable). In a terminal you "
            "are asked about every other write; without one, a write not approved here is not sent."
        ),
    ),
]


def approvals_given(values: list[str] | None) -> tuple[Approval, ...]:
    """The ``--approve`` values, each checked: a usage error names the form."""
    try:
        return tuple(writes.Approval.parse(value) for value in values or ())
    except ValueError as exc:
        raise usage_error(f"--approve: {exc}") from None


def terminal_confirm() -> Callable[[str], bool] | None:
    """A yes/no prompt (default No) when a person is at a terminal; None otherwise (a script, a
    pipe, a batch): then only what is approved up front is written."""
    if not (sys.stdin.isatty() and sys.stderr.isatty()):
        return None

    def confirm(question: str) -> bool:
        # The question quotes the user's words and a plan's: a bidi or control character there must
        # not make the prompt read otherwise than the call it approves.
        try:
            return typer.confirm(render.shown(question, keep="\n"), default=False, err=True)
        except typer.Abort:  # end of input, Ctrl-C or Ctrl-D at the prompt: not a yes
            return False

    return confirm


def claude_for(llm: Llm) -> ClaudeSettings | None:
    """The ``--llm`` option: Claude's settings for Claude mode, or None for the deterministic mode."""
    if llm == Llm.none or (llm == Llm.auto and not os.environ.get("ANTHROPIC_API_KEY")):
        return None
    try:
        return claude_mode.ClaudeSettings.from_environment()
    except ValueError as exc:
        raise usage_error(str(exc)) from None


def claude_with_key(llm: Llm) -> ClaudeSettings | None:
    """``claude_for``, for a command that asks a model hundreds of times (chaos, compare): ``--llm
    claude`` where the model cannot be asked (no key) is a usage error."""
    claude = claude_for(llm)
    if claude is not None and not claude.api_key:
        raise usage_error(
            "--llm claude needs ANTHROPIC_API_KEY (and ANTHROPIC_BASE_URL for another endpoint)"
        )
    return claude


def claude_or_deterministic(llm: Llm) -> ClaudeSettings | None:
    """``claude_for``, for a command that runs without Claude too: ``--llm claude`` where the model
    cannot be asked (no key) runs the deterministic mode, said on stderr in one line: what is
    missing and how to set it. (`auto` without a key is the deterministic mode, as asked.)"""
    claude = claude_for(llm)
    if claude is None or claude.api_key:
        return claude
    typer.echo(
        f"warning: --llm claude, but {claude_mode.MISSING_KEY}: this run is deterministic; to use Claude, "
        f"{claude_mode.SET_THE_KEY}",
        err=True,
    )
    return None


def start_tracing(
    settings: SourceSettings, *, full_payloads: bool = False, otlp: bool = False
) -> SourceSettings:
    """Configure the tracing of a command that starts a run (``--otlp`` adds the OTLP exporter to
    those ``OTEL_TRACES_EXPORTER`` names); the returned settings carry the run's id, and the
    exporters the command chose, to the sources it spawns. The data folder is made private first
    (0700, what is in it too); another user's is refused in one line, before anything is written
    there or any source starts."""
    full_payloads = full_payloads or settings.full_payloads
    if full_payloads:
        typer.echo(
            "note: trace payloads in full: queries, arguments and answers go into traces, recordings and "
            "logs with personal data unredacted (credentials still removed)",
            err=True,
        )
    logs.redact_last_resort()
    try:
        # NotYoursError is a ValueError: one line
        private_files.private_folder(settings.data_dir, contents=True)
        exporters = tracing.exporter_names()
        if otlp and "otlp" not in exporters:
            exporters.append("otlp")
        run_id = tracing.start_run(
            "research-coordinator", settings.traces_path, full_payloads=full_payloads, exporters=exporters
        )
    except ValueError as exc:
        raise usage_error(str(exc)) from None
    chosen = tuple(exporters) if otlp else settings.trace_exporters
    return dataclasses.replace(settings, run_id=run_id, full_payloads=full_payloads, trace_exporters=chosen)


def fleet() -> Fleet:
    return fleets.Fleet(source_settings.SourceSettings.from_environment())


def fleet_call(action: Callable[[], Any]) -> Any:
    try:
        return action()
    except fleets.FleetError as exc:
        typer.echo(f"error: {exc}", err=True)
        raise typer.Exit(1) from None
