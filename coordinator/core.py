"""The coordinator: built once from one ``Config``, and every run of a process goes through it.

``Coordinator`` is to the sources what httpx's ``Client`` is to a server. Made once (``async with``),
it holds what its runs share: the sessions to the sources (a ``subagents.transport.Transport``), the
breakers, retry budget and bulkheads (``subagents.guard``), the clock. Each query (``research``) and
each single task (``run_task``) runs on it, with the subagents' runtime assembled in one place
(``coordinator.runtime.build_runtime``: the refund, write and allowed-tools guards always on).

Where the sources are is the config's: each entry of its registry connects as it says
(``coordinator.registry.SourceEntry.connect``). A caller that decides that itself gives ``targets``
(the chaos scenarios' faulty sources, the service's fleet); a test or a replay gives a whole
``transport`` (in-memory sessions, a recording), as httpx takes a ``MockTransport``.

Two modes. Deterministic (the default): the code plans, decides every recovery step, writes the
brief. Claude mode (``Config.claude``): Claude plans, drives each subagent's tool calls and writes
the brief, while the code keeps the plan's validation, the recovery bounds, the hooks, the gaps and
the query's token budget; whatever the model cannot do, the code does as in the default.
"""

from __future__ import annotations

import random
import time
from collections.abc import Callable, Iterable, Mapping
from contextlib import AsyncExitStack
from dataclasses import dataclass, field, replace
from types import TracebackType
from typing import TYPE_CHECKING, Any, Literal, TypeGuard

import anyio

from coordinator.planning.plan import PLANNING_SHARE, Plan
from coordinator.planning.rounds import next_round
from coordinator.recorded_run import save_recording
from coordinator.registered_tools import catalog_of, tool_effects
from coordinator.registry import Registry
from coordinator.reporting.report import PlanningSummary, ResearchReport, TokenUse
from coordinator.reporting.synthesize import synthesize
from coordinator.run import DEADLINE_GRACE_S, TaskOutcome, TaskState, run_plan
from coordinator.runtime import build_runtime
from sources.contract import ErrorCategory
from sources.deferred import deferred
from sources.faults import FaultSettings
from sources.people import customer_names
from sources.settings import SourceSettings
from subagents.broker import CredentialBroker, Grant
from subagents.classify import CONTRACT, Classifier
from subagents.claude import ClaudeSettings, TokenBudget, load_sdk
from subagents.guard import Guard
from subagents.hooks import PostCallHook, PreCallHook
from subagents.policy import RecoveryPolicy
from subagents.sessions.connection import Connections, Target
from subagents.sessions.recording import RecordingTransport, Tape
from subagents.subagent import Clock, MonotonicClock, Observer, Runtime, SubagentReport, Task, run_subagent
from subagents.tool_loop import ClaudeSubagents, claude_subagents
from subagents.transport import Transport
from subagents.writes import Approval, AskedWrite
from traces.personal import know_names
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

if TYPE_CHECKING:
    from coordinator import lead_rounds, llm
    from coordinator.lead_rounds import LeadRound
    from coordinator.planning import planner, writes
else:
    # Loaded by the first question planned here: a Ray worker runs plans its driver made, and needs
    # neither the planner, the reader of the writes a question asks for, nor Claude's planning.
    llm = deferred("coordinator.llm")
    lead_rounds = deferred("coordinator.lead_rounds")
    planner = deferred("coordinator.planning.planner")
    writes = deferred("coordinator.planning.writes")

__all__ = ["DEFAULT_GRANTS", "PLANNING_SHARE", "Config", "Coordinator"]


# What the broker may grant, and for which purpose: financial records for refund research only.
DEFAULT_GRANTS = (Grant("billing:read", "refund research"),)


