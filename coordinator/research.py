"""One research query end to end: plan, run the tasks through subagents, synthesize the report.

Two modes. Deterministic (the default): the code plans, decides every recovery step, writes the
brief. Claude mode (``ResearchOptions.claude``): Claude plans, drives each subagent's tool calls and
writes the brief, while the code keeps the plan's validation, the recovery bounds, the hooks, the
gaps and the query's token budget; whatever the model cannot do, the code does as in the default.
"""

from __future__ import annotations

import random
import time
from collections.abc import Callable, Mapping
from contextlib import AsyncExitStack
from dataclasses import dataclass, field, replace
from typing import Any

import anyio

from coordinator.llm import claude_brief, claude_plan
from coordinator.plan import PLANNING_SHARE, Plan
from coordinator.planner import plan_query
from coordinator.reading import identifiers_named
from coordinator.registry import Registry
from coordinator.replay import save_recording
from coordinator.report import PlanningSummary, ResearchReport, TokenUse
from coordinator.run import DEADLINE_GRACE_S, TaskOutcome, run_plan
from coordinator.runtime import build_runtime
from coordinator.synthesize import synthesize
from coordinator.tools import Catalog, demo_catalog
from sources.faults import FaultSettings
from sources.fleet import Fleet, FleetError
from sources.settings import SourceSettings
from subagents.broker import CredentialBroker, Grant
from subagents.classify import CONTRACT, Classifier
from subagents.claude import ClaudeSettings, TokenBudget
from subagents.connection import Connections, Target, forked_target, http_target
from subagents.guard import Guard
from subagents.hooks import PostCallHook
from subagents.policy import RecoveryPolicy
from subagents.recording import RecordingTransport, Tape
from subagents.subagent import Clock, MonotonicClock, Observer
from subagents.tool_loop import claude_subagents
from subagents.transport import Transport
from traces.setup import ensure_tracing
from traces.spans import (
    end_research,
    plan_span,
    record_plan,
    record_synthesis,
    research_span,
    synthesize_span,
    trace_id_of,
)

__all__ = [
    "DEFAULT_GRANTS",
    "PLANNING_SHARE",
    "ResearchOptions",
    "fleet_target",
    "make_plan",
    "research",
    "targets_for",
]


# What the broker may grant, and for which purpose: financial records for refund research only.
DEFAULT_GRANTS = (Grant("billing:read", "refund research"),)


@dataclass
class ResearchOptions:
    deadline_s: float = 30.0
    transport: str = "stdio"  # "stdio": spawn each source; "http": use sources already serving
    # Per-source HTTP URLs; a source not given one is dialled where the fleet's state (its
    # fleet.json) says it is when its session opens, never on a default port.
    urls: Mapping[str, str] = field(default_factory=dict)
    faults: Mapping[str, FaultSettings] = field(default_factory=dict)  # per-source faults (stdio only)
    policy: RecoveryPolicy = field(default_factory=RecoveryPolicy)
    grants: tuple[Grant, ...] = DEFAULT_GRANTS
    seed: int | None = None  # back-off jitter; None draws a fresh one
    # The fleet's rules for each source (breakers, retry budget, bulkheads: ``subagents.guard``) live
    # as long as whoever shares them across queries (a long-lived coordinator, a batch) passes its
    # own; None gives this query breakers of its own.
    guard: Guard | None = None
    claude: ClaudeSettings | None = None  # Claude mode; None: the deterministic mode
    # The instant (time.monotonic) the deadline counts from, like a gRPC deadline: the command's
    # start, so start-up counts too. None: when research() is called.
    started_at: float | None = None
    # The classification boundary (subagents.classify): the contract, unless a comparison swaps it.
    classifier: Classifier = CONTRACT
    # The sources in effect (coordinator.registry): None is the five demo sources alone; the command
    # line passes the registry it read (research.toml), with the servers a user added.
    registry: Registry | None = None


def _deadline_at(options: ResearchOptions) -> float:
    """The instant (time.monotonic) the query's deadline falls: counted from the command's start."""
    return (options.started_at if options.started_at is not None else time.monotonic()) + options.deadline_s


