"""The recovery machine on its own: events in, the next state and step out; no source, no clock, no I/O.

Both drivers (the code's loop and the Claude tool loop) only carry out these steps and feed back these
events, so the bounds checked here are the only ones there are.
"""

from __future__ import annotations

import random
from dataclasses import FrozenInstanceError, replace
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from sources.contract import EmptyResult, ErrorCategory, ResultPage, ToolError
from subagents import recovery
from subagents.classify import Outcome
from subagents.guard import CallEnd
from subagents.policy import RecoveryPolicy, set_testing
from subagents.recovery import (
    Admit,
    Admitted,
    Answered,
    AskBudget,
    AskElevation,
    Budget,
    Check,
    Checked,
    CutShort,
    Driver,
    Elevation,
    Ended,
    ModelCall,
    ModelStop,
    ModelStopped,
    Phase,
    RunState,
    Send,
    Task,
    Tell,
    Told,
    ToModel,
    UnexpectedEvent,
    transition,
)
from subagents.writes import Approval, ToolEffects

POLICY = RecoveryPolicy()
TASK = Task("lookup", "customers", "customer_lookup", {"identifier": "CUST 42"})
WRITE = Task("pay", "billing", "pay_out", {"order_id": "ORD-10031", "amount": 45.0})
PAGE = Outcome("ok", ResultPage[dict](result_count=1, results=[{"id": 1}]))  # type: ignore[type-var]


def start(task: Task = TASK, deadline: float = 100.0, driver: Driver = Driver.CODE) -> RunState:
    return RunState.start(task, deadline, meta=None, driver=driver)


def failed(category: ErrorCategory, description: str = "no", **fields: Any) -> Outcome:
    return Outcome("error", ToolError.of(category, description, **fields), "tool_error")


def feed(state: RunState, *events: recovery.Event, seed: int = 1) -> tuple[RunState, recovery.Step | None]:
    """Feed events in turn; the state and step after the last."""
    rng, step = random.Random(seed), None
    for event in events:
        state, step = transition(POLICY, state, event, rng)
    return state, step


def sent(state: RunState, now: float = 0.0) -> RunState:
    """The call checked, admitted and sent: the machine waits for its answer."""
    state, step = feed(state, Checked(now), Admitted(now, True))
    assert isinstance(step, Send) and state.phase is Phase.SENDING
    return state


def answer(
    state: RunState,
    outcome: Outcome,
    *,
    now: float = 0.0,
    resendable: bool = True,
    breaker_open: bool = False,
) -> tuple[RunState, recovery.Step | None]:
    """A sent call answered and the fleet told; the step after."""
    state, step = feed(state, Answered(outcome, now, resendable))
    assert isinstance(step, Tell)
    return feed(state, Told(now, breaker_open, 2.0, limit=8))


def actions(state: RunState) -> list[str]:
    return [decision.action for decision in state.decisions]


def test_a_state_is_a_value_and_each_transition_a_new_one() -> None:
    state = start()
    after, step = feed(state, Checked(0.0))
    assert step == Admit(first=True) and after.phase is Phase.ADMITTING and state.phase is Phase.CHECKING
    after, step = feed(after, Admitted(0.0, True))
    assert step == Send(state.call) and (state.attempts, after.attempts) == (0, 1)
    with pytest.raises(FrozenInstanceError):
        state.attempts = 3  # type: ignore[misc]


def test_an_answer_is_finished_and_an_empty_one_accepted() -> None:
    state, step = answer(sent(start()), PAGE)
    assert step == Ended(PAGE) and state.phase is Phase.ENDED and actions(state) == []
    empty = Outcome("empty", EmptyResult(message="nothing"))
    state, step = answer(sent(start()), empty)
    assert step == Ended(empty) and actions(state) == ["accept_empty"]
    assert recovery.report(state, empty).state == "empty"


