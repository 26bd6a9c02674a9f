"""A subagent's recovery as one state machine: ``transition(policy, state, event) -> (state, step)``.

The run's state (``RunState``) is a frozen value: the task, the call, every counter, every decision, and
the ``Phase`` the run is in. ``transition`` is the only thing that makes a new one. A driver carries out
the step it returns (check, ask the fleet, send, sleep, ask the broker) and feeds back what happened as
the next event; it never changes the state itself. Time, the fleet's answers and the broker's are
inputs, so every bound is checked here and nowhere else:

    phase       event                 what the machine does
    CHECKING    Checked               a hook's or the approvals' refusal, the deadline -> Ended | Admit
    ADMITTING   Admitted              the breaker open -> Ended; else the attempt is counted -> Send
    SENDING     Answered              the call's outcome, at the deadline or not -> Tell
    TELLING     Told                  a result, or a failure: retry (-> AskBudget), elevate (-> AskElevation),
                                      a write not resent (-> Ended), or the decision-maker's turn
    BUDGETING   Budget                the fleet's retry budget grants the retry (-> Check after the back-off)
                                      or refuses it (-> Ended)
    ELEVATING   Elevation             a granted scope (-> Check again) or a refusal (the decision-maker's turn)
    WITH_MODEL  ModelCall             a call the model asks for: refused, or a repair counted -> Check
                ModelRefused, ModelStopped, Unresolved, TakeOver (the code takes the task back)
    any         CutShort              the backstop stopped the run from outside -> Ended

The decision-maker is the code (``Driver.CODE``: a validation error repaired, anything else escalated)
or a model (``Driver.MODEL``: what settled is handed to it, ``ToModel``). Only three things send a call
again: a retry (the identical call, after a back-off), a repair (changed arguments), an elevation (a
new credential). A retry is decided only for a call that is safe to resend (``resendable``); a write
interrupted after it may have acted ends the run with its outcome unknown, never a retry.
(After h11's ``_state.py``: events in, steps out, the driver owns time and I/O.)
"""

from __future__ import annotations

import json
import random
from dataclasses import dataclass, replace
from enum import Enum, StrEnum
from typing import Any

from sources.contract import AttemptedQuery, EmptyResult, ErrorCategory, ResultPage, ToolError
from subagents.classify import Outcome
from subagents.decisions import Decision, DecisionAction, Escalation, SubagentReport, TaskState
from subagents.guard import CallEnd
from subagents.policy import Recovery, RecoveryPolicy
from subagents.repair import repair
from subagents.task import Task
from subagents.writes import Approval, ToolEffects

__all__ = [
    "ACCEPT_EMPTY", "Admit", "Admitted", "Answered", "AskBudget", "AskElevation", "Budget", "Call",
    "Check", "Checked", "CutShort", "Driver", "Elevation", "Ended", "Event", "ModelCall", "ModelRefused",
    "ModelStop", "ModelStopped", "Phase", "RunState", "Send", "Step", "SubagentReport", "TakeOver", "Task",
    "Tell", "ToModel", "Told", "UnexpectedEvent", "Unresolved", "add_new", "is_pushback", "report", "resendable",
    "transition",
]  # fmt: skip

ACCEPT_EMPTY = "the query ran and matched nothing: a valid empty result, not retried"
# A call that failed this close to the deadline was cut by it (its timeout was clipped to the deadline).
AT_DEADLINE_S = 0.05


class Driver(Enum):
    """Who decides what settled: the code (deterministic mode) or a model (Claude mode)."""

    CODE = "code"
    MODEL = "model"


class Phase(StrEnum):
    """What the machine waits for: each phase takes the events the table above names, and no other."""

    CHECKING = "checking"
    ADMITTING = "admitting"
    SENDING = "sending"
    TELLING = "telling"
    BUDGETING = "budgeting"
    ELEVATING = "elevating"
    WITH_MODEL = "with_model"
    ENDED = "ended"


