"""A subagent owns one task: one source, one tool, its arguments, a deadline.

It calls, classifies the outcome, lets the policy decide, acts, and reports. Every step it takes is
a ``Decision`` in its report, in order:

    call ──► pre-call hooks ──► breaker ──► source ──► classify ──► post-call hooks
      ▲                                                                  │
      │    ok            -> report ok                                    │
      │    valid empty   -> accept_empty, report empty                   │
      ├─── transient     -> retry (back-off, reopen/respawn first) or give_up
      ├─── validation    -> repair the arguments, or escalate
      ├─── permission    -> elevate through the broker, or escalate
      │    business      -> escalate
      └──────────────────────────────────────────────────────────────────┘

Only three things send a call again: a transient failure (the identical call, after a back-off),
a repair (changed arguments), an elevation (a new credential). Nothing above or below retries.

``settle`` is the part under any decision-maker: it makes one call until it settles (hooks, deadline,
breaker, transient retries, elevation). ``recover`` decides on what settled, in code. In Claude mode
``subagents.tool_loop`` lets a model decide instead, on top of the same ``settle``.
"""

from __future__ import annotations

import json
import random
import time
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any, Literal, Protocol

import anyio
from opentelemetry.trace import INVALID_SPAN, Span
from pydantic import BaseModel, ConfigDict

from sources.contract import (
    AttemptedQuery,
    Decision,
    DecisionAction,
    EmptyResult,
    ErrorCategory,
    Escalation,
    ResultPage,
    ToolError,
)
from subagents.breaker import Breaker, Breakers, BreakerState
from subagents.broker import CredentialBroker
from subagents.classify import Outcome, classify_exception, classify_result, with_attempted_query
from subagents.connection import Connections
from subagents.hooks import PostCallHook, PreCallHook, RefundLimit, ToolCall, TrimResults
from subagents.policy import Recovery, RecoveryPolicy
from subagents.repair import repair
from traces.client_status import collect_client_spans
from traces.spans import end_subagent, record_decision, subagent_span

__all__ = [
    "ACCEPT_EMPTY",
    "DEADLINE_GRACE_S",
    "Clock",
    "ModelDriver",
    "MonotonicClock",
    "Observer",
    "Run",
    "Runtime",
    "Settled",
    "SilentObserver",
    "SubagentReport",
    "Task",
    "add_new",
    "describe_changes",
    "recover",
    "run_subagent",
    "settle",
]

ACCEPT_EMPTY = "the query ran and matched nothing: a valid empty result, not retried"

# Every wait of a subagent (opening a session, a call, a back-off) is bounded by the time its deadline
# leaves, so it reports by the deadline. Should anything still run this long after it, the subagent
# is cut short: it reports what it did so far (the backstop, not the way a deadline normally ends).
DEADLINE_GRACE_S = 0.25
# A call that ended this close to the deadline was cut by the deadline (its timeout was clipped to it).
_AT_DEADLINE_S = 0.05


class Clock(Protocol):
    """Time as the subagents see it: injected, so tests of back-off are exact and instant."""

    def now(self) -> float: ...

    async def sleep(self, seconds: float) -> None: ...


class MonotonicClock:
    def now(self) -> float:
        return time.monotonic()

    async def sleep(self, seconds: float) -> None:
        await anyio.sleep(seconds)


class Observer(Protocol):
    """Told of each attempt and decision as it happens (live progress, traces)."""

    def attempt(self, task: Task, attempt: int, arguments: dict[str, Any]) -> None: ...

    def decided(self, task: Task, decision: Decision) -> None: ...

    def ended(self, task_id: str, state: str, attempts: int, decisions: Sequence[Decision]) -> None:
        """A task reached its terminal state (the coordinator tells this, blocked tasks included)."""


class SilentObserver:
    def attempt(self, task: Task, attempt: int, arguments: dict[str, Any]) -> None:
        pass

    def decided(self, task: Task, decision: Decision) -> None:
        pass

    def ended(self, task_id: str, state: str, attempts: int, decisions: Sequence[Decision]) -> None:
        pass