async def make_plan(
    query: str,
    options: ResearchOptions,
    budget: TokenBudget | None = None,
    settings: SourceSettings | None = None,
) -> tuple[Plan, PlanningSummary | None]:
    """The plan a query runs, the one place that decides it: in Claude mode Claude's, within its share
    of the deadline (``PLANNING_SHARE``), else the deterministic planner's. A caller that wants the
    plan before the run (the CLI's progress table, the chaos checker) asks here and passes it on.
    Bad queries raise ``QueryError``.

    With registered sources, their tools are the planner's too: as kept, or listed now (starting
    them) within the planning share of the deadline (``settings`` says where they are kept)."""
    within_s = min(options.deadline_s * PLANNING_SHARE, _deadline_at(options) - time.monotonic())
    catalog = await _catalog(options, settings, within_s)
    if options.claude is None:
        return plan_query(query, catalog), None
    within_s = min(options.deadline_s * PLANNING_SHARE, _deadline_at(options) - time.monotonic())
    return await claude_plan(query, options.claude, budget, within_s=within_s, catalog=catalog)


async def _catalog(options: ResearchOptions, settings: SourceSettings | None, within_s: float) -> Catalog:
    registry = options.registry
    if registry is None:
        return demo_catalog()
    from coordinator.registered_tools import (
        catalog_of,
    )  # here: only a registry with servers of its own needs it

    data_dir = (settings or SourceSettings.from_environment()).data_dir
    return await catalog_of(registry, data_dir, timeout_s=max(within_s, 0.1))


def targets_for(settings: SourceSettings, options: ResearchOptions) -> dict[str, Target]:
    """Where each source in effect is found: a demo source forked (or over HTTP at the URL given, else
    where the fleet of ``settings``' data folder has it), a registered one spawned from its command (or
    at its URL), its faults injected client-side, as it has no layer."""
    entries = (options.registry or Registry(None)).sources()
    fleet = Fleet(settings)
    targets: dict[str, Target] = {}
    for source, entry in entries.items():
        faults = options.faults.get(source, FaultSettings())
        if not entry.demo:
            from coordinator.registered_tools import registered_target
            from subagents.client_faults import with_client_faults

            target = registered_target(entry, settings.data_dir / "logs")
            targets[source] = with_client_faults(target, faults) if faults.active else target
        elif options.transport == "http":
            url = options.urls.get(source)
            targets[source] = http_target(url) if url else fleet_target(fleet, source)
        else:
            targets[source] = forked_target(source, settings.with_faults(faults))
    return targets


def fleet_target(fleet: Fleet, source: str) -> Callable[[], str]:
    """A source of the running fleet, looked up in its state each time a session opens: a member
    healed or moved is found where it is now, and a fleet without it is nothing to connect to."""

    def where() -> str:
        try:
            return fleet.url(source)
        except FleetError as exc:  # no fleet, or none with this source
            raise ConnectionRefusedError(str(exc)) from None
        except ValueError as exc:
            raise ConnectionRefusedError(
                f"the fleet's state {fleet.state_file} is not readable: {exc}"
            ) from None

    return where


async def research(
    query: str,
    options: ResearchOptions | None = None,
    *,
    settings: SourceSettings | None = None,
    observer: Observer | None = None,
    plan: Plan | None = None,
    targets: dict[str, Target] | None = None,
    connections: Transport | None = None,
    clock: Clock | None = None,
    client_options: dict[str, Any] | None = None,
    post_call: tuple[PostCallHook, ...] | None = None,
    planning: PlanningSummary | None = None,
    budget: TokenBudget | None = None,
    jitter: Callable[[str], random.Random] | None = None,
    record: bool = True,
) -> ResearchReport:
    """Research one query. Bad queries raise ``QueryError`` before anything runs.

    The deadline counts from ``options.started_at`` (the command's first instant) and covers planning,
    opening the sessions, the calls and the brief. ``targets`` replaces where the sources are found
    (tests run them in memory); a caller that owns the sessions passes ``connections`` instead (the CLI
    prints the report before it closes them). ``clock`` is the subagents' time (tests inject one whose
    back-off sleeps return at once). A caller that planned already passes ``plan`` and ``planning``,
    and the ``budget`` the planning spent from. ``jitter`` gives each task's back-off jitter (a replay
    its recorded one). With ``record``, the run is kept beside its trace (``coordinator.replay``).
    """
    options = options or ResearchOptions()
    if options.started_at is None:  # one instant the deadline counts from, for planning and the run alike
        options = replace(options, started_at=time.monotonic())
    settings = settings or SourceSettings.from_environment()
    if options.claude is not None and budget is None:
        budget = TokenBudget(options.claude.token_budget)
    ensure_tracing("research-coordinator")
    deadline_at = _deadline_at(options)
    with research_span(query) as root:
        with plan_span() as planning_span:
            if plan is None:
                plan, planning = await make_plan(query, options, budget, settings)
            record_plan(planning_span, [task.id for task in plan.order()])
        clock = clock or MonotonicClock()
        tape = Tape(clock.now) if record else None
        wiring = _Wiring(
            settings, targets, connections, client_options, clock, observer, post_call, jitter, tape
        )
        outcomes = await _run_tasks(query, plan, options, wiring, budget, deadline_at)
        report = await _synthesized(plan, trace_id_of(root), outcomes, planning, options, budget, deadline_at)
        if tape is not None:
            await anyio.to_thread.run_sync(_keep, settings, report, plan, tape, options)
        end_research(
            root,
            status=report.status,
            plan_size=len(plan.tasks),
            findings=len(report.findings),
            gaps=len(report.gaps),
        )
        return report