class ModelStop(StrEnum):
    """Why the code ended a model's loop."""

    DEADLINE = "deadline"
    TOKENS = "tokens"
    TURNS = "turns"
    API_FAILED = "api_failed"


@dataclass(frozen=True)
class Call:
    """The call a subagent makes next: a tool, its arguments and the credential it carries."""

    tool: str
    arguments: dict[str, Any]
    meta: dict[str, Any] | None = None

    def query(self) -> AttemptedQuery:
        return AttemptedQuery(tool=self.tool, arguments=dict(self.arguments))


@dataclass(frozen=True)
class RunState:
    """Where one subagent's run stands. Only ``transition`` makes a new one."""

    task: Task
    deadline: float  # on the subagents' clock
    call: Call
    driver: Driver = Driver.CODE
    phase: Phase = Phase.CHECKING
    attempts: int = 0
    retries: int = 0
    pushbacks: int = 0  # resent after the source's pushback: bounded by the deadline, not by retries
    repairs: int = 0
    elevations: int = 0
    held_scopes: frozenset[str] = frozenset()
    decisions: tuple[Decision, ...] = ()
    causes: tuple[str, ...] = ()  # each decision's error type, for the trace (one per decision)
    partial_results: tuple[Any, ...] = ()
    out_of_time: bool = False
    pending: Pending | None = None  # the call's outcome, while the fleet or the broker is asked about it
    failed_for_good: tuple[tuple[str, ToolError], ...] = ()  # (the call by value, its error): not resent
    repairing: str | None = None  # the tool whose validation error the model was handed to repair

    @classmethod
    def start(
        cls, task: Task, deadline: float, meta: dict[str, Any] | None, driver: Driver = Driver.CODE
    ) -> RunState:
        phase = Phase.CHECKING if driver is Driver.CODE else Phase.WITH_MODEL
        return cls(task, deadline, Call(task.tool, dict(task.arguments), meta), driver, phase)

    def calling(self, tool: str, arguments: dict[str, Any]) -> RunState:
        return replace(self, call=replace(self.call, tool=tool, arguments=dict(arguments)))

    def keeping(self, records: list[Any]) -> RunState:
        return replace(self, partial_results=tuple(add_new(list(self.partial_results), records)))

    def first_step(self) -> Check:
        """The step a code-driven run starts with."""
        return Check(self.call)


@dataclass(frozen=True)
class Pending:
    """A call's outcome the machine holds while it asks the fleet or the broker about it."""

    outcome: Outcome
    resendable: bool  # sending it again cannot repeat an effect
    at_deadline: bool = False  # the deadline cut it
    delay_s: float = 0.0  # the back-off of the retry the fleet is asked for


# --- events: what the driver saw -----------------------------------------------------------------


@dataclass(frozen=True)
class Checked:
    """The call about to be made, checked: ``blocked`` by a pre-call hook, and for a write its
    ``approval`` (the approval that covers it, or why there is none; None for a read)."""

    now: float
    blocked: ToolError | None = None
    approval: Approval | ToolError | None = None


@dataclass(frozen=True)
class Admitted:
    """The fleet's answer to "may this source be called now" (its breaker)."""

    now: float
    allowed: bool
    retry_in_s: float = 0.0


@dataclass(frozen=True)
class Answered:
    """What the call came back with; ``resendable``: sending it again cannot repeat an effect;
    ``connection``: the session it went over (one lost session is one failure, whatever it failed)."""

    outcome: Outcome
    now: float
    resendable: bool
    connection: str | None = None


@dataclass(frozen=True)
class Told:
    """The fleet was told how the call went; ``breaker_open``: it left the source's circuit open;
    ``limit``: the source's concurrency limit after it."""

    now: float
    breaker_open: bool = False
    retry_in_s: float = 0.0
    limit: int | None = None
    loss_counted: bool = False  # its session's loss was counted already: its retry spends no budget


@dataclass(frozen=True)
class Budget:
    """The fleet's retry budget for the source: the retry asked for is ``granted`` or not."""

    granted: bool