@dataclass(frozen=True)
class Task:
    id: str
    source: str
    tool: str
    arguments: dict[str, Any]
    purpose: str = "research"


class SubagentReport(BaseModel):
    """What a subagent hands its coordinator."""

    model_config = ConfigDict(frozen=True)

    task: str
    source: str
    tool: str
    state: Literal["ok", "empty", "escalated"]
    results: list[Any] = []
    truncated: bool = False
    message: str | None = None
    attempts: int
    decisions: list[Decision]
    attempted_query: AttemptedQuery
    escalation: Escalation | None = None
    # Escalated on a permission error: the scope the source said would allow the call (the way out).
    required_scope: str | None = None
    out_of_time: bool = False  # escalated because the deadline came, not because recovery ran out
    # Claude mode: records of the source's other tools the model called, by tool, and what the model cost.
    other_results: dict[str, list[Any]] = {}
    turns: int = 0
    input_tokens: int = 0
    output_tokens: int = 0


class ModelDriver(Protocol):
    """Drives a subagent's run with a model choosing the calls (Claude mode); ``settle`` stays under it."""

    async def drive(self, run: Run) -> SubagentReport: ...


@dataclass
class Runtime:
    """What the subagents of one coordinator process share."""

    connections: Connections
    broker: CredentialBroker
    policy: RecoveryPolicy = field(default_factory=RecoveryPolicy)
    breakers: Breakers = field(default_factory=Breakers)
    pre_call: Sequence[PreCallHook] = (RefundLimit(),)
    post_call: Sequence[PostCallHook] = (TrimResults(),)
    clock: Clock = field(default_factory=MonotonicClock)
    rng: random.Random = field(default_factory=random.Random)
    observer: Observer = field(default_factory=SilentObserver)
    model: ModelDriver | None = None  # None: the code decides every step (the deterministic mode)


