"""A subagent owns one task: one source, one tool, its arguments, a deadline.

It calls, classifies the outcome, lets the policy decide, acts, and reports. Every step it takes is
a ``Decision`` in its report, in order:

    call ──► pre-call hooks ──► breaker ──► bulkhead ──► source ──► classify ──► post-call hooks
      ▲                                                                               │
      │    ok            -> report ok                                                 │
      │    valid empty   -> accept_empty, report empty                                │
      ├─── transient     -> retry (back-off, reopen/respawn first) or give_up
      │                     (retries spent, or the fleet's retry budget: ``subagents.guard``)
      ├─── validation    -> repair the arguments, or escalate
      ├─── permission    -> elevate through the broker, or escalate
      │    business      -> escalate
      └───────────────────────────────────────────────────────────────────────────────┘

Only three things send a call again: a transient failure (the identical call, after a back-off),
a repair (changed arguments), an elevation (a new credential). Nothing above or below retries.

This module acts; ``subagents.recovery`` decides. A ``Subagent`` holds its run's state (an immutable
``RunState``, replaced at each step), asks the machine for the next step and carries it out: it calls,
sleeps on the injected clock, asks the broker, records each decision on the trace and tells the
observer. ``Subagent.settle`` makes one call until it settles (hooks, deadline, breaker, transient
retries, elevation); ``Subagent.recover`` is the code deciding on what settled. In Claude mode
``subagents.tool_loop`` lets a model choose the calls instead, through the same ``settle`` and the
same machine, so every bound is counted once.
"""

from __future__ import annotations

import json
import random
import time
from collections.abc import Callable, Sequence
from contextlib import AsyncExitStack
from dataclasses import dataclass, field, replace
from typing import Any, Protocol

import anyio
from opentelemetry.trace import Span

from sources.contract import ErrorCategory, ToolError
from sources.refund_rules import RefundLimit
from subagents import recovery
from subagents.broker import CredentialBroker
from subagents.classify import CONTRACT, Classifier, Outcome, with_attempted_query
from subagents.decisions import Decision, DecisionAction
from subagents.guard import Guard, LocalGuard, Verdict
from subagents.hooks import PostCallHook, PreCallHook, ToolCall, TrimResults, approval_of
from subagents.policy import RecoveryPolicy
from subagents.recovery import ACCEPT_EMPTY, RunState, Stop, SubagentReport, Task
from subagents.transport import Transport
from subagents.writes import Approval, EffectsTable, ToolEffects
from traces.client_status import collect_client_spans
from traces.spans import end_subagent, record_decision, subagent_span

__all__ = [
    "DEADLINE_GRACE_S",
    "Clock",
    "ModelDriver",
    "MonotonicClock",
    "Observer",
    "Runtime",
    "Settled",
    "SilentObserver",
    "Subagent",
    "SubagentReport",
    "Task",
    "run_subagent",
]

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


class ModelDriver(Protocol):
    """Drives a subagent with a model choosing the calls (Claude mode); ``Subagent.settle`` stays under it."""

    async def drive(self, agent: Subagent) -> SubagentReport: ...


@dataclass
class Runtime:
    """What the subagents of one coordinator process share."""

    connections: Transport  # live sessions (subagents.sessions.connection), or a recording's answers
    broker: CredentialBroker
    policy: RecoveryPolicy = field(default_factory=RecoveryPolicy)
    # The fleet's rules for each source: breaker, retry budget, bulkhead (``subagents.guard``).
    guard: Guard = field(default_factory=LocalGuard)
    pre_call: Sequence[PreCallHook] = (RefundLimit(),)
    post_call: Sequence[PostCallHook] = (TrimResults(),)
    clock: Clock = field(default_factory=MonotonicClock)
    rng: random.Random = field(default_factory=random.Random)
    observer: Observer = field(default_factory=SilentObserver)
    model: ModelDriver | None = None  # None: the code decides every step (the deterministic mode)
    classifier: Classifier = CONTRACT  # what a call's outcome is taken to be (see classify.Classifier)
    # Each task's back-off jitter, when it must not depend on how concurrent tasks interleave (a
    # replay draws each task's recorded jitter); None: every task draws from ``rng``.
    jitter: Callable[[str], random.Random] | None = None
    # What each tool says it does (reads, idempotent): what may be resent, and what is a write.
    effects: EffectsTable = field(default_factory=EffectsTable.demo)
    # A person's yes to writes, given before the run (``--approve``, a prompt): none, no write is sent.
    approvals: Sequence[Approval] = ()


