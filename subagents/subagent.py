"""A subagent owns one task: one source, one tool, its arguments, a deadline.

This module acts; ``subagents.recovery`` decides. A ``Subagent`` feeds what happened to the machine
(``recovery.transition``) and carries out the step it returns: it runs the pre-call hooks, asks the
fleet (breaker, retry budget) and the broker, takes a bulkhead slot, calls the source, classifies the
outcome, runs the post-call hooks, sleeps the back-off on the injected clock, and puts each decision
the machine recorded on the trace and to the observer. It never changes the run's state itself.
``Subagent.recover`` carries a run the code decides; in Claude mode ``subagents.tool_loop`` feeds the
model's calls to the same machine (``Subagent.call``), so every bound is counted once.
"""

from __future__ import annotations

import os
import random
import time
from collections.abc import Callable, Sequence
from contextlib import AsyncExitStack
from dataclasses import dataclass, field, replace
from typing import Any, Protocol

import anyio
from opentelemetry.trace import Span

from sources.refund_rules import RefundLimit
from subagents import recovery
from subagents.broker import CredentialBroker
from subagents.classify import CONTRACT, Classifier, with_attempted_query
from subagents.decisions import Decision
from subagents.guard import Guard, LocalGuard
from subagents.hooks import PostCallHook, PreCallHook, ToolCall, TrimResults, approval_of
from subagents.policy import RecoveryPolicy
from subagents.recovery import RunState, SubagentReport, Task
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
    """Drives a subagent with a model choosing the calls (Claude mode) through ``Subagent.call``."""

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