@dataclass(frozen=True)
class Elevation:
    """The broker's answer to the scope asked for: a credential (``meta``), or why not."""

    granted: bool
    reason: str
    meta: dict[str, Any] | None = None


@dataclass(frozen=True)
class CutShort:
    """The backstop stopped the run from outside mid-step; ``sending``: a request was on its way."""

    sending: bool
    resendable: bool


@dataclass(frozen=True)
class ModelCall:
    """The model asks for a call."""

    tool: str
    arguments: dict[str, Any]


@dataclass(frozen=True)
class ModelRefused:
    """The model asked for a tool its source does not have (the SDK never ran it)."""

    tool: str


@dataclass(frozen=True)
class ModelStopped:
    """The code ended the model's loop."""

    why: ModelStop
    reason: str
    category: ErrorCategory | None = None  # the model API's failure, as a category


@dataclass(frozen=True)
class Unresolved:
    """The model ended with an error on the task's call left unresolved."""

    outcome: Outcome


@dataclass(frozen=True)
class TakeOver:
    """The model cannot carry the task: the code makes the planned call."""

    why: str
    category: ErrorCategory | None = None


Event = (
    Checked | Admitted | Answered | Told | Budget | Elevation | CutShort
    | ModelCall | ModelRefused | ModelStopped | Unresolved | TakeOver
)  # fmt: skip


# --- steps: what the driver does next --------------------------------------------------------------


@dataclass(frozen=True)
class Check:
    """After ``wait_s`` (a back-off), run the pre-call hooks and the approvals on ``call``: ``Checked``."""

    call: Call
    wait_s: float = 0.0


@dataclass(frozen=True)
class Admit:
    """Ask the fleet whether the source may be called now (``first``: the task's first call): ``Admitted``."""

    first: bool


@dataclass(frozen=True)
class Send:
    """Make the call: ``Answered``."""

    call: Call


@dataclass(frozen=True)
class Tell:
    """Tell the fleet how the call went (``connection``: the session it lost, if it lost it): ``Told``."""

    end: CallEnd
    connection: str | None = None


@dataclass(frozen=True)
class AskBudget:
    """Ask the fleet's retry budget for one retry: ``Budget``."""


@dataclass(frozen=True)
class AskElevation:
    """Ask the broker for ``scope``: ``Elevation``."""

    scope: str | None


@dataclass(frozen=True)
class ToModel:
    """Hand this to the model (``outcome`` None: the call was not sent); ``end_loop``: ask it nothing more."""

    answer: Any
    outcome: Outcome | None = None
    end_loop: bool = False


@dataclass(frozen=True)
class Ended:
    """The run is over, on ``outcome``: ``report(state, outcome)``."""

    outcome: Outcome


Step = Check | Admit | Send | Tell | AskBudget | AskElevation | ToModel | Ended


class UnexpectedEvent(Exception):
    """An event the run's phase does not take: a driver's bug, never a source's."""


# --- the machine -----------------------------------------------------------------------------------

_TAKES: dict[type, tuple[Phase, ...]] = {
    Checked: (Phase.CHECKING,),
    Admitted: (Phase.ADMITTING,),
    Answered: (Phase.SENDING,),
    Told: (Phase.TELLING,),
    Budget: (Phase.BUDGETING,),
    Elevation: (Phase.ELEVATING,),
    ModelCall: (Phase.WITH_MODEL,),
    # What ends or interrupts a run from outside comes in any phase: a model's loop ended mid-call.
    Unresolved: tuple(Phase),
    TakeOver: tuple(Phase),
    CutShort: tuple(Phase),
    ModelRefused: tuple(Phase),
    ModelStopped: tuple(Phase),
}


