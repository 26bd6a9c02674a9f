"""Chaos runs: random fault scenarios, a history of every call and decision, invariants checked after each.

In the spirit of Toxiproxy (named faults with probabilities) and Jepsen (record a history, check it
afterwards). A scenario picks a story query, one or two sources and a fault for each, from the
catalogue below; most faults run against in-process sources (fast), the ones that need a real
process (kills, exits, bytes on the wire) against stdio subprocesses. Every scenario's seed replays it.

A scenario runs in the deterministic mode, or in Claude mode (``claude=``) against whatever Messages
API the settings point at: the same invariants hold whichever decides the next step.

Invariants, checked after each scenario:

| invariant          | what must hold                                                                     |
|--------------------|------------------------------------------------------------------------------------|
| `terminal`         | every planned task ends in exactly one terminal state and appears in the report     |
| `nothing_lost`     | every result a source returned to a subagent appears in the report (a finding, or a gap's partial results) |
| `no_blind_repeat`  | after a non-retryable error the identical call is never repeated; attempts within bounds |
| `escalation_complete` | every escalation carries attempted_query and the partial results the source gave |
| `deadline`         | the query finished by its deadline plus a small grace                               |
| `no_leak`          | no source process or socket is left behind after the query                         |
| `refunds`          | no refund above the limit reached billing; no order refunded above it in total, nor any refund issued outside the 60-day window after delivery; no refund was executed twice |
"""

from __future__ import annotations

import itertools
import json
import random
import time
import uuid
from collections import Counter
from collections.abc import Callable
from dataclasses import dataclass, field
from datetime import date
from typing import Any

import anyio
import psutil

from coordinator.plan import Plan
from coordinator.report import ResearchReport
from coordinator.research import ResearchOptions, make_plan, research
from coordinator.run import DEADLINE_GRACE_S
from sources import billing, customers, kb, orders, tickets
from sources.catalogue import SOURCES
from sources.contract import ResultPage
from sources.domain import AUTOMATIC_REFUND_LIMIT, REFUND_WINDOW_DAYS, pounds, within_refund_window
from sources.faults import FaultSettings
from sources.settings import SourceSettings
from sources.store import Store
from sources.world import world_path
from subagents.breaker import Breakers
from subagents.broker import CredentialBroker
from subagents.classify import Outcome
from subagents.claude import ClaudeSettings, TokenBudget
from subagents.connection import Connections, Target, stdio_target
from subagents.hooks import PostCallHook, PreCallHook, RefundLimit, ToolCall, TrimResults
from subagents.policy import RecoveryPolicy
from subagents.subagent import Runtime, Task, run_subagent
from subagents.tool_loop import claude_subagents

__all__ = ["CATALOGUE", "Scenario", "ScenarioResult", "check", "run_scenario", "scenarios"]

_MODULES = {"customers": customers, "orders": orders, "billing": billing, "tickets": tickets, "kb": kb}
QUERIES = [
    "Investigate jane.doe@example.com: recent orders, open tickets, and whether a £750 refund on ORD-10023 is allowed",
    "What is our policy on refunds for damaged items, and which of CUST-00042's orders qualify?",
    "Investigate CUST-00042: recent orders, open tickets, invoices, and whether a £45 refund on ORD-10031 is allowed",
    "Who is new.customer@example.com? Any orders or open tickets?",
    "Investigate CUST-00013: orders and tickets",
]
DEADLINE_S = 4.0
# The deadline counts spawning too: a scenario with a real process may spawn its source twice (a crash,
# then the respawn), about two seconds each on a busy two-core machine.
PROCESS_DEADLINE_S = 8.0
# Fast and bounded: the policy of a chaos run keeps its shape, not its production delays.
CHAOS_POLICY = RecoveryPolicy(base_delay_s=0.02, max_delay_s=0.1, call_timeout_s=0.15)