@dataclass(frozen=True)
class Config:
    """What a coordinator is made of, chosen once: the sources, how to recover, who decides."""

    settings: SourceSettings
    # The sources in effect: the five demo sources, and the servers a user added (research.toml).
    registry: Registry = field(default_factory=lambda: Registry(None))
    policy: RecoveryPolicy = field(default_factory=RecoveryPolicy)
    grants: tuple[Grant, ...] = DEFAULT_GRANTS  # what the broker may grant (a query may add its own)
    # A person's yes to writes, given before the run (``--approve``, a prompt): without one, no write
    # is sent (each becomes a gap saying how to approve it).
    approvals: tuple[Approval, ...] = ()
    claude: ClaudeSettings | None = None  # Claude mode; None: the deterministic mode
    # The classification boundary (subagents.classify): the contract, unless a comparison swaps it.
    classifier: Classifier = CONTRACT
    # How the demo sources are reached: forked from the fork server ("stdio"), or over HTTP at the
    # URL given, else where the fleet of the data folder has each when its session opens.
    demo_over: Literal["stdio", "http"] = "stdio"
    urls: Mapping[str, str] = field(default_factory=dict)
    faults: Mapping[str, FaultSettings] = field(default_factory=dict)  # per source

    @classmethod
    def for_ask(
        cls, settings: SourceSettings, registry: Registry | None = None, claude: ClaudeSettings | None = None,
        *, grants: Iterable[Grant] = (), faults: Mapping[str, FaultSettings] | None = None,
        fleet: Mapping[str, str] | None = None, approvals: tuple[Approval, ...] = (),
    ) -> Config:  # fmt: skip
        """Questions asked (``research ask``, a batch's, the service's): the default grants and ``grants``;
        each demo source started for them, or on a fleet (``fleet``: its URLs by source; empty: where
        the fleet's state has each when its session opens)."""
        return cls(
            settings, registry or Registry(None), grants=(*DEFAULT_GRANTS, *grants), approvals=approvals,
            claude=claude, demo_over="stdio" if fleet is None else "http", urls=fleet or {}, faults=faults or {},
        )  # fmt: skip

    @classmethod
    def for_task(
        cls, settings: SourceSettings, registry: Registry, claude: ClaudeSettings | None,
        call_timeout_s: float, grants: tuple[Grant, ...],
    ) -> Config:  # fmt: skip
        """One task (``research task``): only the grants given, each call within ``call_timeout_s``."""
        return cls(settings, registry, RecoveryPolicy(call_timeout_s=call_timeout_s), grants, claude=claude)

    @classmethod
    def for_call(cls, settings: SourceSettings, registry: Registry) -> Config:
        """One call by hand (``research sources call``): sent again once, after the wait a transient error
        asks for, never repaired or elevated (its credential holds the scopes given)."""
        once = RecoveryPolicy(
            max_retries=1, max_repairs=0, max_elevations=0, base_delay_s=0.0, call_timeout_s=15.0
        )
        return cls(settings, registry, once, grants=())

    @classmethod
    def for_chaos(
        cls, settings: SourceSettings, policy: RecoveryPolicy, claude: ClaudeSettings | None = None,
        classifier: Classifier = CONTRACT, fleet: Mapping[str, str] | None = None,
    ) -> Config:  # fmt: skip
        """A chaos run (a scenario, a soak) with the policy and classifier chosen for it; the demo sources
        started for it, or on a fleet at ``fleet``'s URLs."""
        return replace(
            cls.for_ask(settings, claude=claude, fleet=fleet), policy=policy, classifier=classifier
        )

    @classmethod
    def for_replay(
        cls, settings: SourceSettings, registry: Registry | None, policy: RecoveryPolicy,
        grants: tuple[Grant, ...], approvals: tuple[Approval, ...],
    ) -> Config:  # fmt: skip
        """A recorded run again, with its policy, grants and approvals (its answers come from the recording)."""
        return cls(settings, registry or Registry(None), policy, grants, approvals)

    def targets(self) -> dict[str, Target]:
        """Where each source in effect is found: as its registry entry connects."""
        return {
            name: entry.connect(
                self.settings,
                self.faults.get(name, FaultSettings()),
                over=self.demo_over,
                url=self.urls.get(name),
            )
            for name, entry in self.registry.sources().items()
        }


_NAMES_TOLD: set[tuple[str, int]] = set()  # the worlds whose customers' names were told, once each


async def _know_customer_names(settings: SourceSettings) -> None:
    """Tell what redacts traces, recordings and logs the names of this world's customers, before the
    first query's first span (traces imports none of the project's packages, so it is told)."""
    world = (str(settings.data_dir), settings.seed)
    if world not in _NAMES_TOLD:
        know_names(await anyio.to_thread.run_sync(customer_names, settings.data_dir, settings.seed))
        _NAMES_TOLD.add(world)


