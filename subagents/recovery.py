"""A subagent's recovery as a small state machine over immutable values: it decides, it never acts.

A run's state (``RunState``) is a frozen value: the task, the current call, the counters and the
decisions so far; each transition returns a new state. The functions below take a state and what
just happened and return the next ``Step``. They never call, sleep, trace or ask anyone:
``subagents.subagent`` acts on the steps (the deterministic driver), and ``subagents.tool_loop`` feeds
the same machine when a model chooses the calls, so every bound is checked here and nowhere else.

    after_failure   transient    -> Retry(delay) | Stop(give_up) | NotCalled (the breaker opened)
                                    | Stop(outcome_unknown): a write that may have acted is never resent
                    permission   -> Elevate(scope) | HandOver (elevation already used)
                    otherwise    -> HandOver: the decision-maker (code or model) acts on it
    on_settled      ok, empty    -> Finish
                    hook blocked -> Stop(hook_blocked)
                    validation   -> Repair(arguments) | Stop(escalate)  (no repair, or repairs spent)
                    otherwise    -> Stop(escalate)
    model_repair    the model's corrected call after a validation error -> Repair (the same budget)

Only three steps send a call again: ``Retry`` (the identical call, after a back-off), ``Repair``
(changed arguments), ``Elevate`` (a new credential, once the broker grants it). A ``Retry`` is decided
only for a call that is safe to resend (``resendable``): a read, an idempotent tool, a call carrying
its tool's idempotency key, or one that provably never reached the tool. A write interrupted after it
may have acted (a transient error, a time-out, a lost connection) ends the run with its outcome
unknown, a gap that says so, never a retry: the effect must not happen twice.
(After h11's sans-I/O core: events in, decisions out, the driver owns time and I/O.)
"""

from __future__ import annotations

import json
import random
from dataclasses import dataclass, replace
from typing import Any

from sources.contract import AttemptedQuery, EmptyResult, ErrorCategory, ResultPage, ToolError
from subagents.classify import Outcome
from subagents.decisions import CodeAction, Decision, Escalation, SubagentReport, TaskState
from subagents.policy import Recovery, RecoveryPolicy
from subagents.repair import repair
from subagents.task import Task
from subagents.writes import ToolEffects

__all__ = [
    "ACCEPT_EMPTY",
    "Call",
    "Elevate",
    "Failed",
    "Finish",
    "HandOver",
    "NotCalled",
    "Repair",
    "Retry",
    "RunState",
    "Step",
    "Stop",
    "SubagentReport",
    "Task",
    "add_new",
    "after_failure",
    "calls_spent",
    "model_repair",
    "on_settled",
    "repairs_spent",
    "report",
    "resendable",
    "retry_budget_spent",
    "write_interrupted",
]

ACCEPT_EMPTY = "the query ran and matched nothing: a valid empty result, not retried"


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
    """Where one subagent's run stands. Never changed in place: each transition returns a new state."""

    task: Task
    deadline: float  # on the subagents' clock
    call: Call
    attempts: int = 0
    retries: int = 0
    repairs: int = 0
    elevations: int = 0
    held_scopes: frozenset[str] = frozenset()
    decisions: tuple[Decision, ...] = ()
    partial_results: tuple[Any, ...] = ()
    out_of_time: bool = False

    @classmethod
    def start(cls, task: Task, deadline: float, meta: dict[str, Any] | None) -> RunState:
        return cls(task, deadline, Call(task.tool, dict(task.arguments), meta))

    def attempted(self) -> RunState:
        return replace(self, attempts=self.attempts + 1)

    def calling(self, tool: str, arguments: dict[str, Any]) -> RunState:
        return replace(self, call=replace(self.call, tool=tool, arguments=dict(arguments)))

    def retried(self) -> RunState:
        return replace(self, retries=self.retries + 1)

    def repaired(self, arguments: dict[str, Any]) -> RunState:
        return replace(self.calling(self.call.tool, arguments), repairs=self.repairs + 1)

    def elevated(self, scope: str, meta: dict[str, Any] | None) -> RunState:
        return replace(
            self,
            call=replace(self.call, meta=meta),
            elevations=self.elevations + 1,
            held_scopes=self.held_scopes | {scope},
        )

    def decided(self, decision: Decision) -> RunState:
        return replace(self, decisions=(*self.decisions, decision))

    def keeping(self, records: list[Any]) -> RunState:
        return replace(self, partial_results=tuple(add_new(list(self.partial_results), records)))

    def timed_out(self) -> RunState:
        return replace(self, out_of_time=True)


@dataclass(frozen=True)
class Retry:
    delay_s: float
    reason: str


@dataclass(frozen=True)
class Elevate:
    scope: str | None


@dataclass(frozen=True)
class Repair:
    arguments: dict[str, Any]
    reason: str


@dataclass(frozen=True)
class Stop:
    action: CodeAction
    reason: str
    out_of_time: bool = False
    error: ToolError | None = None  # what the run reports instead of the call's error (an unknown outcome)


@dataclass(frozen=True)
class NotCalled:
    """The source's circuit is open: stop without calling it."""


@dataclass(frozen=True)
class HandOver:
    """The call settled: the decision-maker (``on_settled``, or a model) acts on its outcome."""

    reason: str


@dataclass(frozen=True)
class Finish:
    accept_empty: bool  # a valid empty result: accepted, never retried


Step = Retry | Elevate | Repair | Stop | NotCalled | HandOver | Finish


