"""The recovery machine on its own: states and outcomes in, steps out; no source, no clock, no I/O.

Both drivers (the code's loop and the Claude tool loop) ask these functions, so the bounds checked
here are the only ones there are.
"""

from __future__ import annotations

import random
from dataclasses import FrozenInstanceError

import pytest
from hypothesis import given
from hypothesis import strategies as st

from sources.contract import EmptyResult, ErrorCategory, ResultPage, ToolError
from subagents import recovery
from subagents.classify import Outcome
from subagents.policy import RecoveryPolicy, set_testing
from subagents.recovery import (
    Elevate,
    Failed,
    Finish,
    HandOver,
    NotCalled,
    Repair,
    Retry,
    RunState,
    Stop,
    Task,
    after_failure,
    model_repair,
    on_settled,
)
from subagents.writes import ToolEffects

POLICY = RecoveryPolicy()
TASK = Task("lookup", "customers", "customer_lookup", {"identifier": "CUST 42"})


def start(deadline: float = 100.0) -> RunState:
    return RunState.start(TASK, deadline, meta=None)


def failed(category: ErrorCategory, description: str = "no", **fields: object) -> Outcome:
    return Outcome("error", ToolError.of(category, description, **fields), "tool_error")  # type: ignore[arg-type]


def transient_step(state: RunState, *, now: float = 0.0, breaker_open: bool = False, seed: int = 1) -> object:
    error = failed(ErrorCategory.TRANSIENT).error
    assert error is not None
    return after_failure(
        POLICY, state, Failed(error, "timeout", now, breaker_open, resendable=True), random.Random(seed)
    )


def test_a_state_is_a_value_and_each_transition_a_new_one() -> None:
    state = start()
    after = state.attempted().retried().repaired({"identifier": "CUST-00042"})
    assert (state.attempts, state.retries, state.repairs) == (0, 0, 0)
    assert (after.attempts, after.retries, after.repairs) == (1, 1, 1)
    assert after.call.arguments == {"identifier": "CUST-00042"} and state.call.arguments == TASK.arguments
    with pytest.raises(FrozenInstanceError):
        state.attempts = 3  # type: ignore[misc]


@given(retries=st.integers(0, 10), seed=st.integers(0, 2**16))
def test_a_transient_fault_is_retried_until_the_bound_then_given_up(retries: int, seed: int) -> None:
    state = start()
    for _ in range(retries):
        state = state.retried()
    step = transient_step(state, seed=seed)
    if retries < POLICY.max_retries:
        assert isinstance(step, Retry) and 0 <= step.delay_s <= POLICY.max_delay_s
        assert step.reason.startswith(f"retry {retries + 1}/{POLICY.max_retries} after timeout")
    else:
        assert isinstance(step, Stop) and step.action == "give_up" and not step.out_of_time


def test_a_back_off_past_the_deadline_is_not_slept_it_gives_up_out_of_time() -> None:
    step = transient_step(start(deadline=1.0), now=0.999999, seed=3)
    assert isinstance(step, Stop) and step.action == "give_up" and step.out_of_time


def test_a_transient_fault_that_opened_the_breaker_is_not_retried() -> None:
    assert isinstance(transient_step(start(), breaker_open=True), NotCalled)


def test_permission_asks_for_elevation_once_then_hands_over() -> None:
    error = failed(ErrorCategory.PERMISSION, required_scope="billing:read").error
    assert error is not None
    first = after_failure(POLICY, start(), Failed(error, "", 0, False, resendable=True), random.Random(1))
    assert first == Elevate("billing:read")
    used = start().elevated("billing:read", {"credential": "x"})
    second = after_failure(POLICY, used, Failed(error, "", 0, False, resendable=True), random.Random(1))
    assert isinstance(second, HandOver) and "1 elevation already used" in second.reason
    assert used.held_scopes == frozenset({"billing:read"}) and used.call.meta == {"credential": "x"}


@pytest.mark.parametrize("category", [ErrorCategory.BUSINESS, ErrorCategory.VALIDATION])
def test_business_and_validation_are_handed_to_the_decision_maker(category: ErrorCategory) -> None:
    error = failed(category, "stop here").error
    assert error is not None
    step = after_failure(POLICY, start(), Failed(error, "", 0, False, resendable=True), random.Random(1))
    assert step == HandOver("stop here")


def test_what_settled_is_finished_repaired_or_stopped() -> None:
    page = Outcome("ok", ResultPage[dict](result_count=1, results=[{"id": 1}]))  # type: ignore[type-var]
    empty = Outcome("empty", EmptyResult(message="nothing"))
    blocked = Outcome("error", ToolError.of(ErrorCategory.BUSINESS, "over the limit"), "hook_blocked")
    assert on_settled(POLICY, start(), page, "") == Finish(accept_empty=False)
    assert on_settled(POLICY, start(), empty, "") == Finish(accept_empty=True)
    assert on_settled(POLICY, start(), blocked, "over") == Stop("hook_blocked", "over")
    assert on_settled(POLICY, start(), failed(ErrorCategory.BUSINESS), "why") == Stop("escalate", "why")
    repaired = on_settled(POLICY, start(), failed(ErrorCategory.VALIDATION), "")
    assert isinstance(repaired, Repair) and repaired.arguments == {"identifier": "CUST-00042"}


