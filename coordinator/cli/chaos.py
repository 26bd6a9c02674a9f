"""`research chaos`: break the fleet on purpose, or run randomized scenarios against invariants."""

from __future__ import annotations

import dataclasses
import functools
import json
import tempfile
import time
from collections import Counter
from pathlib import Path
from typing import TYPE_CHECKING, Annotated, NamedTuple

import typer
from rich.console import Console
from rich.table import Table

from coordinator.cli.common import (
    Llm,
    LlmOption,
    chaos_app,
    claude_with_key,
    fleet,
    fleet_call,
    start_tracing,
    usage_error,
)
from coordinator.cli.params import known_member, known_source
from sources.deferred import deferred

if TYPE_CHECKING:
    import anyio

    from coordinator import chaos
    from coordinator.chaos import Scenario, ScenarioResult
    from sources import faults as fault_settings
    from sources import settings as source_settings
    from sources import world
    from sources.processes import fleet as fleets
    from sources.processes.fleet import Member, MemberStatus
    from sources.settings import SourceSettings
    from subagents.claude import ClaudeSettings
    from traces import setup as tracing
else:
    anyio = deferred("anyio")
    chaos = deferred("coordinator.chaos")  # it imports the five sources
    fault_settings = deferred("sources.faults")  # it imports pydantic
    source_settings = deferred("sources.settings")
    world = deferred("sources.world")
    fleets = deferred("sources.processes.fleet")
    tracing = deferred("traces.setup")


def _chaos(source: str, faults: dict[str, float]) -> None:
    """Add a fault to those a running source has in force: set these ``FaultSettings`` fields, keep the
    others; print all its faults after."""
    change = fault_settings.FaultSettings.model_validate(faults)  # the fields given, and only those, are set
    state = fleet_call(lambda: fleet().set_faults(source, change, merge=True))
    typer.echo(f"{source}: faults now {state['faults'] or 'none'}")


def _healed(name: str, before: Member | None, after: Member) -> str:
    restarted = "restarted; " if before is not None and before.pid != after.pid else ""
    return f"{name}: healthy ({restarted}pid {after.pid}, {after.url})"


class _ChaosRow(NamedTuple):
    """One member of the fleet as `research chaos status` shows it (its JSON object, for scripts)."""

    name: str
    alive: bool
    answering: bool
    pid: int
    url: str
    chaos_control: bool
    faults: str | None  # None: not answering, or a service (which has no faults)

    @classmethod
    def of(cls, status: MemberStatus) -> _ChaosRow:
        member, health = status.member, status.health
        faults = health.get("faults") if health is not None else None  # a service's health has none
        return cls(
            name=member.source, alive=status.alive, answering=health is not None, pid=member.pid,
            url=member.url, chaos_control=member.chaos_control, faults=None if faults is None else str(faults),
        )  # fmt: skip


@chaos_app.command("status")
def chaos_status(
    as_json: Annotated[bool, typer.Option("--json", help="A JSON list, one object per member.")] = False,
) -> None:
    """Show each member of the fleet: alive or dead, and the faults in force.

    Example: research chaos status
    """
    probed = fleet().status()
    if not probed:
        typer.echo("no fleet: `research sources up --chaos` starts one", err=True)
        raise typer.Exit(1)
    rows = [_ChaosRow.of(status) for status in probed]
    services = {status.member.source for status in probed if status.member.module}
    if as_json:
        typer.echo(json.dumps([row._asdict() for row in rows], indent=2))
        return
    table = Table("member", "state", "pid", "chaos control", "faults")
    for row in rows:
        state = "dead" if not row.alive else ("alive" if row.answering else "alive, not answering")
        control = (
            "-" if row.name in services else ("on" if row.chaos_control else "off")
        )  # a service has none
        table.add_row(
            row.name, state, str(row.pid), control, "-" if row.faults is None else (row.faults or "none")
        )
    Console().print(table)


@chaos_app.command("kill")
def chaos_kill(
    source: Annotated[
        str, typer.Argument(parser=known_member, help="The source (or the coordinator service) to SIGKILL.")
    ],
) -> None:
    """SIGKILL one source of the fleet, or its coordinator service.

    Example: research chaos kill customers
    """
    member = fleet_call(lambda: fleet().kill(source))
    typer.echo(f"{source}: killed (pid {member.pid})")