# The fault catalogue: name -> (needs a real process, how to make it).
InProcess = Callable[[random.Random], FaultSettings]
CATALOGUE: dict[str, tuple[bool, InProcess]] = {
    "hang": (False, lambda rng: FaultSettings(hang=1)),
    "slow_jitter": (
        False,
        lambda rng: FaultSettings(
            latency_ms=rng.choice([50, 150, 300]), jitter_ms=50, seed=rng.randrange(1000)
        ),
    ),
    "flaky": (
        False,
        lambda rng: FaultSettings(transient=rng.choice([0.3, 0.6, 1.0]), seed=rng.randrange(1000)),
    ),
    "lost_answer": (False, lambda rng: FaultSettings(lose=rng.choice([0.5, 1.0]), seed=rng.randrange(1000))),
    "oversized": (False, lambda rng: FaultSettings(oversize=1)),
    "kill_before_initialize": (True, lambda rng: FaultSettings(die_at="start")),
    "kill_during_initialize": (True, lambda rng: FaultSettings(die_at="handshake")),
    "kill_mid_call": (True, lambda rng: FaultSettings(crash=1)),
    "exit_mid_call": (True, lambda rng: FaultSettings(exit=1)),
    "garbage": (True, lambda rng: FaultSettings(garbage=1)),
    "truncated": (True, lambda rng: FaultSettings(truncate=1)),
    "unknown_id": (True, lambda rng: FaultSettings(unknown_id=1)),
    "restart_in_flight": (True, lambda rng: FaultSettings(crash=1)),  # dies mid-call; the respawn is healthy
    "flapping": (True, lambda rng: FaultSettings(crash=1)),  # down, up, down, up... across respawns
}
_PROCESS_SHARE = 0.12  # of scenarios that use a real process: enough to cover them, few enough to stay fast


@dataclass(frozen=True)
class Scenario:
    seed: int
    query: str
    faults: dict[str, str]  # source -> fault name
    refund_amount: float | None  # an issue_refund task run beside the query, or None

    @property
    def deadline_s(self) -> float:
        needs_process = any(CATALOGUE[name][0] for name in self.faults.values())
        return PROCESS_DEADLINE_S if needs_process else DEADLINE_S

    def describe(self) -> str:
        faults = ", ".join(f"{name}:{source}" for source, name in sorted(self.faults.items())) or "no faults"
        refund = f", refund {pounds(self.refund_amount)}" if self.refund_amount is not None else ""
        return f"{faults}{refund}"


def scenarios(count: int, seed: int) -> list[Scenario]:
    """``count`` scenarios, each with a seed of its own (replay one with ``Scenario`` from that seed)."""
    master = random.Random(seed)  # noqa: S311  (scenario dice, not cryptography)
    return [scenario_from(master.randrange(2**31)) for _ in range(count)]


def scenario_from(seed: int) -> Scenario:
    rng = random.Random(seed)  # noqa: S311
    in_process = [name for name, (process, _) in CATALOGUE.items() if not process]
    with_process = [name for name, (process, _) in CATALOGUE.items() if process]
    faults: dict[str, str] = {}
    for source in rng.sample(SOURCES, rng.choice([1, 1, 2])):
        faults[source] = rng.choice(with_process if rng.random() < _PROCESS_SHARE else in_process)
    refund = round(rng.uniform(5, 900), 2) if rng.random() < 0.3 else None
    return Scenario(seed=seed, query=rng.choice(QUERIES), faults=faults, refund_amount=refund)


# --- the history ----------------------------------------------------------------------------------


@dataclass(frozen=True)
class Call(ToolCall):
    """One call a subagent made, and what came back, as the post-call hook saw it."""

    outcome: Outcome = field(kw_only=True)


@dataclass
class History:
    calls: list[Call] = field(default_factory=list)

    def recorder(self) -> PostCallHook:
        def record(call: ToolCall, outcome: Outcome) -> Outcome:
            self.calls.append(
                Call(call.source, call.tool, dict(call.arguments), call.attempt, call.task, outcome=outcome)
            )
            return outcome

        return record


@dataclass
class ScenarioResult:
    scenario: Scenario
    plan: Plan  # the plan that ran: the checker judges the report against it
    report: ResearchReport | None
    history: History
    elapsed_s: float
    refund_rows: list[dict[str, Any]]
    refund_key: str | None
    leaked_processes: list[int]
    leaked_sockets: int
    policy: RecoveryPolicy
    violations: list[tuple[str, str]] = field(default_factory=list)