async def run_subagent(task: Task, runtime: Runtime, deadline: float) -> SubagentReport:
    """Carry one task to a report by ``deadline`` (on ``runtime.clock``), recovering what can be recovered."""
    with subagent_span(task.id, task.source, task.tool, task.arguments, follows=task.follows) as span:
        driver = recovery.Driver.CODE if runtime.model is None else recovery.Driver.MODEL
        start = RunState.start(task, deadline, runtime.broker.base_meta(task.source), driver)
        agent = Subagent(runtime, start, span)
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
    """Carries out what ``subagents.recovery.transition`` decides for one task, and feeds back what happened.

    It never changes the run's state itself: ``state`` is whatever the machine last returned.
    """

    def __init__(self, runtime: Runtime, state: RunState, span: Span) -> None:
        self.runtime = runtime
        self.state = state
        self.span = span
        self.rng = runtime.rng if runtime.jitter is None else runtime.jitter(state.task.id)  # its back-offs
        self.sending = False  # a request is on its way to the source: cut now, a write's outcome is unknown

    @property
    def task(self) -> Task:
        return self.state.task

    def feed(self, event: recovery.Event) -> recovery.Step | None:
        """One transition; each decision it made goes on the trace and to the observer."""
        known = len(self.state.decisions)
        self.state, step = recovery.transition(self.runtime.policy, self.state, event, self.rng)
        for decision, cause in zip(self.state.decisions[known:], self.state.causes[known:], strict=True):
            record_decision(self.span, **decision.model_dump(mode="json"), error_type=cause)
            self.runtime.observer.decided(self.task, decision)
        return step

    def ended(self, event: recovery.Event) -> SubagentReport:
        """Feed an event that ends the run; its report."""
        step = self.feed(event)
        if not isinstance(step, recovery.Ended):  # the machine ends the run on each of these events
            raise recovery.UnexpectedEvent(f"{type(event).__name__} did not end task {self.task.id}")
        return recovery.report(self.state, step.outcome)

    def cut_short(self) -> SubagentReport:
        """The report of a run stopped from outside mid-step (the backstop after the deadline)."""
        return self.ended(recovery.CutShort(self.sending, self._resendable(unsent=False)))

    async def recover(self) -> SubagentReport:
        """The code decides: a result is reported, a validation error repaired, anything else escalated."""
        step = await self.carry(self.state.first_step())
        assert isinstance(step, recovery.Ended)  # the code decides every step: nothing is handed to a model
        return recovery.report(self.state, step.outcome)

    async def settle(self) -> recovery.ToModel | recovery.Ended:
        """Make the current call, as a model would ask for it, until it settles."""
        return await self.call(self.state.call.tool, self.state.call.arguments)

    async def call(self, tool: str, arguments: dict[str, Any]) -> recovery.ToModel | recovery.Ended:
        """The call a model asks for, carried until what settled is the model's to act on, or the run ended."""
        return await self.carry(self.feed(recovery.ModelCall(tool, arguments)))

    async def carry(self, step: recovery.Step | None) -> recovery.ToModel | recovery.Ended:
        """Carry out steps, feeding back what happened, until the model's turn or the run's end."""
        runtime, source, clock = self.runtime, self.task.source, self.runtime.clock
        while True:
            match step:
                case recovery.Check(call=call, wait_s=wait_s):
                    if wait_s:
                        await clock.sleep(wait_s)
                    step = self.feed(self._checked(call))
                case recovery.Admit(first=first):
                    verdict = await runtime.guard.allow(source, clock.now(), first=first)
                    step = self.feed(recovery.Admitted(clock.now(), verdict.allowed, verdict.retry_in_s))
                case recovery.Send(call=call):
                    step = self.feed(await self._guarded_call(call))
                case recovery.Tell(end=end, connection=lost):
                    after = await runtime.guard.record(source, end, clock.now(), lost)
                    told = recovery.Told(
                        clock.now(), not after.allowed, after.retry_in_s, after.limit, after.loss_counted
                    )
                    step = self.feed(told)
                case recovery.AskBudget():
                    step = self.feed(recovery.Budget(await runtime.guard.spend_retry(source, clock.now())))
                case recovery.AskElevation(scope=scope):
                    held = set(self.state.held_scopes)
                    elevation = runtime.broker.elevate(scope, self.task.purpose, held, source=source)
                    step = self.feed(
                        recovery.Elevation(elevation.granted, elevation.reason, elevation.meta())
                    )
                case recovery.ToModel() | recovery.Ended():
                    return step
                case None:
                    raise recovery.UnexpectedEvent(f"no step to carry out for task {self.task.id}")

    def _checked(self, call: recovery.Call) -> recovery.Checked:
        """What the pre-call hooks and, for a write, the approvals say of ``call``."""
        runtime, tool_call = self.runtime, self._tool_call(call, self.state.attempts + 1)
        blocked = next((error for hook in runtime.pre_call if (error := hook(tool_call)) is not None), None)
        approval = approval_of(tool_call, runtime.approvals) if self._effects().writes else None
        return recovery.Checked(runtime.clock.now(), blocked, approval)

    def _effects(self) -> ToolEffects:
        return self.runtime.effects.of(self.task.source, self.state.call.tool)

    def _resendable(self, unsent: bool) -> bool:
        return recovery.resendable(self._effects(), self.state.call, unsent)

    def _tool_call(self, call: recovery.Call, attempt: int) -> ToolCall:
        return ToolCall(self.task.source, call.tool, dict(call.arguments), attempt, self.task.id)

    async def _guarded_call(self, call: recovery.Call) -> recovery.Answered:
        try:
            return await self._call(call)
        except BaseException:  # cancelled mid-call (the deadline, a stopped model): re-raised at once
            self.runtime.guard.abandon(self.task.source)
            raise

    async def _call(self, call: recovery.Call) -> recovery.Answered:
        """One attempt: the call, its outcome in the contract, the post-call hooks; a dead session dropped."""
        runtime, source = self.runtime, self.task.source
        connection = runtime.connections[source]
        tool_call = self._tool_call(call, self.state.attempts)  # the machine counted this attempt
        runtime.observer.attempt(self.task, self.state.attempts, dict(call.arguments))
        deadline, generation, client = self.state.deadline, None, None
        with collect_client_spans() as client_spans:
            try:
                client, generation = await connection.session(
                    timeout_s=deadline - runtime.clock.now(), for_call=tool_call
                )
                async with AsyncExitStack() as held:
                    with anyio.fail_after(max(deadline - runtime.clock.now(), 0.0)):  # the wait counts too
                        await held.enter_async_context(runtime.guard.slot(source))  # the bulkhead
                    timeout_s = min(runtime.policy.call_timeout_for(source), deadline - runtime.clock.now())
                    self.sending = True
                    result = await connection.send(client, tool_call, timeout_s=timeout_s, meta=call.meta)
                    self.sending = False
                outcome = replace(runtime.classifier.result(result, source=source), answered=True)
            except Exception as exc:  # a boundary: every failure of the call becomes a contract outcome
                outcome = runtime.classifier.exception(exc, source=source)
                if not self.sending:  # it failed before the request was sent: nothing can have acted
                    outcome = replace(outcome, unsent=True)
                self.sending = False
            if outcome.error is not None:  # the SDK leaves its client span's status unset here: set it
                client_spans.failed(outcome.error_type or "tool_error", outcome.error.description)
        outcome = with_attempted_query(outcome, call.query())
        for hook in runtime.post_call:
            outcome = hook(tool_call, outcome)
        if outcome.reopen and generation is not None:
            await connection.reopen(generation)
        # The session by identity (this process, its client for the session): every call in flight on
        # one that is lost is told with the same one, and the fleet counts its loss once.
        session = None if client is None else f"{os.getpid()}:{id(client)}:{generation}"
        return recovery.Answered(outcome, runtime.clock.now(), self._resendable(outcome.unsent), session)
