"""One question of a batch, researched and judged: what every engine runs, wherever it runs it.

The question is researched as `research ask --json` would (same planner, same report), against the
batch's shared fleet over sessions its worker holds, under the fleet's guard (breakers, retry budget,
bulkheads). Every call is recorded on the way, so the chaos checker (``coordinator.chaos.checker``)
judges the report against the plan that ran and the calls that were made: the batch's invariants
are the chaos run's, applied to every question.
"""

from __future__ import annotations

import time
import zlib
from collections.abc import AsyncIterator, Mapping
from contextlib import asynccontextmanager
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

from coordinator.batch.questions import Question
from coordinator.chaos.catalogue import Scenario
from coordinator.chaos.checker import check
from coordinator.chaos.history import History, ScenarioResult
from coordinator.core import Config, Coordinator
from coordinator.planning.plan import Plan
from coordinator.planning.query_error import QueryError
from coordinator.registry import Registry
from coordinator.reporting.report import PlanningSummary
from sources.deferred import deferred
from sources.settings import SourceSettings
from subagents.broker import Grant
from subagents.claude import ClaudeSettings, TokenBudget
from subagents.guard import Guard
from subagents.hooks import TrimResults
from subagents.writes import Approval, AskedWrite

if TYPE_CHECKING:
    from coordinator.planning import planner, writes
else:
    writes = deferred("coordinator.planning.writes")  # reading a question's writes: the driver's work
    planner = deferred("coordinator.planning.planner")  # and what it leaves out

__all__ = [
    "Answer",
    "Planned",
    "Setup",
    "answer",
    "asking_at",
    "question_seed",
    "read",
    "reading_coordinator",
]


@dataclass(frozen=True)
class Setup:
    """How a batch's questions are asked, the same in every worker (plain values: it crosses to Ray)."""

    settings: SourceSettings
    urls: Mapping[str, str]  # the fleet's sources, by name
    deadline_s: float = 30.0
    seed: int = 0
    claude: ClaudeSettings | None = None
    approvals: tuple[Approval, ...] = ()  # the writes approved up front: a batch has no one to ask
    registry: Registry = field(default_factory=lambda: Registry(None))  # the sources in effect


@asynccontextmanager
async def asking_at(setup: Setup, guard: Guard) -> AsyncIterator[Coordinator]:
    """A coordinator on every source of the fleet, its sessions opened now and held until the worker is
    done: what every question of the worker shares (its sessions, and the guard)."""
    config = Config.for_ask(
        setup.settings, setup.registry, setup.claude, fleet=setup.urls, approvals=setup.approvals
    )
    async with Coordinator(config, guard=guard) as coordinator:
        coordinator.open_soon(setup.urls)
        yield coordinator


@dataclass(frozen=True)
class Answer:
    """A question's outcome (on Ray, it comes back from a worker process)."""

    id: str
    query: str
    status: str  # "complete" | "partial" | "failed"
    report_json: str | None = None  # the report, as `research ask --json` prints it; None when failed
    error: str = ""  # why it failed
    violations: list[tuple[str, str]] = field(default_factory=list)  # the chaos checker's findings
    tokens_used: int = 0


def question_seed(batch_seed: int, question_id: str) -> int:
    """A question's back-off seed: the same for the same batch seed and id, whatever ran before it."""
    return zlib.crc32(f"{batch_seed}:{question_id}".encode())


@dataclass(frozen=True)
class Planned:
    """A question read: its plan, and the writes it asks for (those its run may make; those the
    checker judges its calls against). Reading is the planner's work, with its matcher and its English
    word list (some 110 MB in a process): the Ray engine reads every question in its driver, once,
    and its workers, which only run tasks, load neither. Plain values: it crosses to Ray."""

    plan: Plan
    planning: PlanningSummary | None
    asked: tuple[AskedWrite, ...]  # what the run may write (``Coordinator.asked_writes``)
    judged: tuple[AskedWrite, ...]  # what the checker allows (``ScenarioResult.asked``)
    left_out: dict[str, str]  # what the question names only to leave out (``planner.left_out``)
    reading_s: float  # the time reading took, which the question's deadline counts


def reading_coordinator(setup: Setup) -> Coordinator:
    """A coordinator that reads and plans questions, never entered: it opens no session."""
    return Coordinator(Config.for_ask(setup.settings, setup.registry, setup.claude, fleet=setup.urls))


async def read(
    question: Question, setup: Setup, coordinator: Coordinator, budget: TokenBudget | None = None
) -> Planned | Answer:
    """``question`` read and planned by ``coordinator``; one nobody can plan for is ``failed``."""
    started = time.monotonic()
    try:
        plan, planning = await coordinator.plan(
            question.query, deadline_s=_deadline_s(question, setup), started_at=started, budget=budget
        )
    except QueryError as exc:
        return Answer(question.id, question.query, "failed", error=str(exc))
    asked, judged = coordinator.asked_writes(question.query), writes.asked_writes(question.query).writes
    left_out = planner.left_out(question.query)
    return Planned(plan, planning, asked, judged, left_out, reading_s=time.monotonic() - started)


async def answer(
    question: Question, setup: Setup, coordinator: Coordinator, planned: Planned | None = None
) -> Answer:
    """Research ``question`` on ``coordinator`` (``asking_at``'s) and check its report: as ``planned``
    (``read`` elsewhere), or read here first."""
    started = time.monotonic() - (planned.reading_s if planned is not None else 0.0)
    deadline_s = _deadline_s(question, setup)
    seed = question_seed(setup.seed, question.id)
    budget = TokenBudget(setup.claude.token_budget) if setup.claude is not None else None
    if planned is None:
        read_here = await read(question, setup, coordinator, budget)
        if isinstance(read_here, Answer):
            return read_here
        planned = read_here
    plan = planned.plan
    history = History()
    report = await coordinator.research(
        question.query, deadline_s=deadline_s, started_at=started, seed=seed, plan=plan,
        planning=planned.planning, budget=budget, grants=tuple(Grant(scope) for scope in question.grant),
        post_call=(history.recorder(), TrimResults()), asked=planned.asked, left_out=planned.left_out,
    )  # fmt: skip
    elapsed = time.monotonic() - started
    # Judged as a chaos scenario's query, but for what is not one question's to judge on a shared
    # fleet: no process or socket of its own to leak, and billing's ledger (every question's refunds)
    # is not read; a refund the question asked for is still judged from its calls.
    judged = ScenarioResult(
        scenario=Scenario(seed, question.query, faults={}, refund_amount=None), plan=plan,
        report=report, history=history, elapsed_s=elapsed, refunds=[], refund_key=None,
        leaked_processes=[], leaked_sockets=0, policy=coordinator.config.policy, query_deadline_s=deadline_s,
        asked=planned.judged,
    )  # fmt: skip
    return Answer(
        question.id, question.query, report.status, report_json=report.to_json(), violations=check(judged),
        tokens_used=budget.used if budget is not None else 0,
    )  # fmt: skip


def _deadline_s(question: Question, setup: Setup) -> float:
    return question.deadline or setup.deadline_s