@dataclass
class Run:
    """The state of one subagent's run. ``tool`` and ``arguments`` are the current call's."""

    task: Task
    runtime: Runtime
    deadline: float
    tool: str
    arguments: dict[str, Any]
    meta: dict[str, Any] | None
    held_scopes: set[str] = field(default_factory=set)
    attempts: int = 0
    retries: int = 0
    repairs: int = 0
    elevations: int = 0
    decisions: list[Decision] = field(default_factory=list)
    partial_results: list[Any] = field(default_factory=list)
    out_of_time: bool = False
    span: Span = INVALID_SPAN
    other_results: dict[str, list[Any]] = field(default_factory=dict)
    turns: int = 0
    input_tokens: int = 0
    output_tokens: int = 0

    def decide(
        self,
        action: DecisionAction,
        reason: str,
        category: ErrorCategory | None = None,
        backoff_ms: int = 0,
        error_type: str = "",
    ) -> None:
        decision = Decision(
            action=action,
            category=category,
            attempt=max(self.attempts, 1),
            backoff_ms=backoff_ms,
            reason=reason,
        )
        self.decisions.append(decision)
        record_decision(
            self.span,
            action=action,
            category=category.value if category else None,
            attempt=decision.attempt,
            backoff_ms=backoff_ms,
            reason=reason,
            error_type=error_type,
        )
        self.runtime.observer.decided(self.task, decision)

    def step(self, action: DecisionAction, reason: str, outcome: Outcome, backoff_ms: int = 0) -> None:
        """A decision about a failed call, after which the subagent calls again."""
        category = outcome.error.error_category if outcome.error else None
        self.decide(action, reason, category, backoff_ms=backoff_ms, error_type=outcome.error_type)

    def stop(self, action: DecisionAction, reason: str, outcome: Outcome) -> SubagentReport:
        """A decision after which the subagent stops, and its report."""
        self.step(action, reason, outcome)
        return self.report(outcome)

    def query(self) -> AttemptedQuery:
        return AttemptedQuery(tool=self.tool, arguments=dict(self.arguments))

    def out_of_time_stop(self, reason: str, outcome: Outcome | None = None) -> SubagentReport:
        """Give up because the deadline came: what the run sent, did and kept so far is reported."""
        self.out_of_time = True
        return self.stop("give_up", reason, outcome or _deadline_outcome(self))

    def cut_short(self) -> SubagentReport:
        """The report of a run stopped from outside mid-step (the backstop after the deadline)."""
        return self.out_of_time_stop(f"the deadline passed while {self.task.source} was still working")

    def keep_partial(self, error: ToolError) -> None:
        add_new(self.partial_results, error.partial_results or [])

    def report(self, outcome: Outcome) -> SubagentReport:
        result = outcome.result
        common = {
            "task": self.task.id, "source": self.task.source, "tool": self.task.tool,
            "attempts": self.attempts, "decisions": self.decisions, "attempted_query": self.query(),
            "out_of_time": self.out_of_time, "other_results": self.other_results, "turns": self.turns,
            "input_tokens": self.input_tokens, "output_tokens": self.output_tokens,
        }  # fmt: skip
        if isinstance(result, ResultPage):
            return SubagentReport(state="ok", results=result.results, truncated=result.truncated, **common)
        if isinstance(result, EmptyResult):
            return SubagentReport(state="empty", message=result.message, **common)
        escalation = Escalation(
            error_category=result.error_category,
            is_retryable=result.is_retryable,
            message=result.description,
            attempted_query=result.attempted_query or self.query(),
            partial_results=self.partial_results,
            source=self.task.source,
            attempts=self.attempts,
            decisions=self.decisions,
        )
        return SubagentReport(
            state="escalated", message=result.description, escalation=escalation,
            required_scope=result.required_scope if result.error_category == ErrorCategory.PERMISSION else None,
            **common,
        )  # fmt: skip


async def run_subagent(task: Task, runtime: Runtime, deadline: float) -> SubagentReport:
    """Carry one task to a report by ``deadline`` (on ``runtime.clock``), recovering what can be recovered."""
    run = Run(task, runtime, deadline, task.tool, dict(task.arguments), runtime.broker.base_meta(task.source))
    with subagent_span(task.id, task.source, task.tool, task.arguments) as span:
        run.span = span
        report: SubagentReport | None = None
        with anyio.move_on_after(max(deadline - runtime.clock.now(), 0.0) + DEADLINE_GRACE_S):
            report = await (runtime.model.drive(run) if runtime.model is not None else recover(run))
        if report is None:  # the backstop fired: this scope's own cancellation, caught by it
            report = run.cut_short()
        category = report.escalation.error_category.value if report.escalation else None
        end_subagent(
            span,
            state=report.state,
            attempts=report.attempts,
            category=category,
            message=report.message or "",
            input_tokens=report.input_tokens,
            output_tokens=report.output_tokens,
        )
    return report


def add_new(into: list[Any], records: list[Any]) -> None:
    """Append the records ``into`` does not hold yet (by value): what a subagent keeps is never doubled."""
    seen = {json.dumps(item, sort_keys=True, default=str) for item in into}
    for record in records:
        if json.dumps(record, sort_keys=True, default=str) not in seen:
            into.append(record)


@dataclass(frozen=True)
class Settled:
    """A call that settled: its outcome, and why it ended there (the reason of the decision taken on it)."""

    outcome: Outcome
    reason: str


async def recover(run: Run) -> SubagentReport:
    """The code decides: a result is reported, a validation error repaired, anything else escalated."""
    while True:
        settled = await settle(run)
        if isinstance(settled, SubagentReport):
            return settled
        outcome, error = settled.outcome, settled.outcome.error
        if error is None:
            if outcome.kind == "empty":
                run.decide("accept_empty", ACCEPT_EMPTY)
            return run.report(outcome)
        if outcome.error_type == "hook_blocked":
            return run.stop("hook_blocked", settled.reason, outcome)
        if run.runtime.policy.action_for(error.error_category) is not Recovery.REPAIR:
            return run.stop("escalate", settled.reason, outcome)
        stopped = _repair(run, outcome, error)
        if stopped is not None:
            return stopped


