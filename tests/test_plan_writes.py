"""A question that asks for a refund plans it after the check it needs; a question of eligibility plans
the check alone; what cannot be honoured as asked is listed as not done (``coordinator.planning.planner``)."""

from __future__ import annotations

import re
from typing import Any

import anyio
import pytest
from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey

from coordinator.core import DEFAULT_GRANTS, Config, Coordinator
from coordinator.planning.plan import Plan, PlannedTask, Ref
from coordinator.planning.planner import plan_query
from coordinator.run import DEADLINE_GRACE_S
from sources.faults import FaultSettings
from sources.settings import SourceSettings
from subagents.broker import CredentialBroker, Grant
from subagents.sessions.connection import Target
from tests.conftest import MODULES
from tests.fakes import FakeClock

KEY = re.compile(r"^q-[0-9a-f]{16}$")


def refunds(plan: Plan) -> list[PlannedTask]:
    return [task for task in plan.order() if task.tool == "issue_refund"]


def the_refund_after_its_check(plan: Plan) -> tuple[PlannedTask, PlannedTask]:
    (refund,) = refunds(plan)
    check = plan.tasks["refund"]
    assert check.tool == "refund_eligibility" and check.id in refund.depends_on
    assert refund.arguments["order_id"] == check.arguments["order_id"]
    assert refund.arguments["amount"] == check.arguments["amount"]  # the same value, or the same Ref
    assert KEY.match(refund.arguments["idempotency_key"])
    assert refund.source == "billing" and refund.purpose != check.purpose == "refund research"
    return check, refund


def test_a_refund_asked_now_is_planned_after_its_eligibility_check() -> None:
    query = "Refund £45 on ORD-10031 now, the jug leaked"
    plan = plan_query(query)
    check, refund = the_refund_after_its_check(plan)
    assert check.arguments == {"order_id": "ORD-10031", "amount": 45.0}
    assert refund.depends_on == ("refund",)
    assert refund.why == "the question asks to refund £45.00 on ORD-10031: 'Refund £45 on ORD-10031'"
    assert plan.unplanned == ()
    assert [task.id for task in plan.order()][-1] == "issue_refund"


def test_an_issued_refund_of_an_amount_is_planned_for_that_amount() -> None:
    plan = plan_query("issue a £20 refund on ORD-10031")
    check, refund = the_refund_after_its_check(plan)
    assert check.arguments == {"order_id": "ORD-10031", "amount": 20.0} and refund.arguments["amount"] == 20.0
    assert refund.why.startswith("the question asks to refund £20.00 on ORD-10031: 'issue a £20 refund")


def test_a_refund_in_full_takes_the_amount_from_the_orders_lookup() -> None:
    plan = plan_query("refund ORD-10031 in full")
    check, refund = the_refund_after_its_check(plan)
    assert check.arguments == {"order_id": "ORD-10031", "amount": Ref("order", "total")}
    assert refund.arguments["amount"] == Ref("order", "total")
    assert set(refund.depends_on) == {"order", "refund"} and plan.tasks["order"].tool == "get_order"
    assert (
        refund.why
        == "the question asks to refund ORD-10031 in full (the order's total): 'refund ORD-10031 in full'"
    )


@pytest.mark.parametrize(
    "query",
    [
        "Is a £45 refund on ORD-10031 allowed? This is not about ORD-10134.",
        "Investigate CUST-00042: recent orders, and is a £45 refund on ORD-10031 allowed?",
        "can we refund £45 on ORD-10031?",
        "the customer asked us to refund £45 on ORD-10031",
        "do not refund £45 on ORD-10031",
        "refund 45 quid on ORD-10031?",
        "can ORD-10023 be refunded in full?",
    ],
)
def test_a_question_of_eligibility_plans_the_check_alone(query: str) -> None:
    plan = plan_query(query)
    assert refunds(plan) == []
    assert any(task.tool == "refund_eligibility" for task in plan.tasks.values())


def test_the_same_question_twice_makes_the_same_key_and_another_question_another() -> None:
    key = refunds(plan_query("Refund £45 on ORD-10031 now"))[0].arguments["idempotency_key"]
    assert refunds(plan_query("refund  £45 on ORD-10031   NOW"))[0].arguments["idempotency_key"] == key
    others = [
        "Refund £45 on ORD-10031 now please",
        "Refund £40 on ORD-10031 now",
        "Refund £45 on ORD-10022 now",
    ]
    assert key not in {refunds(plan_query(query))[0].arguments["idempotency_key"] for query in others}