def transition(
    policy: RecoveryPolicy, state: RunState, event: Event, rng: random.Random | None = None
) -> tuple[RunState, Step | None]:
    """The next state and step after ``event``; ``rng`` draws a back-off's jitter (seeded in tests).
    A step of None: nothing to carry out (the event was only recorded)."""
    if state.phase not in _TAKES[type(event)]:
        raise UnexpectedEvent(f"{type(event).__name__} in phase {state.phase} of task {state.task.id}")
    machine = _Machine(policy, state, rng or random.Random())  # noqa: S311 (a back-off's jitter)
    step = machine.on(event)
    return machine.state, step


class _Machine:
    """One transition's working copy: ``on`` replaces ``state`` as it decides (the caller sees the end)."""

    def __init__(self, policy: RecoveryPolicy, state: RunState, rng: random.Random) -> None:
        self.policy, self.state, self.rng = policy, state, rng

    def to(self, **changes: Any) -> None:
        self.state = replace(self.state, **changes)

    def decide(
        self,
        action: DecisionAction,
        reason: str,
        category: ErrorCategory | None = None,
        cause: str = "",
        backoff_ms: int = 0,
    ) -> None:
        decision = Decision(
            action=action, category=category, attempt=max(self.state.attempts, 1), backoff_ms=backoff_ms,
            reason=reason,
        )  # fmt: skip
        self.to(decisions=(*self.state.decisions, decision), causes=(*self.state.causes, cause))

    def about(self, action: DecisionAction, reason: str, outcome: Outcome, backoff_ms: int = 0) -> None:
        """A decision about ``outcome``, a failed call."""
        category = outcome.error.error_category if outcome.error else None
        self.decide(action, reason, category, outcome.error_type, backoff_ms)

    def end(
        self,
        action: DecisionAction,
        reason: str,
        outcome: Outcome,
        *,
        out_of_time: bool = False,
        error: ToolError | None = None,
    ) -> Ended:
        """Stop the run on ``outcome`` (or on ``error``, what the run reports instead)."""
        if out_of_time:
            self.to(out_of_time=True)
        self.about(action, reason, outcome)
        self.to(phase=Phase.ENDED, pending=None)
        return Ended(outcome if error is None else replace(outcome, result=error))

    def on(self, event: Event) -> Step | None:
        match event:
            case Checked():
                return self.checked(event)
            case Admitted(allowed=False, retry_in_s=retry_in_s):
                return self.breaker_open(retry_in_s)
            case Admitted():
                self.to(attempts=self.state.attempts + 1, phase=Phase.SENDING)
                return Send(self.state.call)
            case Answered():
                return self.answered(event)
            case Told():
                return self.told(event)
            case Budget(granted=True):
                return self.retried(self.pending().outcome, self.pending().delay_s)
            case Budget(granted=False):
                outcome = self.pending().outcome
                why = f"the retry budget for {self.state.task.source} is spent: {_described(outcome)}"
                return self.end("give_up", why, outcome)
            case Elevation():
                return self.elevation(event)
            case CutShort():
                return self.cut_short(event)
            case ModelCall():
                return self.model_call(event)
            case ModelRefused(tool=tool):
                reason = (
                    f"the model asked for {tool}, which {self.state.task.source} does not have; not called"
                )
                self.decide("refused", reason, ErrorCategory.VALIDATION)
                return None
            case ModelStopped():
                self.model_stopped(event)
                return None
            case Unresolved(outcome=outcome):
                reason = f"the model ended with this unresolved: {_described(outcome)}"
                return self.end("escalate", reason, outcome)
            case TakeOver(why=why, category=category):
                task = self.state.task
                self.state = self.state.calling(task.tool, task.arguments)
                self.to(driver=Driver.CODE, phase=Phase.CHECKING)
                self.decide("fallback", f"{why}; the code makes the planned call", category)
                return Check(self.state.call)
        raise UnexpectedEvent(f"{event!r} is no event of the recovery machine")

    def pending(self) -> Pending:
        pending = self.state.pending
        if pending is None:  # every phase that waits on an outcome holds one
            raise UnexpectedEvent(f"no outcome pending in phase {self.state.phase}")
        return pending

    # --- before the call ---------------------------------------------------------------------------

    def checked(self, event: Checked) -> Step:
        if event.blocked is not None:
            return self.refused(Outcome("error", event.blocked, "hook_blocked"), "hook_blocked")
        if isinstance(event.approval, ToolError):
            return self.refused(Outcome("error", event.approval, "not_approved"), "not_approved")
        if isinstance(event.approval, Approval):
            self.approved(event.approval)
        if self.state.deadline - event.now <= 0:
            why = "the deadline passed before the call could be made"
            return self.end("give_up", why, self.deadline_outcome(), out_of_time=True)
        self.to(phase=Phase.ADMITTING)
        return Admit(first=self.state.attempts == 0)

    def refused(self, outcome: Outcome, action: DecisionAction) -> Step:
        """A call a hook or the approvals would not let out: the code stops; a model is told."""
        reason = outcome.error.description if outcome.error else ""
        if self.state.driver is Driver.CODE:
            return self.end(action, reason, outcome)
        self.about(action, f"{reason} Returned to the model.", outcome)
        return self.to_model(outcome)

    def approved(self, approval: Approval) -> None:
        """A write goes out only with a person's yes: its decision is recorded once a call."""
        call = self.state.call
        arguments = json.dumps(call.arguments, sort_keys=True, default=str)
        said = f"approved by {approval.by} ({approval}): {self.state.task.source} {call.tool}({arguments})"
        if not any(d.action == "approved" and d.reason == said for d in self.state.decisions):
            self.decide("approved", said)

    def breaker_open(self, retry_in_s: float) -> Ended:
        source = self.state.task.source
        reason = f"the circuit for {source} is open; it probes again in {retry_in_s:.1f} s"
        outcome = Outcome(
            "error", ToolError.of(ErrorCategory.TRANSIENT, f"Not called: {reason}."), "breaker_open"
        )
        return self.end("breaker_open", reason, outcome)

    # --- the call and its outcome ------------------------------------------------------------------

    def answered(self, event: Answered) -> Tell:
        outcome = event.outcome
        error = outcome.error
        transient = error is not None and error.error_category is ErrorCategory.TRANSIENT
        at_deadline = transient and not outcome.answered and self.state.deadline - event.now <= AT_DEADLINE_S
        if at_deadline:  # the call's time was clipped to the deadline, and it ran out
            outcome = self.deadline_outcome()
        self.to(phase=Phase.TELLING, pending=Pending(outcome, event.resendable, at_deadline))
        if at_deadline:
            return Tell(CallEnd.CUT)  # says nothing of the source's health
        if not transient:
            return Tell(CallEnd.ANSWERED)
        if is_pushback(outcome):
            return Tell(CallEnd.PUSHED_BACK)
        return Tell(CallEnd.FAILED, event.connection if outcome.reopen else None)

    def told(self, event: Told) -> Step | None:
        pending = self.pending()
        outcome, resendable, error = pending.outcome, pending.resendable, pending.outcome.error
        if pending.at_deadline:
            if not resendable:  # a write cut mid-way may have acted
                return self.interrupted(outcome)
            why = f"the deadline passed before {self.state.task.source} answered"
            return self.end("give_up", why, outcome, out_of_time=True)
        if error is None:
            return self.settled(outcome, "")
        self.state = self.state.keeping(error.partial_results or [])
        match self.policy.action_for(error.error_category):
            case Recovery.RETRY if not resendable:
                return self.interrupted(outcome)
            case Recovery.RETRY:
                return self.retry(outcome, error, event)
            case Recovery.ELEVATE if self.state.elevations >= self.policy.max_elevations:
                why = f"{self.state.elevations} elevation already used"
                return self.settled(outcome, f"elevation refused ({why}): {error.description}")
            case Recovery.ELEVATE:
                self.to(phase=Phase.ELEVATING)
                return AskElevation(error.required_scope)
            case _:
                return self.settled(outcome, error.description)

    def retry(self, outcome: Outcome, error: ToolError, told: Told) -> Step:
        if told.breaker_open:  # this failure opened it: no point waiting to retry
            return self.breaker_open(told.retry_in_s)
        if is_pushback(outcome):
            return self.pushed_back(outcome, error, told)
        if self.state.retries >= self.policy.max_retries:
            return self.end("give_up", f"{self.state.retries} retries spent: {error.description}", outcome)
        delay = self.policy.backoff_s(self.state.retries + 1, self.rng, error.retry_after_ms)
        if told.now + delay >= self.state.deadline:
            return self.past_deadline(delay, outcome)
        if told.loss_counted:  # one lost session, one retry from the budget: another call paid it
            return self.retried(outcome, delay)
        self.to(phase=Phase.BUDGETING, pending=replace(self.pending(), delay_s=delay))
        return AskBudget()

    def pushed_back(self, outcome: Outcome, error: ToolError, told: Told) -> Step:
        """Flow control: the source said when to call again. Waited out (never sooner, with the policy's
        jitter growing as it keeps saying so) and resent within the deadline; neither the retry budget
        nor the retry bound is spent on it."""
        pushbacks = self.state.pushbacks + 1
        delay = self.policy.backoff_s(pushbacks, self.rng, error.retry_after_ms)
        if told.now + delay >= self.state.deadline:
            return self.past_deadline(delay, outcome)
        limit = (
            f"; the limit for {self.state.task.source} now {told.limit} calls at once" if told.limit else ""
        )
        reason = (
            f"pushback {pushbacks}, honouring retryAfterMs {error.retry_after_ms} (waited out within the "
            f"deadline, not from the retry budget{limit}): {error.description}"
        )
        self.to(pushbacks=pushbacks, phase=Phase.CHECKING, pending=None)
        self.about("retry", reason, outcome, round(delay * 1000))
        return Check(self.state.call, wait_s=delay)

    def past_deadline(self, delay: float, outcome: Outcome) -> Ended:
        reason = f"a back-off of {delay:.2f} s would pass the deadline: {_described(outcome)}"
        return self.end("give_up", reason, outcome, out_of_time=True)

    def retried(self, outcome: Outcome, delay: float) -> Check:
        reason = self.retry_reason(outcome)
        self.to(retries=self.state.retries + 1, phase=Phase.CHECKING, pending=None)
        self.about("retry", reason, outcome, round(delay * 1000))
        return Check(self.state.call, wait_s=delay)

    def retry_reason(self, outcome: Outcome) -> str:
        error = outcome.error
        assert error is not None
        cause = outcome.error_type if outcome.error_type not in ("", "tool_error") else "a transient error"
        hint = f", honouring retryAfterMs {error.retry_after_ms}" if error.retry_after_ms else ""
        max_retries = self.policy.max_retries
        return f"retry {self.state.retries + 1}/{max_retries} after {cause}{hint}: {error.description}"

    def elevation(self, event: Elevation) -> Step | None:
        outcome = self.pending().outcome
        error = outcome.error
        assert error is not None
        if not event.granted:
            return self.settled(outcome, f"elevation refused ({event.reason}): {error.description}")
        self.to(
            call=replace(self.state.call, meta=event.meta),
            elevations=self.state.elevations + 1,
            held_scopes=self.state.held_scopes | {error.required_scope or ""},
            phase=Phase.CHECKING,
            pending=None,
        )
        self.about("elevate", event.reason, outcome)
        return Check(self.state.call)

    def interrupted(self, outcome: Outcome, out_of_time: bool = False) -> Ended:
        """A write that failed after it may have acted: the run ends with its outcome unknown."""
        call, source = self.state.call, self.state.task.source
        cause = outcome.error_type or "transient"
        arguments = json.dumps(call.arguments, sort_keys=True, default=str)
        what = (
            f"The outcome of {call.tool} on {source} is unknown: the call {call.tool}({arguments}) "
            f"failed after it was sent ({outcome.error_type or 'a transient error'}: {_described(outcome)}), "
            "so it may or may not have acted. It was not sent again, as a write that may have acted must "
            f"not happen twice. Check {source} for its effect before asking again; a tool that takes an "
            "idempotency key may be called again with the same key."
        )
        error = ToolError.of(ErrorCategory.BUSINESS, what, attempted_query=call.query())
        why = f"not resent: a write whose outcome is unknown ({cause})"
        return self.end("outcome_unknown", why, outcome, out_of_time=out_of_time, error=error)

    def cut_short(self, event: CutShort) -> Ended:
        outcome = self.deadline_outcome()
        if event.sending and not event.resendable:  # a write cut mid-way may have acted
            return self.interrupted(outcome, out_of_time=True)
        why = f"the deadline passed while {self.state.task.source} was still working"
        return self.end("give_up", why, outcome, out_of_time=True)

    def deadline_outcome(self) -> Outcome:
        answered = f"The deadline passed before {self.state.task.source} answered {self.state.call.tool}."
        return Outcome("error", ToolError.of(ErrorCategory.TRANSIENT, answered), "deadline")

    # --- the decision-maker's turn -----------------------------------------------------------------

    def settled(self, outcome: Outcome, reason: str) -> Step | None:
        """A call that settled: the code reports, repairs or escalates; a model is handed it."""
        error = outcome.error
        if error is None:
            if outcome.kind == "empty":
                self.decide("accept_empty", ACCEPT_EMPTY)
            if self.state.driver is Driver.MODEL:
                return self.to_model(outcome)
            self.to(phase=Phase.ENDED, pending=None)
            return Ended(outcome)
        repairs = self.policy.action_for(error.error_category) is Recovery.REPAIR
        if repairs and self.state.repairs >= self.policy.max_repairs:
            return self.end("escalate", f"{self.state.repairs} repairs spent: {error.description}", outcome)
        if self.state.driver is Driver.MODEL:
            return self.hand_to_model(outcome, error, reason, repairs)
        if not repairs:
            return self.end("escalate", reason, outcome)
        repaired = repair(self.state.call.arguments)
        if repaired is None:
            return self.end("escalate", f"no repair applies: {error.description}", outcome)
        changes = describe_changes(self.state.call.arguments, repaired)
        self.state = self.state.calling(self.state.call.tool, repaired)
        self.to(repairs=self.state.repairs + 1, phase=Phase.CHECKING, pending=None)
        self.about("repair", f"repair {self.state.repairs}/{self.policy.max_repairs}: {changes}", outcome)
        return Check(self.state.call)

    def hand_to_model(self, outcome: Outcome, error: ToolError, reason: str, repairs: bool) -> ToModel:
        if repairs:
            self.to(repairing=self.state.call.tool)
            used = f"{self.state.repairs}/{self.policy.max_repairs} repairs used"
            self.about("to_model", f"returned to the model to repair ({used}): {error.description}", outcome)
        else:
            self.about("to_model", f"returned to the model, not retried: {reason}", outcome)
        return self.to_model(outcome)

    def to_model(self, outcome: Outcome) -> ToModel:
        error = outcome.error
        if error is not None and not error.is_retryable:
            key = _by_value(self.state.call.tool, self.state.call.arguments)
            self.to(failed_for_good=(*self.state.failed_for_good, (key, error)))
        self.to(phase=Phase.WITH_MODEL, pending=None)
        return ToModel(outcome.result, outcome)

    def model_call(self, event: ModelCall) -> Step:
        state, policy = self.state, self.policy
        failed = dict(state.failed_for_good).get(_by_value(event.tool, event.arguments))
        if failed is not None:
            reason = f"not sent again: the identical call failed with a {failed.error_category} error"
            self.decide("refused", f"{reason}: {failed.description}", failed.error_category)
            return ToModel(failed)
        if state.attempts - state.pushbacks >= policy.max_attempts:  # the deterministic mode's bound
            spent = f"Not called: the subagent's {policy.max_attempts} calls are spent."
            self.decide("refused", spent, ErrorCategory.BUSINESS)
            return ToModel(ToolError.of(ErrorCategory.BUSINESS, spent), end_loop=True)
        if state.repairing == event.tool:  # the model's answer to a validation error: a repair
            changes = describe_changes(state.call.arguments, event.arguments)
            reason = f"repair {state.repairs + 1}/{policy.max_repairs} by the model: {changes}"
            self.to(repairs=state.repairs + 1)
            self.decide("repair", reason, ErrorCategory.VALIDATION)
        self.state = self.state.calling(event.tool, event.arguments)
        self.to(repairing=None, phase=Phase.CHECKING)
        return Check(self.state.call)

    def model_stopped(self, event: ModelStopped) -> None:
        if event.why is ModelStop.DEADLINE:
            self.to(out_of_time=True)
        category = ErrorCategory.TRANSIENT if self.state.out_of_time else None
        self.decide(
            "stop_model", event.reason, event.category if event.why is ModelStop.API_FAILED else category
        )