async def settle(run: Run) -> SubagentReport | Settled:
    """Make the current call until it settles; transient faults are retried and permission elevated here.

    Returns what the decision-maker (``recover``, or a model) must act on: a result, or an error that
    was blocked by a hook, or is validation, business, or permission the broker would not grant. Or
    the final report, when the code itself had to stop (deadline, open breaker, retries spent).
    """
    task, runtime = run.task, run.runtime
    breaker = runtime.breakers[task.source]
    while True:
        call = ToolCall(task.source, run.tool, dict(run.arguments), run.attempts + 1, task.id)
        blocked = next((error for hook in runtime.pre_call if (error := hook(call)) is not None), None)
        if blocked is not None:
            return Settled(Outcome("error", blocked, "hook_blocked"), blocked.description)
        remaining = run.deadline - runtime.clock.now()
        if remaining <= 0:
            return run.out_of_time_stop("the deadline passed before the call could be made")
        if not breaker.allow(runtime.clock.now()):
            return run.report(_breaker_open(run, breaker))

        try:
            outcome = await _call(run, call, remaining)
        except BaseException:  # cancelled mid-call (the deadline, a stopped model): re-raised at once
            breaker.abandon()
            raise
        if outcome.error_type == "deadline":  # the call's time was clipped to the deadline, and it ran out
            breaker.abandon()  # says nothing of the source's health
            return run.out_of_time_stop(f"the deadline passed before {task.source} answered", outcome)
        error = outcome.error
        breaker.record(
            source_failed=error is not None and error.error_category is ErrorCategory.TRANSIENT,
            now=runtime.clock.now(),
        )
        if error is None:
            return Settled(outcome, "")
        run.keep_partial(error)
        match runtime.policy.action_for(error.error_category):
            case Recovery.RETRY:
                stopped = await _retry(run, outcome, error, breaker)
                if stopped is not None:
                    return stopped
            case Recovery.ELEVATE:
                refusal = _elevate(run, outcome, error)
                if refusal is not None:
                    return Settled(outcome, refusal)
            case _:
                return Settled(outcome, error.description)


async def _call(run: Run, call: ToolCall, remaining: float) -> Outcome:
    """One attempt: the call, its outcome in the contract, the post-call hooks; a dead session dropped."""
    task, runtime = run.task, run.runtime
    connection = runtime.connections[task.source]
    run.attempts += 1
    runtime.observer.attempt(task, run.attempts, run.arguments)
    generation = None
    with collect_client_spans() as client_spans:
        try:
            client, generation = await connection.session(timeout_s=remaining)  # spawning counts too
            left = run.deadline - runtime.clock.now()
            timeout_s = min(runtime.policy.call_timeout_s, left)
            result = await connection.call(
                client, run.tool, run.arguments, timeout_s=timeout_s, meta=run.meta
            )
            outcome = classify_result(result)
        except Exception as exc:  # a boundary: every failure of the call becomes a contract outcome
            outcome = classify_exception(exc)
            transient = outcome.error is not None and outcome.error.error_category is ErrorCategory.TRANSIENT
            if transient and run.deadline - runtime.clock.now() <= _AT_DEADLINE_S:  # the deadline cut it
                outcome = Outcome("error", _deadline_outcome(run).result, "deadline", outcome.reopen)
        if outcome.error is not None:  # the SDK leaves its client span's status unset here: set it
            client_spans.failed(outcome.error_type or "tool_error", outcome.error.description)
    outcome = with_attempted_query(outcome, run.query())
    for hook in runtime.post_call:
        outcome = hook(call, outcome)
    if outcome.reopen and generation is not None:
        await connection.reopen(generation)
    return outcome