@given(seed=st.integers(0, 2**16))
def test_a_transient_fault_is_retried_until_the_bound_then_given_up(seed: int) -> None:
    """Each retry asks the fleet's budget, then waits its back-off; the retry after the bound gives up."""
    state = sent(start())
    for retry in range(1, POLICY.max_retries + 1):
        state, step = answer(state, failed(ErrorCategory.TRANSIENT, "busy"))
        assert step == AskBudget() and state.phase is Phase.BUDGETING
        state, step = feed(state, Budget(granted=True), seed=seed)
        assert isinstance(step, Check) and 0 <= step.wait_s <= POLICY.max_delay_s
        assert state.decisions[-1].reason.startswith(
            f"retry {retry}/{POLICY.max_retries} after a transient error"
        )
        assert state.decisions[-1].backoff_ms == round(step.wait_s * 1000)
        state = sent(state)
    state, step = answer(state, failed(ErrorCategory.TRANSIENT, "busy"))
    assert isinstance(step, Ended) and actions(state)[-1] == "give_up" and not state.out_of_time
    assert (state.retries, state.attempts) == (POLICY.max_retries, POLICY.max_retries + 1)


def test_a_call_whose_lost_session_was_counted_already_is_retried_without_the_budget() -> None:
    closed = Outcome(
        "error", ToolError.of(ErrorCategory.TRANSIENT, "closed"), "connection_closed", reopen=True
    )
    state, step = feed(sent(start()), Answered(closed, 0.0, resendable=True, connection="1:7:3"))
    assert step == Tell(CallEnd.FAILED, "1:7:3")
    state, step = feed(state, Told(0.0, loss_counted=True))
    assert isinstance(step, Check) and state.retries == 1 and actions(state) == ["retry"]


def test_a_retry_the_fleet_s_budget_refuses_gives_up() -> None:
    state, step = answer(sent(start()), failed(ErrorCategory.TRANSIENT, "busy"))
    state, step = feed(state, Budget(granted=False))
    assert isinstance(step, Ended) and actions(state) == ["give_up"] and state.retries == 0
    assert "the retry budget for customers is spent: busy" in state.decisions[-1].reason


def test_pushback_is_waited_out_as_asked_never_from_the_retry_budget() -> None:
    """A transient answer saying when to call again: told to the fleet as pushback (no breaker failure,
    a lower limit), then resent after at least the wait it asked for, within the deadline, without the
    retry budget or the retry bound: a source that keeps pushing back is waited out to the deadline."""
    slow_down = failed(ErrorCategory.TRANSIENT, "rate limited", retry_after_ms=150)
    state = start(deadline=60.0)
    for pushback in range(1, POLICY.max_retries + 3):
        state, step = feed(sent(state), Answered(slow_down, 0.0, resendable=True))
        assert step == Tell(CallEnd.PUSHED_BACK)
        state, step = feed(state, Told(0.0, limit=7))
        assert isinstance(step, Check) and step.wait_s >= 0.15
        assert (state.pushbacks, state.retries) == (pushback, 0)
    assert state.decisions[-1].reason.startswith(
        f"pushback {POLICY.max_retries + 2}, honouring retryAfterMs 150 (waited out within the deadline, "
        "not from the retry budget; the limit for customers now 7 calls at once)"
    )
    state, step = feed(sent(state), Answered(slow_down, 59.99, resendable=True))
    state, step = feed(state, Told(59.99))
    assert isinstance(step, Ended) and state.out_of_time and actions(state)[-1] == "give_up"


def test_a_back_off_past_the_deadline_is_not_slept_it_gives_up_out_of_time() -> None:
    state, step = answer(sent(start(deadline=1.0)), failed(ErrorCategory.TRANSIENT), now=0.999999)
    assert isinstance(step, Ended) and actions(state) == ["give_up"] and state.out_of_time


def test_a_transient_fault_that_opened_the_breaker_is_not_retried() -> None:
    state, step = answer(sent(start()), failed(ErrorCategory.TRANSIENT), breaker_open=True)
    assert isinstance(step, Ended) and actions(state) == ["breaker_open"]
    assert "probes again in 2.0 s" in state.decisions[-1].reason


def test_an_open_breaker_stops_the_call_before_it_is_sent() -> None:
    state, step = feed(start(), Checked(0.0), Admitted(0.0, False, 3.0))
    assert isinstance(step, Ended) and actions(state) == ["breaker_open"] and state.attempts == 0
    assert state.causes == ("breaker_open",)