@dataclass(frozen=True)
class _Wiring:
    """Where one query's subagents find the sources, and what watches them: ``research``'s keywords."""

    settings: SourceSettings
    targets: dict[str, Target] | None
    connections: Transport | None
    client_options: dict[str, Any] | None
    clock: Clock
    observer: Observer | None
    post_call: tuple[PostCallHook, ...] | None
    jitter: Callable[[str], random.Random] | None
    tape: Tape | None  # where the run's attempts are recorded, if they are


async def _run_tasks(
    query: str,
    plan: Plan,
    options: ResearchOptions,
    wiring: _Wiring,
    budget: TokenBudget | None,
    deadline_at: float,
) -> dict[str, TaskOutcome]:
    """Run the plan's tasks through subagents, on sessions opened here unless the caller owns them."""
    async with AsyncExitStack() as sessions:
        if wiring.connections is not None:
            connections: Transport = wiring.connections
        else:
            targets = wiring.targets or targets_for(wiring.settings, options)
            connections = await sessions.enter_async_context(
                Connections.opened(targets, wiring.client_options)
            )
        if wiring.tape is not None:
            connections = RecordingTransport(connections, wiring.tape)
        for source in plan.sources():  # every source the plan needs starts now, while the first tasks run
            connections[source].open_soon()
        model = await sessions.enter_async_context(claude_subagents(options.claude, budget))
        registry = options.registry or Registry(None)
        runtime = build_runtime(
            connections,
            CredentialBroker(wiring.settings.signing_key(), grants=(*options.grants, *registry.grants())),
            policy=replace(
                options.policy, source_timeouts={**registry.timeouts(), **options.policy.source_timeouts}
            ),
            guard=options.guard,
            seed=options.seed,
            post_call=wiring.post_call,
            clock=wiring.clock,
            observer=wiring.observer,
            model=model,
            # A comparison swaps the whole boundary; otherwise the registered sources' own rules join it.
            classifier=registry.classifier() if options.classifier is CONTRACT else options.classifier,
            registry=registry,
            data_dir=wiring.settings.data_dir,
            named=identifiers_named(query),
            question=query,
            jitter=wiring.jitter,
        )
        left_s = deadline_at - time.monotonic()
        if wiring.tape is not None:
            wiring.tape.start(left_s)
        return await run_plan(plan, runtime, left_s)


def _keep(
    settings: SourceSettings, report: ResearchReport, plan: Plan, tape: Tape, options: ResearchOptions
) -> None:
    """Keep the run beside its trace, so `research replay` can run it again."""
    save_recording(
        settings.traces_path, report, plan, tape.attempts, deadline_s=tape.deadline_s, policy=options.policy,
        mode="claude" if options.claude is not None else "deterministic",
        breakers="shared" if options.guard is not None else "own",
        boundary="contract" if options.classifier is CONTRACT else "other",
    )  # fmt: skip


async def _synthesized(
    plan: Plan,
    trace_id: str,
    outcomes: dict[str, TaskOutcome],
    planning: PlanningSummary | None,
    options: ResearchOptions,
    budget: TokenBudget | None,
    deadline_at: float,
) -> ResearchReport:
    """The report of the tasks' outcomes; in Claude mode, Claude writes the brief (the gaps stay the code's)."""
    with synthesize_span() as synthesizing:
        report = synthesize(plan, trace_id, outcomes, planning)
        if options.claude is not None and budget is not None:
            left_s = max(deadline_at - time.monotonic(), 0.0) + DEADLINE_GRACE_S
            report = await claude_brief(report, options.claude, budget, within_s=left_s)
            report = report.model_copy(update={"tokens": TokenUse(limit=budget.limit, used=budget.used)})
        record_synthesis(synthesizing, findings=len(report.findings), gaps=len(report.gaps))
    return report