@chaos_app.command("heal")
def chaos_heal(
    source: Annotated[
        str | None,
        typer.Argument(
            parser=known_member, help="The source (or the coordinator service) to bring back to normal."
        ),
    ] = None,
    every: Annotated[
        bool, typer.Option("--all", help="Heal every member of the fleet: one line each.")
    ] = False,
) -> None:
    """Back to normal: restart a dead source (or coordinator service) where it was, or clear a live one's faults.

    Example: research chaos heal customers; research chaos heal --all
    """
    if (source is None) == (not every):
        raise usage_error(
            "name a source to heal, or pass --all to heal the whole fleet"
            if source is None
            else "name a source or pass --all, not both"
        )
    if source is not None:
        before = fleet_call(lambda: fleet().members().get(source))
        member = fleet_call(lambda: fleet().heal(source))
        typer.echo(_healed(source, before, member))
        return
    before_all = fleet_call(lambda: fleet().members())
    failed = False
    for name, outcome in fleet_call(lambda: fleet().heal_all()).items():
        if isinstance(outcome, Exception):
            typer.echo(f"error: {name}: {outcome}", err=True)
            failed = True
        else:
            typer.echo(_healed(name, before_all.get(name), outcome))
    raise typer.Exit(1 if failed else 0)


@chaos_app.command("hang")
def chaos_hang(
    source: Annotated[
        str, typer.Argument(parser=known_source, help="The source that will accept calls and never answer.")
    ],
) -> None:
    """Make a source accept every call and never answer.

    Added to the faults in force (`research chaos status` shows them, `research chaos heal` clears them).

    Example: research chaos hang tickets
    """
    _chaos(source, {"hang": 1})


@chaos_app.command("slow")
def chaos_slow(
    source: Annotated[str, typer.Argument(parser=known_source, help="The source to slow down.")],
    ms: Annotated[
        float, typer.Option("--ms", min=0, metavar="MS", help="Added latency per call, in milliseconds.")
    ] = 1000,
    jitter: Annotated[
        float,
        typer.Option("--jitter", min=0, metavar="MS", help="Latency varies by up to this much either way."),
    ] = 0,
) -> None:
    """Add latency (with jitter) to every call of a source.

    Added to the faults in force (`research chaos status` shows them, `research chaos heal` clears them).

    Example: research chaos slow orders --ms 800 --jitter 200
    """
    _chaos(source, {"latency_ms": ms, "jitter_ms": jitter})


@chaos_app.command("flaky")
def chaos_flaky(
    source: Annotated[str, typer.Argument(parser=known_source, help="The source to make flaky.")],
    rate: Annotated[
        float,
        typer.Option(
            "--rate", min=0, max=1, metavar="RATE", help="Probability of a transient failure per call."
        ),
    ] = 0.5,
    seed: Annotated[
        int | None,
        typer.Option(metavar="N", help="Seed of the fault dice (by default, the one in force: 0 at first)."),
    ] = None,
) -> None:
    """Fail a share of a source's calls with a transient error.

    Added to the faults in force (`research chaos status` shows them, `research chaos heal` clears them).

    Example: research chaos flaky orders --rate 0.3
    """
    _chaos(source, {"transient": rate, **({} if seed is None else {"seed": seed})})


@chaos_app.command("garbage")
def chaos_garbage(
    source: Annotated[
        str, typer.Argument(parser=known_source, help="The source whose answers get corrupted.")
    ],
    rate: Annotated[
        float, typer.Option("--rate", min=0, max=1, metavar="RATE", help="Probability per call.")
    ] = 1.0,
) -> None:
    """Corrupt a source's answers on the wire.

    Added to the faults in force (`research chaos status` shows them, `research chaos heal` clears them).

    Example: research chaos garbage kb
    """
    _chaos(source, {"garbage": rate})


@chaos_app.command("run")
def chaos_run(
    scenarios: Annotated[
        int, typer.Option("--scenarios", min=1, metavar="N", help="How many random scenarios to run.")
    ] = 20,
    seed: Annotated[
        int, typer.Option(metavar="N", help="Seed of the scenario dice: the same seed, the same scenarios.")
    ] = 1,
    replay: Annotated[
        int | None,
        typer.Option(
            metavar="SEED", help="Run exactly the one scenario with this seed (printed on a violation)."
        ),
    ] = None,
    soak: Annotated[
        int | None,
        typer.Option(
            metavar="N",
            help="Instead: run this many queries through this one process against the HTTP fleet, and report "
            "memory, open files and child processes.",
        ),
    ] = None,
    # The same option as everywhere, but none by default: a run asks a model hundreds of times.
    llm: LlmOption = Llm.none,
) -> None:
    """Run random fault scenarios against the sources and check the invariants after each.

    Exit status 1 when any invariant is violated; each violation prints the command that replays it.

    Example: research chaos run --scenarios 200 --seed 1
    """
    claude = claude_with_key(llm)
    if soak is not None:
        _soak(soak, seed, claude)
        return
    chosen = [chaos.scenario_from(replay)] if replay is not None else chaos.scenarios(scenarios, seed)
    console = Console()
    results, elapsed = _run_scenarios(chosen, claude, console)
    console.print(_summary(results, elapsed))
    for result in results:
        for kind, what in result.violations:
            console.print(f"[red]{kind}[/] seed {result.scenario.seed}: {what}")
            console.print(f"  replay: research chaos run --replay {result.scenario.seed}")
            if result.report is not None:
                console.print(f"  replay its recorded run: research replay {result.report.trace_id}")
    raise typer.Exit(1 if any(result.violations for result in results) else 0)