def test_the_deadline_is_checked_before_every_call_and_when_a_call_is_cut_by_it() -> None:
    state, step = feed(start(deadline=5.0), Checked(5.0))
    assert isinstance(step, Ended) and actions(state) == ["give_up"] and state.out_of_time
    cut = failed(ErrorCategory.TRANSIENT, "timed out")
    state, step = feed(sent(start(deadline=5.0)), Answered(cut, 4.99, resendable=True))
    assert step == Tell(CallEnd.CUT)  # the deadline's doing says nothing of the source
    state, step = feed(state, Told(4.99))
    assert isinstance(step, Ended) and state.out_of_time and state.causes == ("deadline",)
    assert "The deadline passed before customers answered" in str(step.outcome.result)


def test_permission_asks_for_elevation_once_then_escalates() -> None:
    denied = failed(ErrorCategory.PERMISSION, "needs read", required_scope="customers:read")
    state, step = answer(sent(start()), denied)
    assert step == AskElevation("customers:read") and state.phase is Phase.ELEVATING
    state, step = feed(state, Elevation(True, "granted", {"credential": "x"}))
    assert isinstance(step, Check) and step.call.meta == {"credential": "x"}
    assert state.held_scopes == frozenset({"customers:read"}) and actions(state) == ["elevate"]
    state, step = answer(sent(state), denied)
    assert isinstance(step, Ended) and actions(state) == ["elevate", "escalate"]
    assert "1 elevation already used" in state.decisions[-1].reason


def test_an_elevation_the_broker_refuses_escalates_with_its_reason() -> None:
    state, _ = answer(sent(start()), failed(ErrorCategory.PERMISSION, "no", required_scope="x"))
    state, step = feed(state, Elevation(False, "no grant allows 'x'"))
    assert isinstance(step, Ended) and actions(state) == ["escalate"]
    assert state.decisions[-1].reason == "elevation refused (no grant allows 'x'): no"


def test_business_escalates_and_validation_is_repaired_within_its_budget() -> None:
    state, step = answer(sent(start()), failed(ErrorCategory.BUSINESS, "closed account"))
    assert isinstance(step, Ended) and state.decisions[-1].reason == "closed account"
    state, step = answer(sent(start()), failed(ErrorCategory.VALIDATION, "bad id"))
    assert isinstance(step, Check) and step.call.arguments == {"identifier": "CUST-00042"}
    assert state.decisions[-1].reason == 'repair 1/2: identifier "CUST 42" -> "CUST-00042"'
    state, step = answer(sent(state), failed(ErrorCategory.VALIDATION, "still bad"))  # nothing more to repair
    assert isinstance(step, Ended) and actions(state) == ["repair", "escalate"]
    assert "no repair applies" in state.decisions[-1].reason


@given(by_code=st.integers(0, 2), by_model=st.integers(0, 3))
def test_the_code_and_the_model_spend_one_repair_budget(by_code: int, by_model: int) -> None:
    """Repairs are counted by one machine whoever makes them, and bounded by one check."""
    state = start(driver=Driver.MODEL)
    state, _ = feed(state, ModelCall("customer_lookup", {"identifier": "cust 7"}))
    for turn in range(by_code + by_model):
        state, step = answer(sent(state), failed(ErrorCategory.VALIDATION, "bad"))
        if state.phase is Phase.ENDED:
            assert turn >= POLICY.max_repairs and actions(state)[-1] == "escalate"
            return
        assert isinstance(step, ToModel) and state.repairing == "customer_lookup"
        state, step = feed(state, ModelCall("customer_lookup", {"identifier": f"CUST-0000{turn}"}))
        assert isinstance(step, Check) and state.repairs == turn + 1
    assert state.repairs == by_code + by_model <= POLICY.max_repairs