def is_pushback(outcome: Outcome) -> bool:
    """A transient answer from the source saying when to call again: it did not execute, slow down."""
    error = outcome.error
    return (
        error is not None
        and error.error_category is ErrorCategory.TRANSIENT
        and error.retry_after_ms is not None
    )


def _by_value(tool: str, arguments: dict[str, Any]) -> str:
    return json.dumps([tool, arguments], sort_keys=True, default=str)


def _described(outcome: Outcome) -> str:
    return outcome.error.description if outcome.error is not None else "no answer"


def resendable(effects: ToolEffects, call: Call, unsent: bool) -> bool:
    """The one rule of what may be sent again after a transient failure: the call provably never
    reached the tool (``unsent``), or the tool says it only reads or is idempotent, or the call
    carries the idempotency key its tool takes. Anything else may have acted already."""
    return unsent or effects.resendable(call.arguments)


def describe_changes(before: dict[str, Any], after: dict[str, Any]) -> str:
    """What a repair changed, argument by argument: ``sku "sku-1" -> "SKU-1"``."""
    names = [*after, *(name for name in before if name not in after)]
    changed = [
        f"{name} {json.dumps(before.get(name), default=str)} -> {json.dumps(after.get(name), default=str)}"
        for name in names
        if before.get(name) != after.get(name)
    ]
    return ", ".join(changed) or "no argument changed"