def _run_scenarios(
    chosen: list[Scenario], claude: ClaudeSettings | None, console: Console
) -> tuple[list[ScenarioResult], float]:
    """Run each scenario in this process, on a world of its own (chaos refunds stay out of yours),
    printing a line for each as it ends; the results, and the seconds they took."""
    results: list[ScenarioResult] = []
    # Traced to your trace files, as `research ask` is: each scenario's trace, and the recording of its
    # run beside it (`research replay`), outlive the scenario's own world.
    yours = start_tracing(source_settings.SourceSettings.from_environment())
    with tempfile.TemporaryDirectory() as data_dir:
        settings = dataclasses.replace(
            _chaos_world(Path(data_dir)), traces_dir=yours.traces_path, run_id=yours.run_id,
            trace_exporters=yours.trace_exporters, full_payloads=yours.full_payloads,
        )  # fmt: skip
        started = time.monotonic()
        for index, scenario in enumerate(chosen, 1):
            result = anyio.run(functools.partial(chaos.run_scenario, scenario, settings, claude=claude))
            results.append(result)
            mark = "[red]VIOLATION[/]" if result.violations else "[green]ok[/]"
            console.print(
                f"{index:4}/{len(chosen)} seed {scenario.seed:<11} {scenario.describe():48} {result.elapsed_s:5.2f} s {mark}"
            )
        elapsed = time.monotonic() - started
    return results, elapsed


def _chaos_world(data_dir: Path) -> SourceSettings:
    """Settings for the scenarios' sources in ``data_dir``, its world generated: no warm-up, no rate limit."""
    settings = chaos.catalogue.scenario_settings(data_dir)
    world.ensure_world(settings.data_dir, settings.seed)
    return settings


def _summary(results: list[ScenarioResult], elapsed: float) -> Table:
    """The run in one table: the scenarios, the faults injected, the violations by invariant, the time."""
    faults = Counter(name for result in results for name in result.scenario.faults.values())
    violations = Counter(kind for result in results for kind, _ in result.violations)
    table = Table("scenarios", "faults injected", "violations by invariant", "time")
    table.add_row(
        str(len(results)),
        "\n".join(f"{name} {count}" for name, count in sorted(faults.items())),
        "\n".join(f"{kind} {count}" for kind, count in sorted(violations.items())) or "none",
        f"{elapsed:.1f} s",
    )
    return table


def _soak(count: int, seed: int, claude: ClaudeSettings | None) -> None:
    settings = source_settings.SourceSettings.from_environment()
    fleet = fleets.Fleet(settings)
    urls = fleet.urls()
    if not urls or not all(member.alive() for member in fleet.members().values()):
        raise usage_error("the soak runs against the HTTP fleet: `research sources up --chaos` first")
    tracing.ensure_tracing("research-coordinator")
    flaky = "orders"
    if all(member.chaos_control for member in fleet.members().values()):
        fleet.set_faults(flaky, fault_settings.FaultSettings(transient=0.3, seed=seed))
    started = time.monotonic()
    samples = anyio.run(chaos.soak, count, urls, settings, seed, claude)
    if all(member.chaos_control for member in fleet.members().values()):
        fleet.set_faults(flaky, fault_settings.FaultSettings())
    table = Table("after queries", "memory (RSS)", "open files", "child processes")
    for point in samples:
        table.add_row(
            str(point.queries), f"{point.rss_mb:.1f} MB", str(point.open_files), str(point.children)
        )
    console = Console()
    console.print(table)
    # Memory is compared after a warm-up (caches filled, sessions open): a fifth of the run, at most
    # 50 queries, and never the last sample itself.
    warm_up = min(50, count // 5)
    early = next((point for point in samples[:-1] if point.queries >= warm_up), samples[0])
    growth = (samples[-1].rss_mb / early.rss_mb - 1) * 100
    memory = (
        f"memory {growth:+.1f} % from query {early.queries} to {samples[-1].queries} (target within 10 %)"
        if early is not samples[-1]
        else "too few queries to measure memory growth"
    )
    console.print(
        f"{count} queries in {time.monotonic() - started:.0f} s; {memory}; open files {samples[1].open_files if len(samples) > 1 else samples[0].open_files} -> "
        f"{samples[-1].open_files}; child processes {samples[0].children} -> {samples[-1].children}"
    )