def test_the_model_s_call_budget_and_its_failed_calls_are_the_code_s() -> None:
    state = start(driver=Driver.MODEL)
    state, _ = feed(state, ModelCall("customer_lookup", {"identifier": "CUST-00001"}))
    state, step = answer(sent(state), failed(ErrorCategory.BUSINESS, "closed"))
    assert isinstance(step, ToModel) and actions(state) == ["to_model"]
    state, step = feed(state, ModelCall("customer_lookup", {"identifier": "CUST-00001"}))
    assert isinstance(step, ToModel) and step.outcome is None and actions(state)[-1] == "refused"
    for n in range(2, POLICY.max_attempts + 1):
        state, _ = feed(state, ModelCall("customer_lookup", {"identifier": f"CUST-0000{n}"}))
        state, _ = answer(sent(state), PAGE)
    state, step = feed(state, ModelCall("customer_lookup", {"identifier": "CUST-00009"}))
    assert isinstance(step, ToModel) and step.end_loop and actions(state)[-1] == "refused"
    assert state.attempts == POLICY.max_attempts


def test_a_hook_or_a_missing_approval_stops_the_code_and_is_told_to_a_model() -> None:
    over = ToolError.of(ErrorCategory.BUSINESS, "over the limit")
    state, step = feed(start(WRITE), Checked(0.0, blocked=over))
    assert isinstance(step, Ended) and actions(state) == ["hook_blocked"] and state.attempts == 0
    state, step = feed(start(WRITE), Checked(0.0, approval=over))
    assert isinstance(step, Ended) and actions(state) == ["not_approved"]
    model = start(WRITE, driver=Driver.MODEL)
    model, _ = feed(model, ModelCall("pay_out", dict(WRITE.arguments)), Checked(0.0, blocked=over))
    assert model.phase is Phase.WITH_MODEL and model.decisions[-1].reason.endswith("Returned to the model.")


def test_an_approved_write_is_recorded_once_a_call() -> None:
    approval = Approval.parse("pay_out:ORD-10031")
    state = start(WRITE)
    state, _ = answer(sent_with(state, approval), failed(ErrorCategory.TRANSIENT), resendable=True)
    state, _ = feed(state, Budget(True))
    state = sent_with(state, approval)
    assert actions(state) == ["approved", "retry"]


def sent_with(state: RunState, approval: Approval) -> RunState:
    state, step = feed(state, Checked(0.0, approval=approval), Admitted(0.0, True))
    assert isinstance(step, Send)
    return state


@given(
    retries=st.integers(0, POLICY.max_retries),
    breaker_open=st.booleans(),
    cause=st.sampled_from(["timeout", "connection_closed", "tool_error", "garbage"]),
)
def test_a_write_that_may_have_acted_ends_with_its_outcome_unknown_never_a_retry(
    retries: int, breaker_open: bool, cause: str
) -> None:
    """Whatever the retries left and the breaker say, a transient failure of a write that is not safe
    to resend ends the run on an error saying the outcome is unknown, what was attempted and what to check."""
    state = sent(start(WRITE))
    for _ in range(retries):  # earlier failures that provably never reached the tool
        state, _ = answer(state, failed(ErrorCategory.TRANSIENT))
        state, _ = feed(state, Budget(True))
        state = sent(state)
    interrupted = Outcome("error", ToolError.of(ErrorCategory.TRANSIENT, "briefly unavailable"), cause)
    state, step = answer(state, interrupted, resendable=False, breaker_open=breaker_open)
    assert isinstance(step, Ended) and actions(state)[-1] == "outcome_unknown"
    error = step.outcome.error
    assert error is not None and error.error_category is ErrorCategory.BUSINESS and not error.is_retryable
    assert "may or may not have acted" in error.description and "It was not sent again" in error.description
    assert error.attempted_query is not None and error.attempted_query.tool == "pay_out"


def test_a_write_refused_before_acting_is_still_recovered() -> None:
    """Validation and permission say the write did not act: repair and elevation still apply."""
    denied = failed(ErrorCategory.PERMISSION, "needs billing:refund", required_scope="billing:refund")
    _, step = answer(sent(start(WRITE)), denied, resendable=False)
    assert isinstance(step, AskElevation)


