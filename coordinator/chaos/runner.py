"""Running one chaos scenario: its sources (in process, or real processes for the faults that need one), the query, a side refund, and the check."""

from __future__ import annotations

import itertools
import random
import time
import uuid
from dataclasses import replace
from typing import TYPE_CHECKING

import anyio
import psutil

from coordinator.chaos.catalogue import CATALOGUE, CHAOS_POLICY, Scenario
from coordinator.chaos.checker import check
from coordinator.chaos.history import History, ScenarioResult
from coordinator.core import Config, Coordinator
from sources import billing, customers, kb, orders, tickets
from sources.catalogue import SOURCES
from sources.refund_ledger import LedgerRefund, ledger
from sources.refund_rules import RefundLimit
from sources.settings import SourceSettings
from subagents.classify import CONTRACT, Classifier
from subagents.claude import ClaudeSettings, TokenBudget
from subagents.hooks import PostCallHook, PreCallHook, TrimResults
from subagents.policy import RecoveryPolicy
from subagents.sessions.connection import Target, stdio_target
from subagents.subagent import Observer, Task
from subagents.writes import Approval

if TYPE_CHECKING:
    from mcp.server import MCPServer

# Each source's module, whose server a scenario runs in process (the catalogue names sources only).
_SERVERS = {"customers": customers, "orders": orders, "billing": billing, "tickets": tickets, "kb": kb}


def _targets(scenario: Scenario, settings: SourceSettings) -> dict[str, Target]:
    rng = random.Random(scenario.seed)  # noqa: S311
    targets: dict[str, Target] = {}
    for source in SOURCES:
        name = scenario.faults.get(source)
        if name is None:
            targets[source] = _in_process(_SERVERS[source].create_server(settings))
            continue
        needs_process, make = CATALOGUE[name]
        faults = make(rng)
        if not needs_process:
            targets[source] = _in_process(_SERVERS[source].create_server(settings.with_faults(faults)))
        elif name in ("restart_in_flight", "flapping"):  # faulty, then healthy: once, or in turn for ever
            down, up = stdio_target(source, settings.with_faults(faults)), stdio_target(source, settings)
            targets[source] = (_in_turn if name == "restart_in_flight" else _alternating)(down, up)
        else:
            targets[source] = stdio_target(source, settings.with_faults(faults))
    return targets


def _in_process(server: MCPServer) -> Target:
    return lambda: server


def _in_turn(*targets: Target) -> Target:
    remaining = list(targets)
    return lambda: (remaining.pop(0) if len(remaining) > 1 else remaining[0])()


def _alternating(*targets: Target) -> Target:
    turns = itertools.cycle(targets)
    return lambda: next(turns)()


def _open_sockets() -> int:
    return len(psutil.Process().net_connections(kind="inet"))


async def run_scenario(
    scenario: Scenario, settings: SourceSettings, *, policy: RecoveryPolicy = CHAOS_POLICY,
    post_call: tuple[PostCallHook, ...] = (), pre_call: tuple[PreCallHook, ...] = (RefundLimit(),),
    claude: ClaudeSettings | None = None, classifier: Classifier = CONTRACT, observer: Observer | None = None,
    stop: anyio.CancelScope | None = None,
) -> ScenarioResult:  # fmt: skip
    """Run one scenario and check it. A test passes a deliberately broken policy or hook to see it caught.

    With ``claude``, the scenario runs in Claude mode: Claude plans, drives every subagent (the side
    refund too) and writes the brief, and the same invariants are checked. ``classifier`` is the
    classification boundary of every subagent (``research compare`` swaps it); ``observer`` watches the
    query's subagents; cancelling ``stop`` abandons the query (its report is then None).
    """
    history = History()
    sockets_before = _open_sockets()
    # What this process ran before the scenario (another test's, another query's) is not its leak.
    children_before = {child.pid for child in _children()}
    targets = _targets(scenario, settings)
    hooks: tuple[PostCallHook, ...] = (history.recorder(), *post_call, TrimResults())
    config = Config.for_chaos(settings, policy, claude, classifier)
    budget = TokenBudget(claude.token_budget) if claude is not None else None
    report = None
    async with Coordinator(config, targets=targets) as coordinator:
        # One deadline for planning and the run, from the instant `elapsed` counts: once the coordinator
        # is open (its sessions open as the tasks need them, so spawning counts), not while it loaded
        # what the process needed once (Claude mode's SDK): a seed replays the same wherever it runs.
        started = time.monotonic()
        # Planned first, so the checker judges the plan that ran (Claude's in Claude mode).
        plan, planning = await coordinator.plan(
            scenario.query, deadline_s=scenario.deadline_s, started_at=started, budget=budget
        )
        with stop or anyio.CancelScope():
            report = await coordinator.research(
                scenario.query, deadline_s=scenario.deadline_s, started_at=started, seed=scenario.seed,
                plan=plan, planning=planning, budget=budget, observer=observer, post_call=hooks,
            )  # fmt: skip
    elapsed = time.monotonic() - started
    refunds: list[LedgerRefund] = []
    key = None
    if scenario.refund_amount is not None:
        key = f"chaos-{scenario.seed}-{uuid.uuid4().hex[:8]}"
        await _refund(scenario, config, targets["billing"], pre_call, hooks, key)
        refunds = await anyio.to_thread.run_sync(ledger, settings)  # what billing paid, as its ledger says
    # The connections closed their source processes on the way out; give them a bounded moment to go.
    started_here = [child for child in _children() if child.pid not in children_before]
    await anyio.to_thread.run_sync(lambda: psutil.wait_procs(started_here, timeout=2))
    leaked = [pid for pid in _live_children() if pid not in children_before]
    result = ScenarioResult(
        scenario=scenario, plan=plan, report=report, history=history, elapsed_s=elapsed, refunds=refunds,
        refund_key=key, leaked_processes=leaked, leaked_sockets=_open_sockets() - sockets_before,
        policy=policy,
    )  # fmt: skip
    result.violations = check(result)
    return result


async def _refund(
    scenario: Scenario, config: Config, billing: Target, pre_call: tuple[PreCallHook, ...],
    hooks: tuple[PostCallHook, ...], key: str,
) -> None:  # fmt: skip
    """The scenario's side refund, on a session of its own to billing, with the refund scope from the start."""
    amount = scenario.refund_amount or 0.0
    task = Task(
        "refund_issue",
        "billing",
        "issue_refund",
        {"order_id": "ORD-10008", "amount": amount, "idempotency_key": key},
    )
    async with Coordinator(replace(config, grants=()), targets={"billing": billing}) as refunds:
        await refunds.run_task(
            task, deadline_s=scenario.deadline_s, seed=scenario.seed,
            # The scenario's own refund is the write it tests: approved by the scenario, as a person
            # approves a task; the query beside it has no approval and writes nothing.
            approvals=(Approval("issue_refund", "ORD-10008", by="the chaos scenario"),),
            base_scopes=frozenset({"billing:refund"}), pre_call=pre_call, post_call=hooks,
        )  # fmt: skip


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