def test_a_validation_error_nothing_can_repair_escalates() -> None:
    state = start().calling("customer_lookup", {"identifier": "???"})
    step = on_settled(POLICY, state, failed(ErrorCategory.VALIDATION, "bad identifier"), "")
    assert isinstance(step, Stop) and step.action == "escalate" and "no repair applies" in step.reason


@given(by_code=st.integers(0, 3), by_model=st.integers(0, 3))
def test_the_code_and_the_model_spend_one_repair_budget(by_code: int, by_model: int) -> None:
    """Repairs are counted by one transition whoever makes them, and bounded by one check."""
    state = start()
    for _ in range(by_code):
        state = state.repaired({"identifier": "CUST-00042"})
    for _ in range(by_model):
        step = model_repair(POLICY, state, {"identifier": "CUST-00043"})
        assert step.reason.startswith(f"repair {state.repairs + 1}/{POLICY.max_repairs} by the model")
        state = state.repaired(step.arguments)
    assert state.repairs == by_code + by_model
    error = failed(ErrorCategory.VALIDATION, "still bad").error
    assert error is not None
    spent = recovery.repairs_spent(POLICY, state, error)
    repairable = state.calling("customer_lookup", {"identifier": "cust 7"})
    settled = on_settled(POLICY, repairable, failed(ErrorCategory.VALIDATION, "still bad"), "")
    if state.repairs >= POLICY.max_repairs:
        assert spent == settled == Stop("escalate", f"{state.repairs} repairs spent: still bad")
    else:
        assert spent is None and isinstance(settled, Repair)


def test_the_call_budget_is_the_policy_s() -> None:
    state = start()
    for _ in range(POLICY.max_attempts - 1):
        state = state.attempted()
    assert not recovery.calls_spent(POLICY, state)
    assert recovery.calls_spent(POLICY, state.attempted())


def test_the_report_escalates_with_every_field_and_the_partial_results_kept_once() -> None:
    state = start().attempted().keeping([{"id": 1}]).keeping([{"id": 1}, {"id": 2}])
    report = recovery.report(state, failed(ErrorCategory.BUSINESS, "closed account"))
    assert report.state == "escalated" and report.escalation is not None
    assert report.escalation.partial_results == [{"id": 1}, {"id": 2}]
    assert report.escalation.attempted_query.arguments == TASK.arguments and report.attempts == 1


# --- writes: only what is safe to resend is resent ------------------------------------------------

WRITE = Task("pay", "billing", "pay_out", {"order_id": "ORD-10031", "amount": 45.0})


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


@given(
    retries=st.integers(0, 5),
    breaker_open=st.booleans(),
    cause=st.sampled_from(["timeout", "connection_closed", "tool_error", "garbage"]),
)
def test_a_write_that_may_have_acted_ends_with_its_outcome_unknown_never_a_retry(
    retries: int, breaker_open: bool, cause: str
) -> None:
    """Whatever the retries left and the breaker say, a transient failure of a write that is not safe
    to resend is a stop whose error says the outcome is unknown, what was attempted and what to check."""
    state = RunState.start(WRITE, 100.0, meta=None).attempted()
    for _ in range(retries):
        state = state.retried()
    error = failed(ErrorCategory.TRANSIENT, "briefly unavailable").error
    assert error is not None
    step = after_failure(
        POLICY, state, Failed(error, cause, 0.0, breaker_open, resendable=False), random.Random(1)
    )
    assert isinstance(step, Stop) and step.action == "outcome_unknown"
    assert step.error is not None and step.error.error_category is ErrorCategory.BUSINESS
    assert not step.error.is_retryable
    assert (
        "may or may not have acted" in step.error.description
        and "It was not sent again" in step.error.description
    )
    assert step.error.attempted_query is not None and step.error.attempted_query.tool == "pay_out"


def test_a_write_refused_before_acting_is_still_recovered() -> None:
    """Validation and permission say the write did not act: repair and elevation still apply."""
    state = RunState.start(WRITE, 100.0, meta=None).attempted()
    denied = failed(ErrorCategory.PERMISSION, "needs billing:refund", required_scope="billing:refund").error
    assert denied is not None
    step = after_failure(
        POLICY, state, Failed(denied, "tool_error", 0.0, False, resendable=False), random.Random(1)
    )
    assert isinstance(step, Elevate)


def test_a_write_acts_on_its_target_alone_and_its_key_is_no_target() -> None:
    """An asked write and an approval name an order: a call naming another order as well, or the
    asked order only as its idempotency key, is neither."""
    from subagents.writes import Approval, AskedWrite

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