@pytest.mark.parametrize("sending, resendable, action", [
    (True, False, "outcome_unknown"), (True, True, "give_up"), (False, False, "give_up"),
])  # fmt: skip
def test_the_backstop_ends_a_run_in_any_phase(sending: bool, resendable: bool, action: str) -> None:
    for phase_state in (start(), sent(start()), answer(sent(start()), failed(ErrorCategory.TRANSIENT))[0]):
        state, step = feed(phase_state, CutShort(sending, resendable))
        assert isinstance(step, Ended) and actions(state)[-1] == action and state.out_of_time


def test_the_model_stopped_by_the_deadline_is_out_of_time() -> None:
    state, step = feed(start(driver=Driver.MODEL), ModelStopped(ModelStop.DEADLINE, "the deadline came"))
    assert step is None and state.out_of_time and state.decisions[-1].category is ErrorCategory.TRANSIENT
    state, _ = feed(start(driver=Driver.MODEL), ModelStopped(ModelStop.TURNS, "the model used its 8 turns"))
    assert not state.out_of_time and state.decisions[-1].category is None


def test_an_event_the_phase_does_not_take_is_refused() -> None:
    with pytest.raises(UnexpectedEvent, match="Answered in phase checking"):
        feed(start(), Answered(PAGE, 0.0, True))
    with pytest.raises(UnexpectedEvent, match="ModelCall in phase checking"):
        feed(start(), ModelCall("customer_lookup", {}))
    with pytest.raises(UnexpectedEvent, match="Budget in phase sending"):
        feed(sent(start()), Budget(True))


# --- every bound, whatever the sources and the fleet answer ----------------------------------------

_ANSWERS = st.sampled_from(
    [
        PAGE,
        Outcome("empty", EmptyResult(message="nothing")),
        failed(ErrorCategory.TRANSIENT, "busy"),
        failed(ErrorCategory.TRANSIENT, "slow down", retry_after_ms=150),
        failed(ErrorCategory.VALIDATION, "bad"),
        failed(ErrorCategory.BUSINESS, "no"),
        failed(ErrorCategory.PERMISSION, "denied", required_scope="customers:read"),
    ]
)


@settings(max_examples=300)
@given(data=st.data(), writes=st.booleans(), deadline=st.floats(1.0, 30.0))
def test_no_run_passes_a_bound_whatever_happens(data: st.DataObject, writes: bool, deadline: float) -> None:
    """A driver that answers every step at random, as sources, the fleet and the broker might: every run
    ends, within every bound, with one cause per decision, and a write is never sent again after it may
    have acted."""
    state, step, now = start(WRITE if writes else TASK, deadline), None, 0.0
    step = state.first_step()
    for _ in range(100):
        match step:
            case Check(wait_s=wait_s):
                now += wait_s
                event: recovery.Event = Checked(now)
            case Admit():
                event = Admitted(now, data.draw(st.sampled_from([True, True, True, False])))
            case Send():
                outcome = data.draw(_ANSWERS)
                now += data.draw(st.floats(0.0, 2.0))
                answered = replace(outcome, answered=data.draw(st.booleans()))
                event = Answered(answered, now, resendable=not writes)
            case Tell():
                event = Told(now, breaker_open=data.draw(st.booleans()))
            case AskBudget():
                event = Budget(data.draw(st.booleans()))
            case AskElevation():
                event = Elevation(data.draw(st.booleans()), "the broker said so", {"credential": "c"})
            case Ended():
                break
            case _:
                raise AssertionError(step)
        state, step = transition(POLICY, state, event, random.Random(data.draw(st.integers(0, 99))))
    assert isinstance(step, Ended) and state.phase is Phase.ENDED
    assert state.attempts <= POLICY.max_attempts + state.pushbacks and state.retries <= POLICY.max_retries
    assert state.repairs <= POLICY.max_repairs and state.elevations <= POLICY.max_elevations
    assert len(state.causes) == len(state.decisions)
    if writes:  # a write failing transiently is never retried: it was not resendable
        assert state.retries == state.pushbacks == 0
    assert recovery.report(state, step.outcome).attempts == state.attempts


# --- writes: only what is safe to resend is resent ------------------------------------------------