# --- running a scenario ---------------------------------------------------------------------------


def _targets(scenario: Scenario, settings: SourceSettings) -> dict[str, Target]:
    rng = random.Random(scenario.seed)  # noqa: S311
    targets: dict[str, Target] = {}
    for source in SOURCES:
        name = scenario.faults.get(source)
        if name is None:
            server = _MODULES[source].create_server(settings)
            targets[source] = lambda server=server: server
            continue
        needs_process, make = CATALOGUE[name]
        faults = make(rng)
        if not needs_process:
            server = _MODULES[source].create_server(settings.with_faults(faults))
            targets[source] = lambda server=server: server
        elif name == "restart_in_flight":
            targets[source] = _in_turn(
                stdio_target(source, settings.with_faults(faults)), stdio_target(source, settings)
            )
        elif name == "flapping":
            down, up = stdio_target(source, settings.with_faults(faults)), stdio_target(source, settings)
            targets[source] = _alternating(down, up)
        else:
            targets[source] = stdio_target(source, settings.with_faults(faults))
    return targets


def _in_turn(*targets: Target) -> Target:
    remaining = list(targets)
    return lambda: (remaining.pop(0) if len(remaining) > 1 else remaining[0])()


def _alternating(*targets: Target) -> Target:
    count = [0]

    def next_target() -> Any:
        count[0] += 1
        return targets[(count[0] - 1) % len(targets)]()

    return next_target


def _open_sockets() -> int:
    return len(psutil.Process().net_connections(kind="inet"))


async def run_scenario(
    scenario: Scenario, settings: SourceSettings, *, policy: RecoveryPolicy = CHAOS_POLICY,
    post_call: tuple[PostCallHook, ...] = (), pre_call: tuple[PreCallHook, ...] = (RefundLimit(),),
    claude: ClaudeSettings | None = None,
) -> ScenarioResult:  # fmt: skip
    """Run one scenario and check it. A test passes a deliberately broken policy or hook to see it caught.

    With ``claude``, the scenario runs in Claude mode: Claude plans, drives every subagent (the side
    refund too) and writes the brief, and the same invariants are checked.
    """
    history = History()
    sockets_before = _open_sockets()
    targets = _targets(scenario, settings)
    started = time.monotonic()
    hooks: tuple[PostCallHook, ...] = (history.recorder(), *post_call, TrimResults())
    options = ResearchOptions(
        deadline_s=scenario.deadline_s, policy=policy, seed=scenario.seed, claude=claude
    )
    budget = TokenBudget(claude.token_budget) if claude is not None else None
    # Planned here, as research() would, so the checker judges the plan that ran (Claude's in Claude mode).
    plan, planning = await make_plan(scenario.query, options, budget)
    report = await research(
        scenario.query, options, settings=settings, targets=targets, post_call=hooks, plan=plan,
        planning=planning, budget=budget,
    )  # fmt: skip
    elapsed = time.monotonic() - started
    refund_rows: list[dict[str, Any]] = []
    key = None
    if scenario.refund_amount is not None:
        key = f"chaos-{scenario.seed}-{uuid.uuid4().hex[:8]}"
        await _refund(scenario, settings, targets, policy, pre_call, hooks, key, claude)
        store = Store(world_path(settings.data_dir, settings.seed) / "billing.db")
        refund_rows = store.rows(  # this scenario's refund, every order refunded beyond the limit, and
            # every refund issued outside the window (each row with its order's delivery date)
            "SELECT r.*, i.delivered_on FROM refunds r LEFT JOIN invoices i ON i.order_id = r.order_id "
            "WHERE r.idempotency_key = ? OR r.order_id IN "
            "(SELECT order_id FROM refunds GROUP BY order_id HAVING SUM(amount) > ?) "
            "OR julianday(r.issued_on) - julianday(i.delivered_on) > ?",
            (key, AUTOMATIC_REFUND_LIMIT, REFUND_WINDOW_DAYS),
        )
    # The connections closed their source processes on the way out; give them a bounded moment to go.
    await anyio.to_thread.run_sync(lambda: psutil.wait_procs(_children(), timeout=2))
    result = ScenarioResult(
        scenario=scenario, plan=plan, report=report, history=history, elapsed_s=elapsed, refund_rows=refund_rows,
        refund_key=key, leaked_processes=_live_children(), leaked_sockets=_open_sockets() - sockets_before,
        policy=policy,
    )  # fmt: skip
    result.violations = check(result)
    return result