async def _retry(run: Run, outcome: Outcome, error: ToolError, breaker: Breaker) -> SubagentReport | None:
    policy, runtime = run.runtime.policy, run.runtime
    if breaker.state is BreakerState.OPEN:  # this failure opened it: no point waiting to retry
        return run.report(_breaker_open(run, breaker))
    if run.retries >= policy.max_retries:
        return run.stop("give_up", f"{run.retries} retries spent: {error.description}", outcome)
    delay = policy.backoff_s(run.retries + 1, runtime.rng, error.retry_after_ms)
    if runtime.clock.now() + delay >= run.deadline:
        return run.out_of_time_stop(
            f"a back-off of {delay:.2f} s would pass the deadline: {error.description}", outcome
        )
    run.retries += 1
    cause = outcome.error_type if outcome.error_type not in ("", "tool_error") else "a transient error"
    hint = f", honouring retryAfterMs {error.retry_after_ms}" if error.retry_after_ms else ""
    reason = f"retry {run.retries}/{policy.max_retries} after {cause}{hint}: {error.description}"
    run.step("retry", reason, outcome, backoff_ms=round(delay * 1000))
    await runtime.clock.sleep(delay)
    return None


def _repair(run: Run, outcome: Outcome, error: ToolError) -> SubagentReport | None:
    policy = run.runtime.policy
    if run.repairs >= policy.max_repairs:
        return run.stop("escalate", f"{run.repairs} repairs spent: {error.description}", outcome)
    repaired = repair(run.arguments)
    if repaired is None:
        return run.stop("escalate", f"no repair applies: {error.description}", outcome)
    changes = describe_changes(run.arguments, repaired)
    run.repairs += 1
    run.arguments = repaired
    run.step("repair", f"repair {run.repairs}/{policy.max_repairs}: {changes}", outcome)
    return None


def describe_changes(before: dict[str, Any], after: dict[str, Any]) -> str:
    """What a repair changed, argument by argument: ``sku "sku-1" -> "SKU-1"``."""
    names = [*after, *(name for name in before if name not in after)]
    changed = [
        f"{name} {json.dumps(before.get(name), default=str)} -> {json.dumps(after.get(name), default=str)}"
        for name in names
        if before.get(name) != after.get(name)
    ]
    return ", ".join(changed) or "no argument changed"


def _elevate(run: Run, outcome: Outcome, error: ToolError) -> str | None:
    """Ask the broker for the scope the error names: None when granted (call again), else why not."""
    if run.elevations >= run.runtime.policy.max_elevations:
        why = f"{run.elevations} elevation already used"
        return f"elevation refused ({why}): {error.description}"
    elevation = run.runtime.broker.elevate(
        error.required_scope, run.task.purpose, run.held_scopes, source=run.task.source
    )
    if not elevation.granted:
        return f"elevation refused ({elevation.reason}): {error.description}"
    run.elevations += 1
    run.held_scopes.add(error.required_scope or "")
    run.meta = elevation.meta()
    run.step("elevate", elevation.reason, outcome)
    return None


def _breaker_open(run: Run, breaker: Breaker) -> Outcome:
    wait_s = breaker.retry_in_s(run.runtime.clock.now())
    reason = f"the circuit for {run.task.source} is open; it probes again in {wait_s:.1f} s"
    run.decide("breaker_open", reason, ErrorCategory.TRANSIENT, error_type="breaker_open")
    return Outcome("error", ToolError.of(ErrorCategory.TRANSIENT, f"Not called: {reason}."), "breaker_open")


def _deadline_outcome(run: Run) -> Outcome:
    return Outcome(
        "error",
        ToolError.of(
            ErrorCategory.TRANSIENT, f"The deadline passed before {run.task.source} answered {run.tool}."
        ),
        "deadline",
    )