@dataclass(frozen=True)
class Failed:
    """A failed call as the driver saw it: the error, its short cause, when, and the breaker after it."""

    error: ToolError
    cause: str  # the outcome's error type: "timeout", "connection_closed", ...
    now: float
    breaker_open: bool  # this failure left the source's circuit open
    resendable: bool  # sending the call again cannot repeat an effect (``resendable``)


def resendable(effects: ToolEffects, call: Call, unsent: bool) -> bool:
    """The one rule of what may be sent again after a transient failure: the call provably never
    reached the tool (``unsent``), or the tool says it only reads or is idempotent, or the call
    carries the idempotency key its tool takes. Anything else may have acted already."""
    return unsent or effects.resendable(call.arguments)


def write_interrupted(state: RunState, cause: str, description: str) -> Stop:
    """A write that failed after it may have acted: the run ends with its outcome unknown."""
    call = state.call
    arguments = json.dumps(call.arguments, sort_keys=True, default=str)
    what = (
        f"The outcome of {call.tool} on {state.task.source} is unknown: the call {call.tool}({arguments}) "
        f"failed after it was sent ({cause or 'a transient error'}: {description}), so it may or may not "
        "have acted. It was not sent again, as a write that may have acted must not happen twice. Check "
        f"{state.task.source} for its effect before asking again; a tool that takes an idempotency key "
        "may be called again with the same key."
    )
    error = ToolError.of(ErrorCategory.BUSINESS, what, attempted_query=call.query())
    return Stop(
        "outcome_unknown",
        f"not resent: a write whose outcome is unknown ({cause or 'transient'})",
        error=error,
    )


def after_failure(
    policy: RecoveryPolicy, state: RunState, failed: Failed, rng: random.Random
) -> Retry | Elevate | Stop | NotCalled | HandOver:
    """What to do about a failed call before anyone else decides: retry a transient fault, elevate."""
    error = failed.error
    match policy.action_for(error.error_category):
        case Recovery.RETRY if not failed.resendable:
            return write_interrupted(state, failed.cause, error.description)
        case Recovery.RETRY:
            return _retry(policy, state, failed, rng)
        case Recovery.ELEVATE:
            if state.elevations >= policy.max_elevations:
                why = f"{state.elevations} elevation already used"
                return HandOver(f"elevation refused ({why}): {error.description}")
            return Elevate(error.required_scope)
        case _:
            return HandOver(error.description)


def _retry(
    policy: RecoveryPolicy, state: RunState, failed: Failed, rng: random.Random
) -> Retry | Stop | NotCalled:
    error = failed.error
    if failed.breaker_open:  # this failure opened it: no point waiting to retry
        return NotCalled()
    if state.retries >= policy.max_retries:
        return Stop("give_up", f"{state.retries} retries spent: {error.description}")
    delay = policy.backoff_s(state.retries + 1, rng, error.retry_after_ms)
    if failed.now + delay >= state.deadline:
        reason = f"a back-off of {delay:.2f} s would pass the deadline: {error.description}"
        return Stop("give_up", reason, out_of_time=True)
    cause = failed.cause if failed.cause not in ("", "tool_error") else "a transient error"
    hint = f", honouring retryAfterMs {error.retry_after_ms}" if error.retry_after_ms else ""
    reason = f"retry {state.retries + 1}/{policy.max_retries} after {cause}{hint}: {error.description}"
    return Retry(delay, reason)


def retry_budget_spent(source: str, error: ToolError) -> Stop:
    """A retry the machine would make, but the fleet's retry budget for ``source`` has none left
    (``subagents.guard``): give up at once, as a source already failing should not be called more."""
    return Stop("give_up", f"the retry budget for {source} is spent: {error.description}")


def on_settled(
    policy: RecoveryPolicy, state: RunState, outcome: Outcome, reason: str
) -> Finish | Stop | Repair:
    """The code decides on what settled: report a result, repair a validation error, escalate the rest."""
    error = outcome.error
    if error is None:
        return Finish(accept_empty=outcome.kind == "empty")
    if outcome.error_type == "hook_blocked":
        return Stop("hook_blocked", reason)
    if outcome.error_type == "not_approved":
        return Stop("not_approved", reason)
    if policy.action_for(error.error_category) is not Recovery.REPAIR:
        return Stop("escalate", reason)
    spent = repairs_spent(policy, state, error)
    if spent is not None:
        return spent
    repaired = repair(state.call.arguments)
    if repaired is None:
        return Stop("escalate", f"no repair applies: {error.description}")
    changes = describe_changes(state.call.arguments, repaired)
    return Repair(repaired, f"repair {state.repairs + 1}/{policy.max_repairs}: {changes}")


def repairs_spent(policy: RecoveryPolicy, state: RunState, error: ToolError) -> Stop | None:
    """The repair budget, for the code and the model alike: a stop once it is spent."""
    if state.repairs >= policy.max_repairs:
        return Stop("escalate", f"{state.repairs} repairs spent: {error.description}")
    return None


def model_repair(policy: RecoveryPolicy, state: RunState, arguments: dict[str, Any]) -> Repair:
    """The model's corrected call after a validation error: a repair, counted like the code's own."""
    changes = describe_changes(state.call.arguments, arguments)
    return Repair(arguments, f"repair {state.repairs + 1}/{policy.max_repairs} by the model: {changes}")


def calls_spent(policy: RecoveryPolicy, state: RunState) -> bool:
    """The most calls one subagent makes, whoever chooses them."""
    return state.attempts >= policy.max_attempts


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
