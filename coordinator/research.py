"""One research query end to end: plan, run the tasks through subagents, synthesize the report.

Two modes. Deterministic (the default): the code plans, decides every recovery step, writes the
brief. Claude mode (``ResearchOptions.claude``): Claude plans, drives each subagent's tool calls and
writes the brief, while the code keeps the plan's validation, the recovery bounds, the hooks, the
gaps and the query's token budget; whatever the model cannot do, the code does as in the default.
"""

from __future__ import annotations

import random
import time
from collections.abc import Mapping
from contextlib import AsyncExitStack
from dataclasses import dataclass, field
from typing import Any

from coordinator.llm import claude_brief, claude_plan
from coordinator.plan import Plan
from coordinator.planner import plan_query
from coordinator.report import PlanningSummary, ResearchReport, TokenUse
from coordinator.run import DEADLINE_GRACE_S, run_plan
from coordinator.synthesize import synthesize
from sources.catalogue import SOURCES, default_url
from sources.faults import FaultSettings
from sources.settings import SourceSettings
from subagents.breaker import Breakers
from subagents.broker import CredentialBroker, Grant
from subagents.claude import ClaudeSettings, TokenBudget
from subagents.connection import Connections, Target, forked_target, http_target
from subagents.hooks import PostCallHook, TrimResults, refund_guard
from subagents.policy import RecoveryPolicy
from subagents.subagent import Clock, MonotonicClock, Observer, Runtime, SilentObserver
from subagents.tool_loop import claude_subagents
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

__all__ = ["DEFAULT_GRANTS", "PLANNING_SHARE", "ResearchOptions", "make_plan", "research", "targets_for"]

# The query's deadline covers a model's planning and brief too. The lead agent may take at most this
# share of it, so the work always has the rest; the brief gets what is left (and the grace).
PLANNING_SHARE = 0.25

# What the broker may grant, and for which purpose: financial records for refund research only.
DEFAULT_GRANTS = (Grant("billing:read", "refund research"),)


@dataclass
class ResearchOptions:
    deadline_s: float = 30.0
    transport: str = "stdio"  # "stdio": spawn each source; "http": use sources already serving
    urls: Mapping[str, str] = field(
        default_factory=dict
    )  # per-source HTTP URLs (default: the fleet's, or 8101-8105)
    faults: Mapping[str, FaultSettings] = field(default_factory=dict)  # per-source faults (stdio only)
    policy: RecoveryPolicy = field(default_factory=RecoveryPolicy)
    grants: tuple[Grant, ...] = DEFAULT_GRANTS
    seed: int | None = None  # back-off jitter; None draws a fresh one
    # Circuit breakers live as long as the coordinator process that shares them across its queries
    # (a long-lived coordinator passes its own); None gives this query breakers of its own.
    breakers: Breakers | None = None
    claude: ClaudeSettings | None = None  # Claude mode; None: the deterministic mode
    # The instant (time.monotonic) the deadline counts from, like a gRPC deadline: the command's
    # start, so start-up counts too. None: when research() is called.
    started_at: float | None = None


def _deadline_at(options: ResearchOptions) -> float:
    """The instant (time.monotonic) the query's deadline falls: counted from the command's start."""
    return (options.started_at if options.started_at is not None else time.monotonic()) + options.deadline_s


async def make_plan(
    query: str, options: ResearchOptions, budget: TokenBudget | None = None
) -> tuple[Plan, PlanningSummary | None]:
    """The plan a query runs, the one place that decides it: in Claude mode Claude's, within its share
    of the deadline (``PLANNING_SHARE``), else the deterministic planner's. A caller that wants the
    plan before the run (the CLI's progress table, the chaos checker) asks here and passes it on.
    Bad queries raise ``QueryError``."""
    if options.claude is None:
        return plan_query(query), None
    within_s = min(options.deadline_s * PLANNING_SHARE, _deadline_at(options) - time.monotonic())
    return await claude_plan(query, options.claude, budget, within_s=within_s)