class Coordinator:
    """The sessions, the guard and the clock a process's runs share; ``research`` runs a query on them."""

    def __init__(
        self,
        config: Config,
        *,
        targets: Mapping[str, Target] | None = None,
        transport: Transport | None = None,
        guard: Guard | None = None,
        clock: Clock | None = None,
        client_options: dict[str, Any] | None = None,
    ) -> None:
        """``targets`` replaces where the sources are found; ``transport`` replaces the sessions
        altogether (this coordinator neither opens nor closes them). ``guard`` None: each query has
        breakers of its own; one given outlives each query (a service's, a batch's). ``clock``: the
        subagents' time (tests inject one whose back-off sleeps return at once). ``client_options``
        go to every ``mcp.Client`` (``mode="legacy"``: JSON-RPC framing in memory)."""
        self.config = config
        self.guard = guard
        self.clock = clock or MonotonicClock()
        self._targets = targets
        self._transport = transport
        self._client_options = client_options
        self._held = AsyncExitStack()

    async def __aenter__(self) -> Coordinator:
        # Before any session opens: a registered server's log and the first span are redacted with them.
        await _know_customer_names(self.config.settings)
        claude = self.config.claude
        if claude is not None and claude.api_key:
            # Claude mode's SDK loads as the coordinator opens, off the event loop: seconds on a cold
            # start that a coordinator's queries (a service's, a batch's, the chaos runner's) must not
            # pay out of their deadlines. A command's deadline counts from its first instant: it pays.
            await load_sdk()
        if self._transport is None:
            targets = dict(self._targets) if self._targets is not None else self.config.targets()
            self._transport = await self._held.enter_async_context(
                Connections.opened(targets, self._client_options)
            )
        return self

    async def __aexit__(
        self, kind: type[BaseException] | None, error: BaseException | None, trace: TracebackType | None
    ) -> None:
        await self._held.aclose()

    @property
    def transport(self) -> Transport:
        if self._transport is None:
            raise RuntimeError("a Coordinator is used within `async with`, which opens its sessions")
        return self._transport

    def sessions_opened(self, sources: Iterable[str]) -> dict[str, int]:
        """How many sessions each source has had opened so far (a respawn counts): one each while all is well."""
        return {source: self.transport[source].opened for source in sources}

    def open_soon(self, sources: Iterable[str]) -> None:
        """Start the sessions of ``sources`` now (a long-lived coordinator's first query finds them open)."""
        for source in sources:
            self.transport[source].open_soon()

    async def plan(
        self,
        query: str,
        *,
        deadline_s: float = 30.0,
        started_at: float | None = None,
        budget: TokenBudget | None = None,
    ) -> tuple[Plan, PlanningSummary | None]:
        """The plan a query runs, the one place that decides it: in Claude mode Claude's, within its
        share of the deadline (``PLANNING_SHARE``), else the deterministic planner's. A caller that
        wants the plan before the run (the CLI's progress table, the chaos checker) asks here and
        passes it on. Bad queries raise ``QueryError``.

        With registered sources, their tools are the planner's too: as kept, or listed now (starting
        them) within the planning share of the deadline."""
        deadline_at = (started_at if started_at is not None else time.monotonic()) + deadline_s
        within_s = min(deadline_s * PLANNING_SHARE, deadline_at - time.monotonic())
        catalog = await catalog_of(
            self.config.registry, self.config.settings.data_dir, timeout_s=max(within_s, 0.1)
        )
        if self.config.claude is None:
            return planner.plan_query(query, catalog), None
        within_s = min(deadline_s * PLANNING_SHARE, deadline_at - time.monotonic())
        return await llm.claude_plan(query, self.config.claude, budget, within_s=within_s, catalog=catalog)

    async def research(
        self,
        query: str,
        *,
        deadline_s: float = 30.0,
        started_at: float | None = None,
        seed: int | None = None,
        plan: Plan | None = None,
        planning: PlanningSummary | None = None,
        budget: TokenBudget | None = None,
        grants: tuple[Grant, ...] = (),
        approvals: tuple[Approval, ...] = (),
        observer: Observer | None = None,
        post_call: tuple[PostCallHook, ...] | None = None,
        jitter: Callable[[str], random.Random] | None = None,
        record: bool = True,
        asked: tuple[AskedWrite, ...] | None = None,
        left_out: Mapping[str, str] | None = None,
    ) -> ResearchReport:
        """Research one query. Bad queries raise ``QueryError`` before anything runs.

        The deadline counts from ``started_at`` (the command's first instant; None: now) and covers
        planning, opening the sessions, the calls and the brief. A caller that planned already passes
        ``plan`` and ``planning``, the ``budget`` the planning spent from, and may pass ``asked`` and
        ``left_out`` (``_held_to``). ``grants``: what the broker may grant this query beyond the
        config's; ``approvals``, the writes a person approved for it beyond the config's. A write is
        made only as the question asks for it (``coordinator.planning.writes``) and approved.
        ``seed``: the back-off jitter's (None draws a fresh one); ``jitter`` gives each task's instead
        (a replay, its recorded one). With ``record``, the run is kept beside its trace.
        """
        started_at = started_at if started_at is not None else time.monotonic()
        deadline_at = started_at + deadline_s
        if self.config.claude is not None and budget is None:
            budget = TokenBudget(self.config.claude.token_budget)
        await _know_customer_names(self.config.settings)  # known already, if entered as a context
        ensure_tracing("research-coordinator")
        tape = Tape(self.clock.now) if record else None  # where the run's attempts are recorded, if they are
        with research_span(query) as root:
            with plan_span() as planning_span:
                if plan is None:
                    plan, planning = await self.plan(
                        query, deadline_s=deadline_s, started_at=started_at, budget=budget
                    )
                record_plan(planning_span, [task.id for task in plan.order()])
            # Registered tools are listed now if never kept: a plan made elsewhere (a replay) comes first.
            await self._listed(deadline_at)
            plan, outcomes = await self._in_rounds(
                plan, budget, deadline_at, tape, grants, planning, **self._held_to(query, asked, left_out),
                approvals=(*self.config.approvals, *approvals), seed=seed, post_call=post_call,
                observer=observer, jitter=jitter,
            )  # fmt: skip
            report = await self._synthesized(plan, trace_id_of(root), outcomes, planning, budget, deadline_at)
            if tape is not None:
                approved = (*self.config.approvals, *approvals)
                await anyio.to_thread.run_sync(self._keep, report, plan, grants, approved, tape)
            end_research(
                root, status=report.status, plan_size=len(plan.tasks), findings=len(report.findings),
                gaps=len(report.gaps),
            )  # fmt: skip
            return report

    async def _listed(self, deadline_at: float) -> None:
        """Every registered source's tools listed and kept (those never listed, within the deadline)."""
        config = self.config
        if config.registry.entries:
            within_s = max(min(deadline_at - time.monotonic(), 20.0), 0.1)
            await catalog_of(config.registry, config.settings.data_dir, timeout_s=within_s)

    def _held_to(
        self, query: str, asked: tuple[AskedWrite, ...] | None, left_out: Mapping[str, str] | None
    ) -> dict[str, Any]:
        """What the question holds its run's calls to (``build_runtime``): ``asked``, the writes it asks
        for, and ``left_out``, the records it names only to leave out; each as given, or (None) as read
        here with the planner (a batch's worker is given both: it loads no planner)."""
        return {
            "asked": self.asked_writes(query) if asked is None else asked,
            "left_out": planner.left_out(query) if left_out is None else left_out,
        }

    def asked_writes(self, query: str) -> tuple[AskedWrite, ...]:
        """The writes ``query`` asks for, as the question reader understands it: the only writes its
        run may make (``subagents.hooks.WritesAsked``), and what a person is asked to approve."""
        config = self.config
        effects = tool_effects(config.registry, config.settings.data_dir)
        write_tools = {
            tool for tools in effects.tools.values() for tool, said in tools.items() if said.writes
        }
        return writes.asked_writes(query, write_tools).writes

    async def run_task(
        self,
        task: Task,
        *,
        deadline_s: float,
        approvals: tuple[Approval, ...] = (),
        started_at: float | None = None,
        seed: int | None = None,
        base_scopes: frozenset[str] = frozenset(),
        pre_call: tuple[PreCallHook, ...] | None = None,
        post_call: tuple[PostCallHook, ...] | None = None,
        observer: Observer | None = None,
    ) -> SubagentReport:
        """One task through one subagent (`research task`, a chaos scenario's side refund), by
        ``deadline_s`` from ``started_at`` (on this coordinator's clock; None: now); ``named``: what
        the task may write to. ``base_scopes``: the credential's scopes before any elevation (none:
        the broker's own); ``pre_call`` replaces the refund guard (a chaos test passes a broken one
        to see billing catch it). The task is itself the one write it may make (asked by whoever ran
        it), and only with one of ``approvals`` (beyond the config's)."""
        await self._listed(time.monotonic() + deadline_s)
        async with claude_subagents(self.config.claude) as model:
            runtime = self._runtime(
                self.transport, model, (), base_scopes=base_scopes, asked=(_exactly(task),),
                approvals=(*self.config.approvals, *approvals), seed=seed, pre_call=pre_call,
                post_call=post_call, observer=observer,
            )  # fmt: skip
            started_at = started_at if started_at is not None else runtime.clock.now()
            return await run_subagent(task, runtime, deadline=started_at + deadline_s)

    def _runtime(
        self, transport: Transport, model: ClaudeSubagents | None, grants: tuple[Grant, ...],
        base_scopes: frozenset[str] = frozenset(), **chosen: Any,
    ) -> Runtime:  # fmt: skip
        """A run's runtime: its broker may grant the config's grants, ``grants`` and the registered
        sources' scopes; ``chosen``: what the run gives ``build_runtime`` beyond the config's."""
        config, registry = self.config, self.config.registry
        broker = CredentialBroker(
            config.settings.signing_key(),
            base_scopes=base_scopes,
            grants=(*config.grants, *grants, *registry.grants()),
        )
        return build_runtime(
            transport, broker, registry=registry, data_dir=config.settings.data_dir,
            policy=replace(config.policy, source_timeouts={**registry.timeouts(), **config.policy.source_timeouts}),
            guard=self.guard, clock=self.clock, model=model,
            # A comparison swaps the whole boundary; otherwise the registered sources' own rules join it.
            classifier=registry.classifier() if config.classifier is CONTRACT else config.classifier,
            **chosen,
        )  # fmt: skip

    async def _in_rounds(
        self, plan: Plan, budget: TokenBudget | None, deadline_at: float, tape: Tape | None,
        grants: tuple[Grant, ...], planning: PlanningSummary | None, **chosen: Any,
    ) -> tuple[Plan, dict[str, TaskOutcome]]:  # fmt: skip
        """The plan run round by round: each round runs the tasks its plan added, and the next is
        planned from their findings (``_next_round``; in Claude mode, by the lead when Claude made the
        plan: ``_lead_round``); the plan as it grew, and every task's outcome."""
        outcomes: dict[str, TaskOutcome] = {}
        while True:
            outcomes = await self._run_tasks(plan, budget, deadline_at, tape, grants, outcomes, **chosen)
            grown = _next_round(plan, outcomes)
            claude = self.config.claude
            if grown is None and claude is not None and budget is not None and _led_by_claude(planning):
                led = await self._lead_round(
                    plan, outcomes, (claude, planning, budget), deadline_at, chosen["asked"]
                )
                if not led.grew:
                    return led.plan, outcomes  # a lead that failed left a note on the plan
                plan = led.plan
                continue
            if grown is None:
                return plan, outcomes
            with plan_span() as planning_span:
                added = [task.id for task in grown.order() if task.id not in plan.tasks]
                record_plan(planning_span, added, round_number=grown.rounds)
            plan = grown

    async def _lead_round(
        self, plan: Plan, outcomes: dict[str, TaskOutcome],
        lead: tuple[ClaudeSettings, PlanningSummary, TokenBudget], deadline_at: float,
        asked: tuple[AskedWrite, ...],
    ) -> LeadRound:  # fmt: skip
        """Claude, as the lead, reads the round's findings and may add tasks (``coordinator.lead_rounds``):
        within its share of what is left of the deadline, the query's token budget, the writes asked;
        ``lead``: its settings, the planning its steps join, the query's budget. The lead's model call
        is the round's planning: under its ``plan`` span, tasks added or none."""
        config, (settings, planning, budget) = self.config, lead
        with plan_span() as planning_span:
            within_s = (deadline_at - time.monotonic()) * PLANNING_SHARE
            catalog = await catalog_of(
                config.registry, config.settings.data_dir, timeout_s=max(within_s, 0.1)
            )
            led = await lead_rounds.lead_round(
                plan, outcomes, settings=settings, budget=budget, summary=planning, within_s=within_s,
                catalog=catalog, asked=asked, effects=tool_effects(config.registry, config.settings.data_dir),
            )  # fmt: skip
            added = [task.id for task in led.plan.order() if task.id not in plan.tasks]
            record_plan(planning_span, added, round_number=plan.rounds + 1)
        return led

    async def _run_tasks(
        self, plan: Plan, budget: TokenBudget | None, deadline_at: float, tape: Tape | None,
        grants: tuple[Grant, ...], earlier: dict[str, TaskOutcome], **chosen: Any,
    ) -> dict[str, TaskOutcome]:  # fmt: skip
        """Run the plan's tasks through subagents on this coordinator's sessions, their attempts
        recorded on ``tape`` if there is one; ``earlier``: the tasks an earlier round ran, as they
        ended (not run again); ``chosen``: what the query gives the runtime."""
        self.open_soon(plan.sources())  # every source the plan needs starts now, while the first tasks run
        transport = self.transport if tape is None else RecordingTransport(self.transport, tape)
        async with claude_subagents(self.config.claude, budget) as model:
            runtime = self._runtime(transport, model, grants, **chosen)
            left_s = deadline_at - time.monotonic()
            if tape is not None and not earlier:
                tape.start(left_s)
            return await run_plan(plan, runtime, left_s, earlier)

    async def _synthesized(
        self,
        plan: Plan,
        trace_id: str,
        outcomes: dict[str, TaskOutcome],
        planning: PlanningSummary | None,
        budget: TokenBudget | None,
        deadline_at: float,
    ) -> ResearchReport:
        """The report of the tasks' outcomes; in Claude mode, Claude writes the brief (the gaps stay the code's)."""
        claude = self.config.claude
        with synthesize_span() as synthesizing:
            report = synthesize(plan, trace_id, outcomes, planning)
            if claude is not None and budget is not None:
                left_s = max(deadline_at - time.monotonic(), 0.0) + DEADLINE_GRACE_S
                report = await llm.claude_brief(report, claude, budget, within_s=left_s)
                report = report.model_copy(update={"tokens": TokenUse(limit=budget.limit, used=budget.used)})
            record_synthesis(synthesizing, findings=len(report.findings), gaps=len(report.gaps))
        return report

    def _keep(
        self, report: ResearchReport, plan: Plan, grants: tuple[Grant, ...], approvals: tuple[Approval, ...],
        tape: Tape,
    ) -> None:  # fmt: skip
        """Keep the run beside its trace, so `research replay` can run it again."""
        config = self.config
        save_recording(
            config.settings.traces_path, report, plan, tape.attempts, deadline_s=tape.deadline_s,
            policy=config.policy, grants=(*config.grants, *grants), approvals=approvals,
            mode="claude" if config.claude is not None else "deterministic",
            breakers="shared" if self.guard is not None else "own",
            boundary="contract" if config.classifier is CONTRACT else "other",
        )  # fmt: skip


def _next_round(plan: Plan, outcomes: dict[str, TaskOutcome]) -> Plan | None:
    """The plan grown by the tasks the findings so far justify (``coordinator.planning.rounds``), or
    None: nothing follows, or the rounds are spent. A round's tasks run under the query's one
    deadline: those it leaves no time for end ``deadline``, as gaps, never dropped."""
    findings = {task_id: outcome.results for task_id, outcome in outcomes.items()}
    refused = [
        task_id
        for task_id, outcome in outcomes.items()
        if outcome.state == TaskState.ESCALATED and outcome.category == ErrorCategory.BUSINESS
    ]
    return next_round(plan, findings, refused)


def _led_by_claude(planning: PlanningSummary | None) -> TypeGuard[PlanningSummary]:
    """Whether Claude made the plan (not the deterministic planner it fell back to): the lead plans its rounds."""
    return (
        planning is not None
        and planning.planner == "claude"
        and any(step.action == "plan" for step in planning.steps)
    )


def _exactly(task: Task) -> AskedWrite:
    """A task run by name (`research task`, a chaos scenario's refund) asks for its own call, as given."""
    return AskedWrite.exactly(task.tool, task.arguments, asked=f"the task {task.id}, run as given")