async def _refund(
    scenario: Scenario, settings: SourceSettings, targets: dict[str, Target], policy: RecoveryPolicy,
    pre_call: tuple[PreCallHook, ...], hooks: tuple[PostCallHook, ...], key: str, claude: ClaudeSettings | None,
) -> None:  # fmt: skip
    broker = CredentialBroker(settings.signing_key(), base_scopes=frozenset({"billing:refund"}))
    async with (
        Connections.opened({"billing": targets["billing"]}) as connections,
        claude_subagents(claude) as model,
    ):
        runtime = Runtime(
            connections=connections, broker=broker, policy=policy, pre_call=pre_call, post_call=hooks,
            rng=random.Random(scenario.seed), model=model,  # noqa: S311
        )  # fmt: skip
        amount = scenario.refund_amount or 0.0
        task = Task(
            "refund_issue",
            "billing",
            "issue_refund",
            {"order_id": "ORD-10008", "amount": amount, "idempotency_key": key},
        )
        await run_subagent(task, runtime, deadline=runtime.clock.now() + scenario.deadline_s)


def _children() -> list[psutil.Process]:
    found = []
    for child in psutil.Process().children(recursive=True):
        try:
            if any("sources." in part for part in child.cmdline()):
                found.append(child)
        except psutil.Error:
            continue
    return found


def _live_children() -> list[int]:
    alive = []
    for child in _children():
        try:
            if child.status() != psutil.STATUS_ZOMBIE:
                alive.append(child.pid)
        except psutil.Error:
            continue
    return alive


# --- the checker ----------------------------------------------------------------------------------