@dataclass(frozen=True)
class Settled:
    """A call that settled: its outcome, why it ended there, and whether the code stopped the run on it.

    ``stopped``: the code had to end the run here (deadline, open breaker, retries spent); its decision
    is recorded and nothing more may be called. Otherwise the decision-maker acts on the outcome.
    """

    outcome: Outcome
    reason: str
    stopped: bool = False


async def run_subagent(task: Task, runtime: Runtime, deadline: float) -> SubagentReport:
    """Carry one task to a report by ``deadline`` (on ``runtime.clock``), recovering what can be recovered."""
    with subagent_span(task.id, task.source, task.tool, task.arguments) as span:
        agent = Subagent(runtime, RunState.start(task, deadline, runtime.broker.base_meta(task.source)), span)
        report: SubagentReport | None = None
        with anyio.move_on_after(max(deadline - runtime.clock.now(), 0.0) + DEADLINE_GRACE_S):
            report = await (runtime.model.drive(agent) if runtime.model is not None else agent.recover())
        if report is None:  # the backstop fired: this scope's own cancellation, caught by it
            report = agent.cut_short()
        category = report.escalation.error_category.value if report.escalation else None
        end_subagent(
            span,
            state=report.state,
            attempts=report.attempts,
            category=category,
            message=report.message or "",
        )
    return report