@given(
    read_only=st.booleans(), idempotent=st.booleans(), takes_key=st.booleans(), keyed=st.booleans(),
    unsent=st.booleans(),
)  # fmt: skip
def test_a_call_is_resendable_only_when_resending_cannot_repeat_an_effect(
    read_only: bool, idempotent: bool, takes_key: bool, keyed: bool, unsent: bool
) -> None:
    """The one rule, over every combination: a read, an idempotent tool, a call carrying the key its
    tool takes, or a call that never reached the tool; nothing else."""
    arguments = {"order_id": "ORD-10031", **({"idempotency_key": "k-12345678"} if keyed else {})}
    effects = ToolEffects(read_only=read_only, idempotent=idempotent, takes_key=takes_key)
    call = recovery.Call("pay_out", arguments)
    expected = read_only or idempotent or (takes_key and keyed) or unsent
    assert recovery.resendable(effects, call, unsent) is expected


def test_the_specification_defaults_make_an_unannotated_tool_a_write_not_resent() -> None:
    """No annotations at all: destructive, not idempotent (MCP's defaults); a key the tool does not
    take in its schema proves nothing."""
    effects = ToolEffects.of(None, {"properties": {"line": {"type": "string"}}})
    assert effects.writes and effects.destructive and not effects.idempotent
    assert not effects.resendable({"line": "x", "idempotency_key": "k-12345678"})
    assert ToolEffects.of({"readOnlyHint": True}).resendable({})
    assert ToolEffects.of({"idempotentHint": True}).resendable({})
    keyed = ToolEffects.of({}, {"properties": {"idempotency_key": {"type": "string"}}})
    assert keyed.resendable({"idempotency_key": "k-12345678"}) and not keyed.resendable({})


def test_the_report_escalates_with_every_field_and_the_partial_results_kept_once() -> None:
    partial = failed(ErrorCategory.TRANSIENT, "busy", partial_results=[{"id": 1}])
    state, _ = answer(sent(start()), partial)
    state, _ = feed(state, Budget(True))
    more = failed(ErrorCategory.BUSINESS, "closed account", partial_results=[{"id": 1}, {"id": 2}])
    state, step = answer(sent(state), more)
    assert isinstance(step, Ended)
    report = recovery.report(state, step.outcome)
    assert report.state == "escalated" and report.escalation is not None
    assert report.escalation.partial_results == [{"id": 1}, {"id": 2}]
    assert report.escalation.attempted_query.arguments == TASK.arguments and report.attempts == 2


def test_a_write_acts_on_its_target_alone_and_its_key_is_no_target() -> None:
    """An asked write and an approval name an order: a call naming another order as well, or the
    asked order only as its idempotency key, is neither."""
    from subagents.writes import AskedWrite

    asked, approved = AskedWrite("issue_refund", "ORD-10031", 45.0), Approval.parse("issue_refund:ORD-10031")
    right = {"order_id": "ORD-10031", "amount": 45, "idempotency_key": "k-1"}
    for wrong in (
        {"order_id": "ORD-10134", "amount": 20, "idempotency_key": "ORD-10031"},
        {"order_id": "ORD-10031", "also": "ORD-10134", "amount": 20, "idempotency_key": "k-2"},
        {"order_id": "ORD-10031", "amount": 46, "idempotency_key": "k-3"},
    ):
        assert not asked.allows("issue_refund", wrong), wrong
    assert asked.allows("issue_refund", right) and approved.covers("issue_refund", right)
    assert not approved.covers("issue_refund", {"order_id": "ORD-10134", "idempotency_key": "ORD-10031"})


def test_the_testing_switch_makes_every_back_off_0_s_and_draws_the_same_jitter() -> None:
    policy, seeded, testing = RecoveryPolicy(), random.Random(7), random.Random(7)
    with set_testing(True):
        assert [policy.backoff_s(retry, testing, retry_after_ms=900) for retry in (1, 2, 3)] == [0.0] * 3
    assert [policy.backoff_s(retry, seeded) for retry in (1, 2, 3)] != [0.0] * 3  # off again at its end
    assert policy.backoff_s(4, testing) == policy.backoff_s(4, seeded)  # the same draws were made