def check(result: ScenarioResult) -> list[tuple[str, str]]:
    """Every invariant violated by this scenario, as (invariant, what happened)."""
    found: list[tuple[str, str]] = []
    report = result.report
    if report is None:
        return [("terminal", "the query produced no report")]
    plan = result.plan
    states = Counter(task.id for task in report.tasks)
    if set(states) != set(plan.tasks) or any(count != 1 for count in states.values()):
        found.append(("terminal", f"planned {sorted(plan.tasks)}, reported {sorted(states.elements())}"))
    if any(task.state not in ("ok", "empty", "escalated", "blocked", "deadline") for task in report.tasks):
        found.append(("terminal", "a task ended in no terminal state"))

    # A result is kept when it is a finding, or (a planned call's result that a later unresolved error
    # superseded, in Claude mode) among the partial results of its task's gap.
    kept_in_gaps = [item for gap in report.gaps for item in gap.partial_results]
    query_calls = [call for call in result.history.calls if call.tool != "issue_refund"]
    for call in query_calls:
        if not isinstance(call.outcome.result, ResultPage):
            continue
        cited = any(f.source == call.source and f.tool == call.tool for f in report.findings)
        if not cited and not all(record in kept_in_gaps for record in call.outcome.result.results):
            found.append(
                ("nothing_lost", f"{call.source}.{call.tool} returned results the report does not have")
            )

    bound = result.policy.max_attempts
    for task in report.tasks:
        if task.attempts > bound:
            found.append(
                ("no_blind_repeat", f"{task.id} made {task.attempts} attempts; the bound is {bound}")
            )
    by_task: dict[str, list[Call]] = {}
    for call in result.history.calls:
        by_task.setdefault(call.task, []).append(call)
    decisions = {task.id: task.decisions for task in report.tasks}
    for task_id, calls in by_task.items():
        for before, after in itertools.pairwise(calls):
            error = before.outcome.error
            if (
                error is None
                or error.is_retryable
                or (after.tool, after.arguments) != (before.tool, before.arguments)
            ):
                continue
            between = [d.action for d in decisions.get(task_id, []) if d.attempt == before.attempt]
            if "elevate" not in between:
                found.append((
                    "no_blind_repeat",
                    f"{task_id}: {before.source}.{before.tool} repeated {before.arguments} after a {error.error_category} error",
                ))  # fmt: skip

    for gap in report.gaps:  # a gap's partial results are its escalation's
        if gap.state == "blocked":
            continue
        if not gap.attempted_query.tool or not isinstance(gap.partial_results, list):
            found.append(
                ("escalation_complete", f"{gap.task} escalated without attempted_query or partial_results")
            )
        given = [item for call in by_task.get(gap.task, []) if call.outcome.error
                 for item in (call.outcome.error.partial_results or [])]  # fmt: skip
        missing = [item for item in given if item not in gap.partial_results]
        if missing:
            found.append(
                ("escalation_complete", f"{gap.task} dropped partial results {json.dumps(missing)[:120]}")
            )

    deadline_s = result.scenario.deadline_s
    if result.elapsed_s > deadline_s + DEADLINE_GRACE_S + 1.0:
        found.append(
            ("deadline", f"the query took {result.elapsed_s:.2f} s; the deadline is {deadline_s:g} s")
        )
    if result.leaked_processes:
        found.append(("no_leak", f"source processes still running: {result.leaked_processes}"))
    if result.leaked_sockets > 0:
        found.append(("no_leak", f"{result.leaked_sockets} more sockets open than before the query"))

    limit = AUTOMATIC_REFUND_LIMIT
    reached = [call for call in result.history.calls if call.tool == "issue_refund" and _amount(call) > limit]
    if reached:
        found.append(
            (
                "refunds",
                f"a refund of {pounds(_amount(reached[0]))} reached billing; the limit is £{limit:,.0f}",
            )
        )
    totals: dict[str, float] = {}
    for row in result.refund_rows:
        totals[row["order_id"]] = totals.get(row["order_id"], 0.0) + row["amount"]
    over_limit = sorted(order for order, total in totals.items() if total > limit)
    if over_limit:
        found.append(("refunds", f"orders refunded above the £{limit:,.0f} limit in total: {over_limit}"))
    late = sorted(
        f"{row['id']} on {row['order_id']} ({row['issued_on']}, delivered {row['delivered_on']})"
        for row in result.refund_rows
        if not within_refund_window(row.get("delivered_on"), date.fromisoformat(row["issued_on"]))
    )
    if late:
        found.append(
            ("refunds", f"refunds issued outside the {REFUND_WINDOW_DAYS}-day window after delivery: {late}")
        )
    mine = [row for row in result.refund_rows if row["idempotency_key"] == result.refund_key]
    if len(mine) > 1:
        found.append(("refunds", f"the refund with key {result.refund_key} was executed {len(mine)} times"))
    return found


def _amount(call: Call) -> float:
    amount = call.arguments.get("amount")
    return float(amount) if isinstance(amount, int | float) else 0.0


# --- chaos in one query ---------------------------------------------------------------------------

# --- soak -----------------------------------------------------------------------------------------


@dataclass(frozen=True)
class Sample:
    queries: int
    rss_mb: float
    open_files: int
    children: int


def sample(queries: int) -> Sample:
    me = psutil.Process()
    return Sample(queries, me.memory_info().rss / 2**20, me.num_fds(), len(me.children(recursive=True)))


async def soak(
    count: int,
    urls: dict[str, str],
    settings: SourceSettings,
    seed: int,
    claude: ClaudeSettings | None = None,
) -> list[Sample]:
    """``count`` queries through this one process against running sources; samples along the way."""
    rng = random.Random(seed)  # noqa: S311
    breakers = Breakers(cooldown_s=2.0)  # one coordinator process: its breakers outlive each query
    samples = [sample(0)]
    marks = {min(count, 50), count} | {count * share // 10 for share in range(1, 10)}
    for index in range(1, count + 1):
        options = ResearchOptions(
            deadline_s=DEADLINE_S, transport="http", urls=urls, policy=CHAOS_POLICY, seed=rng.randrange(2**31),
            breakers=breakers, claude=claude,
        )  # fmt: skip
        await research(rng.choice(QUERIES), options, settings=settings)
        if index in marks:
            samples.append(sample(index))
    return samples