def targets_for(settings: SourceSettings, options: ResearchOptions) -> dict[str, Target]:
    if options.transport == "http":
        return {source: http_target(options.urls.get(source, default_url(source))) for source in SOURCES}
    return {
        source: forked_target(source, settings.with_faults(options.faults.get(source, FaultSettings())))
        for source in SOURCES
    }


async def research(
    query: str,
    options: ResearchOptions | None = None,
    *,
    settings: SourceSettings | None = None,
    observer: Observer | None = None,
    plan: Plan | None = None,
    targets: dict[str, Target] | None = None,
    connections: Connections | None = None,
    clock: Clock | None = None,
    client_options: dict[str, Any] | None = None,
    post_call: tuple[PostCallHook, ...] | None = None,
    planning: PlanningSummary | None = None,
    budget: TokenBudget | None = None,
) -> ResearchReport:
    """Research one query. Bad queries raise ``QueryError`` before anything runs.

    The deadline counts from ``options.started_at`` (the command's first instant) and covers planning,
    opening the sessions, the calls and the brief. ``targets`` replaces where the sources are found
    (tests run them in memory); a caller that owns the sessions passes ``connections`` instead (the CLI
    prints the report before it closes them). ``clock`` is the subagents' time (tests inject one whose
    back-off sleeps return at once). A caller that planned already passes ``plan`` and ``planning``,
    and the ``budget`` the planning spent from.
    """
    options = options or ResearchOptions()
    settings = settings or SourceSettings.from_environment()
    claude = options.claude
    if claude is not None and budget is None:
        budget = TokenBudget(claude.token_budget)
    ensure_tracing("research-coordinator")
    deadline_at = _deadline_at(options)
    with research_span(query) as root:
        with plan_span() as planning_span:
            if plan is None:
                plan, planning = await make_plan(query, options, budget)
            record_plan(planning_span, [task.id for task in plan.order()])
        async with AsyncExitStack() as sessions:
            if connections is None:
                connections = await sessions.enter_async_context(
                    Connections.opened(targets or targets_for(settings, options), client_options)
                )
            for source in plan.sources():  # every source the plan needs starts now, while the first tasks run
                connections[source].open_soon()
            model = await sessions.enter_async_context(claude_subagents(claude, budget))
            # The refund limit remembers what billing says of each order's refunds during this query, so a
            # refund its subagents already know would break a per-order rule is not even sent.
            refund_limit, refund_ledger = refund_guard()
            hooks = post_call if post_call is not None else (TrimResults(),)
            runtime = Runtime(
                connections=connections,
                broker=CredentialBroker(settings.signing_key(), grants=options.grants),
                policy=options.policy,
                breakers=options.breakers if options.breakers is not None else Breakers(),
                rng=random.Random(options.seed),  # noqa: S311  (back-off jitter, not cryptography)
                observer=observer or SilentObserver(),
                clock=clock or MonotonicClock(),
                pre_call=(refund_limit,),
                post_call=(refund_ledger, *hooks),
                model=model,
            )
            outcomes = await run_plan(plan, runtime, deadline_at - time.monotonic())
        with synthesize_span() as synthesizing:
            report = synthesize(plan, trace_id_of(root), outcomes, planning)
            if claude is not None and budget is not None:  # Claude writes the brief; gaps stay the code's
                left_s = max(deadline_at - time.monotonic(), 0.0) + DEADLINE_GRACE_S
                report = await claude_brief(report, claude, budget, within_s=left_s)
                report = report.model_copy(update={"tokens": TokenUse(limit=budget.limit, used=budget.used)})
            record_synthesis(synthesizing, findings=len(report.findings), gaps=len(report.gaps))
        end_research(
            root,
            status=report.status,
            plan_size=len(plan.tasks),
            findings=len(report.findings),
            gaps=len(report.gaps),
        )
        return report