def add_new(into: list[Any], records: list[Any]) -> list[Any]:
    """``into`` with the records it does not hold yet appended (by value): nothing kept is ever doubled."""
    seen = {json.dumps(item, sort_keys=True, default=str) for item in into}
    for record in records:
        if json.dumps(record, sort_keys=True, default=str) not in seen:
            into.append(record)
    return into


def report(state: RunState, outcome: Outcome) -> SubagentReport:
    """The report of a run that ends on ``outcome`` with the call ``state`` holds."""
    common: dict[str, Any] = {
        "task": state.task.id, "source": state.task.source, "tool": state.task.tool,
        "attempts": state.attempts, "decisions": list(state.decisions),
        "attempted_query": state.call.query(), "out_of_time": state.out_of_time,
    }  # fmt: skip
    result = outcome.result
    if isinstance(result, ResultPage):
        return SubagentReport(
            state=TaskState.OK, results=result.results, truncated=result.truncated, **common
        )
    if isinstance(result, EmptyResult):
        return SubagentReport(state=TaskState.EMPTY, message=result.message, **common)
    return SubagentReport(
        state=TaskState.ESCALATED,
        message=result.description,
        escalation=Escalation(
            error_category=result.error_category,
            is_retryable=result.is_retryable,
            message=result.description,
            attempted_query=result.attempted_query or state.call.query(),
            partial_results=list(state.partial_results),
            source=state.task.source,
            attempts=state.attempts,
            decisions=list(state.decisions),
        ),
        required_scope=result.required_scope if result.error_category is ErrorCategory.PERMISSION else None,
        **common,
    )