class Subagent:
    """Acts for one task on what ``subagents.recovery`` decides; ``state`` is replaced at every step."""

    def __init__(self, runtime: Runtime, state: RunState, span: Span) -> None:
        self.runtime = runtime
        self.state = state
        self.span = span
        self.rng = runtime.rng if runtime.jitter is None else runtime.jitter(state.task.id)  # its back-offs
        self.sending = False  # a request is on its way to the source: cut now, a write's outcome is unknown

    @property
    def task(self) -> Task:
        return self.state.task

    def decide(
        self,
        action: DecisionAction,
        reason: str,
        category: ErrorCategory | None = None,
        backoff_ms: int = 0,
        error_type: str = "",
    ) -> None:
        """Record a decision: in the run's state, on the trace, and to the observer."""
        decision = Decision(
            action=action,
            category=category,
            attempt=max(self.state.attempts, 1),
            backoff_ms=backoff_ms,
            reason=reason,
        )
        self.state = self.state.decided(decision)
        record_decision(self.span, **decision.model_dump(mode="json"), error_type=error_type)
        self.runtime.observer.decided(self.task, decision)

    def step(self, action: DecisionAction, reason: str, outcome: Outcome, backoff_ms: int = 0) -> None:
        """Record a decision about ``outcome``, a failed call."""
        category = outcome.error.error_category if outcome.error else None
        self.decide(action, reason, category, backoff_ms=backoff_ms, error_type=outcome.error_type)

    def stop(self, stop: Stop, outcome: Outcome) -> SubagentReport:
        """Carry out a ``Stop``: its decision, then the report."""
        self._stopped(stop, outcome)  # records the decision: the state reported is the one after it
        return recovery.report(self.state, outcome)

    def repair(self, step: recovery.Repair, outcome: Outcome | None) -> None:
        """Carry out a ``Repair``: the next call has the new arguments (``outcome``: the code's repair
        of a failed call; None: the model's, whose corrected call is the one about to be made)."""
        self.state = self.state.repaired(step.arguments)
        if outcome is None:
            self.decide("repair", step.reason, ErrorCategory.VALIDATION)
        else:
            self.step("repair", step.reason, outcome)

    def cut_short(self) -> SubagentReport:
        """The report of a run stopped from outside mid-step (the backstop after the deadline)."""
        outcome = self._deadline_outcome()
        if self.sending and not self._resendable(outcome):  # a write cut mid-way may have acted
            return self.stop(replace(self._interrupted(outcome), out_of_time=True), outcome)
        why = f"the deadline passed while {self.task.source} was still working"
        return self.stop(Stop("give_up", why, out_of_time=True), outcome)

    async def recover(self) -> SubagentReport:
        """The code decides: a result is reported, a validation error repaired, anything else escalated."""
        while True:
            settled = await self.settle()
            if settled.stopped:
                return recovery.report(self.state, settled.outcome)
            step = recovery.on_settled(self.runtime.policy, self.state, settled.outcome, settled.reason)
            if isinstance(step, recovery.Finish):
                if step.accept_empty:
                    self.decide("accept_empty", ACCEPT_EMPTY)
                return recovery.report(self.state, settled.outcome)
            if isinstance(step, Stop):
                return self.stop(step, settled.outcome)
            self.repair(step, settled.outcome)

    async def settle(self) -> Settled:
        """Make the current call until it settles; transient faults are retried and permission elevated here.

        Returns what the decision-maker (``recover``, or a model) must act on: a result, or an error that
        was blocked by a hook, or is validation, business, or permission the broker would not grant. Or
        the outcome the code itself stopped on (deadline, open breaker, retries spent).
        """
        guard, source = self.runtime.guard, self.task.source
        while True:
            early = await self._before_call()
            if early is not None:
                return early
            outcome = await self._guarded_call()
            if (
                outcome.error_type == "deadline"
            ):  # the call's time was clipped to the deadline, and it ran out
                if not self._resendable(outcome):  # a write cut mid-way may have acted
                    return self._stopped(self._interrupted(outcome), outcome)
                return self._stopped(
                    Stop("give_up", f"the deadline passed before {self.task.source} answered", True), outcome
                )
            error = outcome.error
            failed = error is not None and error.error_category is ErrorCategory.TRANSIENT
            after = await guard.record(source, failed, self.runtime.clock.now())
            if error is None:
                return Settled(outcome, "")
            self.state = self.state.keeping(error.partial_results or [])
            settled = await self._after_failure(outcome, error, after)
            if settled is not None:
                return settled

    async def _before_call(self) -> Settled | None:
        """What stops a call before it is sent: a pre-call hook, the deadline, an open breaker."""
        runtime, call = self.runtime, self._tool_call()
        blocked = next((error for hook in runtime.pre_call if (error := hook(call)) is not None), None)
        if blocked is not None:
            return Settled(Outcome("error", blocked, "hook_blocked"), blocked.description)
        if self._effects().writes:
            refused = self._approval(call)
            if refused is not None:
                return Settled(Outcome("error", refused, "not_approved"), refused.description)
        if self.state.deadline - runtime.clock.now() <= 0:
            why = "the deadline passed before the call could be made"
            return self._stopped(Stop("give_up", why, out_of_time=True), self._deadline_outcome())
        verdict = await runtime.guard.allow(
            self.task.source, runtime.clock.now(), first=self.state.attempts == 0
        )
        if not verdict.allowed:
            return Settled(self._breaker_open(verdict), "", stopped=True)
        return None

    async def _after_failure(self, outcome: Outcome, error: ToolError, after: Verdict) -> Settled | None:
        """Carry out what the machine says of a failed call (``after``: the source's breaker after it);
        None: call again."""
        runtime = self.runtime
        failed = recovery.Failed(
            error, outcome.error_type, runtime.clock.now(), not after.allowed, self._resendable(outcome)
        )
        step = recovery.after_failure(runtime.policy, self.state, failed, self.rng)
        if isinstance(step, recovery.Retry) and not await runtime.guard.spend_retry(
            self.task.source, runtime.clock.now()
        ):
            step = recovery.retry_budget_spent(self.task.source, error)
        match step:
            case recovery.Retry(delay_s=delay, reason=reason):
                self.state = self.state.retried()
                self.step("retry", reason, outcome, backoff_ms=round(delay * 1000))
                await runtime.clock.sleep(delay)
                return None
            case recovery.Elevate(scope=scope):
                refusal = self._elevate(scope, outcome, error)
                return None if refusal is None else Settled(outcome, refusal)
            case recovery.NotCalled():
                return Settled(self._breaker_open(after), "", stopped=True)
            case Stop():
                return self._stopped(step, outcome)
            case recovery.HandOver(reason=reason):
                return Settled(outcome, reason)

    def _stopped(self, stop: Stop, outcome: Outcome) -> Settled:
        """Record a ``Stop``'s decision: the run ends on ``outcome`` (or on the error the stop reports)."""
        if stop.out_of_time:
            self.state = self.state.timed_out()
        self.step(stop.action, stop.reason, outcome)
        if stop.error is not None:
            outcome = replace(outcome, result=stop.error)
        return Settled(outcome, stop.reason, stopped=True)

    def _effects(self) -> ToolEffects:
        return self.runtime.effects.of(self.task.source, self.state.call.tool)

    def _resendable(self, outcome: Outcome) -> bool:
        return recovery.resendable(self._effects(), self.state.call, outcome.unsent)

    def _interrupted(self, outcome: Outcome) -> Stop:
        error = outcome.error
        return recovery.write_interrupted(
            self.state, outcome.error_type, error.description if error is not None else "no answer"
        )

    def _approval(self, call: ToolCall) -> ToolError | None:
        """A write is sent only with a person's yes: its ``approved`` decision is recorded, else the
        call is not sent and says how to approve it."""
        given = approval_of(call, self.runtime.approvals)
        if isinstance(given, ToolError):
            return given
        arguments = json.dumps(dict(call.arguments), sort_keys=True, default=str)
        said = f"approved by {given.by} ({given}): {call.source} {call.tool}({arguments})"
        if not any(d.action == "approved" and d.reason == said for d in self.state.decisions):  # once a call
            self.decide("approved", said)
        return None

    def _tool_call(self) -> ToolCall:
        call, task = self.state.call, self.task
        return ToolCall(task.source, call.tool, dict(call.arguments), self.state.attempts + 1, task.id)

    async def _guarded_call(self) -> Outcome:
        guard, source = self.runtime.guard, self.task.source
        try:
            outcome = await self._call(self._tool_call())
        except BaseException:  # cancelled mid-call (the deadline, a stopped model): re-raised at once
            guard.abandon(source)
            raise
        if outcome.error_type == "deadline":
            guard.abandon(source)  # says nothing of the source's health
        return outcome

    async def _call(self, call: ToolCall) -> Outcome:
        """One attempt: the call, its outcome in the contract, the post-call hooks; a dead session dropped."""
        runtime = self.runtime
        connection = runtime.connections[self.task.source]
        self.state = self.state.attempted()
        runtime.observer.attempt(self.task, self.state.attempts, dict(self.state.call.arguments))
        deadline, sent = self.state.deadline, self.state.call
        generation = None
        with collect_client_spans() as client_spans:
            try:
                client, generation = await connection.session(
                    timeout_s=deadline - runtime.clock.now(), for_call=call
                )
                async with AsyncExitStack() as held:
                    with anyio.fail_after(max(deadline - runtime.clock.now(), 0.0)):  # the wait counts too
                        await held.enter_async_context(runtime.guard.slot(self.task.source))  # the bulkhead
                    timeout_s = min(
                        runtime.policy.call_timeout_for(self.task.source), deadline - runtime.clock.now()
                    )
                    self.sending = True
                    result = await connection.send(client, call, timeout_s=timeout_s, meta=sent.meta)
                    self.sending = False
                outcome = runtime.classifier.result(result, source=self.task.source)
            except Exception as exc:  # a boundary: every failure of the call becomes a contract outcome
                outcome = runtime.classifier.exception(exc, source=self.task.source)
                if not self.sending:  # it failed before the request was sent: nothing can have acted
                    outcome = replace(outcome, unsent=True)
                self.sending = False
                outcome = self._cut_by_deadline(outcome)
            if outcome.error is not None:  # the SDK leaves its client span's status unset here: set it
                client_spans.failed(outcome.error_type or "tool_error", outcome.error.description)
        outcome = with_attempted_query(outcome, sent.query())
        for hook in runtime.post_call:
            outcome = hook(call, outcome)
        if outcome.reopen and generation is not None:
            await connection.reopen(generation)
        return outcome

    def _cut_by_deadline(self, outcome: Outcome) -> Outcome:
        """A transient failure at the deadline is the deadline's doing (the call's timeout was clipped to it)."""
        transient = outcome.error is not None and outcome.error.error_category is ErrorCategory.TRANSIENT
        if transient and self.state.deadline - self.runtime.clock.now() <= _AT_DEADLINE_S:
            return replace(outcome, result=self._deadline_outcome().result, error_type="deadline")
        return outcome

    def _elevate(self, scope: str | None, outcome: Outcome, error: ToolError) -> str | None:
        """Ask the broker for the scope the error names: None when granted (call again), else why not."""
        elevation = self.runtime.broker.elevate(
            scope, self.task.purpose, set(self.state.held_scopes), source=self.task.source
        )
        if not elevation.granted:
            return f"elevation refused ({elevation.reason}): {error.description}"
        self.state = self.state.elevated(scope or "", elevation.meta())
        self.step("elevate", elevation.reason, outcome)
        return None

    def _breaker_open(self, verdict: Verdict) -> Outcome:
        reason = f"the circuit for {self.task.source} is open; it probes again in {verdict.retry_in_s:.1f} s"
        self.decide("breaker_open", reason, ErrorCategory.TRANSIENT, error_type="breaker_open")
        return Outcome(
            "error", ToolError.of(ErrorCategory.TRANSIENT, f"Not called: {reason}."), "breaker_open"
        )

    def _deadline_outcome(self) -> Outcome:
        answered = f"The deadline passed before {self.task.source} answered {self.state.call.tool}."
        return Outcome("error", ToolError.of(ErrorCategory.TRANSIENT, answered), "deadline")