def test_two_refunds_asked_are_two_tasks_each_after_its_own_check() -> None:
    plan = plan_query("Refund £45 on ORD-10031 and £20 on ORD-10022")
    planned = {task.arguments["order_id"]: task for task in refunds(plan)}
    assert {order: task.arguments["amount"] for order, task in planned.items()} == {
        "ORD-10031": 45,
        "ORD-10022": 20,
    }
    for order, task in planned.items():
        (check,) = (plan.tasks[upstream] for upstream in task.depends_on)
        assert check.tool == "refund_eligibility" and check.arguments["order_id"] == order
    keys = {task.arguments["idempotency_key"] for task in planned.values()}
    assert len(keys) == 2


@pytest.mark.parametrize(
    ("query", "what", "why"),
    [
        (
            "refund £45 on ORD-10031 and ORD-10022",
            "a refund on ORD-10031 and ORD-10022",
            "2 orders for one refund",
        ),
        ("refund £45 or £60 on ORD-10031", "a refund on ORD-10031", "2 amounts for one refund"),
        (
            "refund £45 on ORD-10031 if the customer returns it",
            "a refund on ORD-10031",
            "research cannot decide",
        ),
        ("refund ORD-10031", "a refund on ORD-10031", "no amount"),
    ],
)
def test_a_refund_that_cannot_be_honoured_as_asked_is_listed_not_done(
    query: str, what: str, why: str
) -> None:
    plan = plan_query(query)
    assert refunds(plan) == []
    assert any(item.what == what and why in item.why and item.next_step for item in plan.unplanned), (
        plan.unplanned
    )


def test_the_broker_grants_the_refund_only_where_the_user_granted_it() -> None:
    (refund,) = refunds(plan_query("Refund £45 on ORD-10031 now"))
    check = plan_query("Refund £45 on ORD-10031 now").tasks["refund"]
    key = Ed25519PrivateKey.generate()
    broker = CredentialBroker(key, grants=DEFAULT_GRANTS)
    assert broker.elevate("billing:read", check.purpose, source="billing").granted
    assert not broker.elevate("billing:refund", refund.purpose, source="billing").granted
    # a grant for refund research does not pay: the refund's purpose is its own
    research = CredentialBroker(key, grants=(*DEFAULT_GRANTS, Grant("billing:refund", "refund research")))
    assert not research.elevate("billing:refund", refund.purpose, source="billing").granted
    given = CredentialBroker(key, grants=(*DEFAULT_GRANTS, Grant("billing:refund")))  # --grant billing:refund
    assert given.elevate("billing:refund", refund.purpose, source="billing").granted


def _in_memory(settings: SourceSettings) -> dict[str, Target]:
    """The five sources in this process (as ``tests/test_coordinator.py`` runs them)."""
    return {
        source: _serving(module.create_server(settings.with_faults(FaultSettings())))
        for source, module in MODULES.items()
    }


def _serving(server: Any) -> Target:
    return lambda: server


@pytest.mark.anyio
async def test_a_refund_its_check_refuses_is_blocked_and_says_why(settings: SourceSettings) -> None:
    """£750 is above the automatic limit: the check escalates, and the refund never runs."""
    query = "Refund £750 on ORD-10023 now, it never arrived"
    config = Config(settings, grants=(*DEFAULT_GRANTS, Grant("billing:refund")))
    with anyio.fail_after(30 + DEADLINE_GRACE_S + 20):
        async with Coordinator(config, targets=_in_memory(settings), clock=FakeClock()) as coordinator:
            report = await coordinator.research(query, deadline_s=30, seed=1, record=False)
    states = {task.id: task.state for task in report.tasks}
    assert states["refund"] == "escalated" and states["issue_refund"] == "blocked"
    (gap,) = [gap for gap in report.gaps if gap.task == "issue_refund"]
    assert gap.blocked_by == "refund" and "blocked by refund (escalated)" in gap.message
    assert "limit" in gap.message
    assert report.status == "partial"
