"""The intent rules as a table of named rules: the plan names those that fired, and every rule the
planner corpus cites is written down (coordinator.planning.rules)."""

from __future__ import annotations

import random
import re
from pathlib import Path

import pytest

from coordinator.planning.planner import plan_query
from coordinator.planning.rules import ELSEWHERE, RULES
from sources.world import build_world

CORPUS = Path(__file__).parent / "planner_corpus.toml"


@pytest.mark.parametrize(
    ("query", "fired"),
    [
        ("what's going on with ORD-10023?", "rule 4: an order alone is the order and its tickets"),
        ("cracked grinder lid", "rule 12: a product or symptom alone is tickets and policies"),
        ("everything on ORD-10023", "rule 11: everything is about a customer"),
        ("was she ever refunded? jane.doe@example.com", "rule 7: whether a refund was paid is asked of the invoices"),
    ],
)  # fmt: skip
def test_the_plan_names_the_rules_that_fired(query: str, fired: str) -> None:
    plan = plan_query(query)
    assert fired in plan.rules
    assert fired in plan.describe()["rules"]


def test_a_plan_no_rule_changed_names_none() -> None:
    plan = plan_query("orders of CUST-00042")
    assert plan.rules == ()
    assert "rules" not in plan.describe()


def test_every_rule_the_corpus_cites_is_written_down() -> None:
    cited = {
        int(n)
        for group in re.findall(r"rules? ([\d ,and-]+)", CORPUS.read_text())
        for n in re.findall(r"\d+", group)
    }
    written = {int(n) for rule in RULES for n in re.findall(r"\d+", rule.name.split(":")[0])}
    written |= {int(name.split()[1]) for name in ELSEWHERE}
    assert cited <= written, f"rules cited but not written down: {sorted(cited - written)}"
    assert len({rule.name for rule in RULES}) == len(RULES)


def _policy_titles() -> list[str]:
    """Titles of the demo world's policy articles, drawn with seed 42."""
    from sources.world import build_world

    titles = [policy["title"].lower() for policy in build_world(42).tables["kb"]["policies"]]
    return random.Random(42).sample(titles, 3)


@pytest.mark.parametrize("title", _policy_titles())
@pytest.mark.parametrize(
    "phrasing",
    [
        "look up the {title} policy",
        "Look up our policy on {title} please",
        "can you look up the {title} article?",
    ],
)
def test_a_policy_looked_up_asks_no_customer(phrasing: str, title: str) -> None:
    plan = plan_query(phrasing.format(title=title))
    assert [task.tool for task in plan.tasks.values()] == ["search_policies"]
    assert not [item.what for item in plan.unplanned if "customer" in item.what], plan.unplanned
    assert "rule 10: a policy looked up asks no customer" in plan.rules


@pytest.mark.parametrize(
    "email",
    [
        "jane.doe@example.com",
        "graeme.matthews@example.com",
        "christopher.featherstonehaugh@mail.example.co.uk",
    ],
)
@pytest.mark.parametrize(
    ("phrasing", "searches_policies"),
    [
        ("The money of his return, it is arrived on his account or still not? {email}", False),
        ("has the money for {email}'s return gone through yet?", False),
        ("has the refund for {email}'s returns come through? and what's the returns policy if not?", True),
        ("has the money for {email}'s return gone through? what do we do if it hasn't", True),
    ],
)  # fmt: skip
def test_whether_a_return_s_money_came_through_is_no_policy_question(
    phrasing: str, searches_policies: bool, email: str
) -> None:
    """Rule 7: "the money of his return" names what the money is for; a policy asked in other words stays."""
    plan = plan_query(phrasing.format(email=email))
    tools = {task.tool for task in plan.tasks.values()}
    assert "list_invoices" in tools
    assert ("search_policies" in tools) is searches_policies


def _customers_drawn() -> list[dict[str, str]]:
    """Customers of the demo world (seed 42): the three with the longest emails and three at random."""
    customers = build_world(42).tables["customers"]["customers"]
    longest = sorted(customers, key=lambda c: -len(c["email"]))[:3]
    return longest + random.Random(45).sample([c for c in customers if c not in longest], 3)


@pytest.mark.parametrize("customer", _customers_drawn(), ids=lambda c: c["id"])
@pytest.mark.parametrize("named_by", ["email", "name", "id"])
@pytest.mark.parametrize(
    "phrasing",
    [
        "has the refund for {who}'s return come through yet?",
        "{who}: did the money for the order they sent back ever go back on their card?",
        "Has {who}'s refund been paid out?",
        "can you check whether the refund to {who} has gone through",
        "the money of {who}'s return, is it arrived on the account or still not?",
    ],
)  # fmt: skip
def test_whether_a_customer_s_refund_came_through_is_asked_of_the_invoices(
    phrasing: str, named_by: str, customer: dict[str, str]
) -> None:
    """Rule 7, on generated phrasings: however long the email or name, the invoices answer it."""
    plan = plan_query(phrasing.format(who=customer[named_by]))
    tools = {task.tool for task in plan.tasks.values()}
    assert {"list_invoices", "search_orders"} <= tools, plan.describe()
    assert "refund_eligibility" not in tools


@pytest.mark.parametrize("customer", _customers_drawn()[:3], ids=lambda c: c["id"])
@pytest.mark.parametrize("hedge", ["I think", "I reckon", "I believe", "I suspect", "I guess"])
def test_a_hedge_frames_what_is_asked_and_is_not_left_unread(hedge: str, customer: dict[str, str]) -> None:
    """ "I think you still took the money": what someone believes is the ask, the hedge no gap."""
    plan = plan_query(f"Im {customer['name']}. My order got cancelled but {hedge} you still took the money??")
    assert "list_invoices" in {task.tool for task in plan.tasks.values()}
    assert not [item for item in plan.unplanned if hedge.split()[1] in item.what.lower()], plan.unplanned


@pytest.mark.parametrize("amount", ["£45", "£7.99", "£1,250.50", "£300"])
@pytest.mark.parametrize(
    "phrasing",
    [
        "{email} - has the {amount} been paid back to her yet?",
        "has the {amount} gone back on {email}'s card?",
        "{email}: the {amount} refund, has it come through?",
    ],
)  # fmt: skip
def test_an_amount_that_moved_back_is_looked_for_in_the_invoices(phrasing: str, amount: str) -> None:
    """Rule 7 with the money said as an amount: the invoices' refunded amounts answer it, no refund check."""
    plan = plan_query(phrasing.format(email="graeme.matthews@example.com", amount=amount))
    assert "list_invoices" in {task.tool for task in plan.tasks.values()}
    assert "refund_eligibility" not in {task.tool for task in plan.tasks.values()}
    assert not [item for item in plan.unplanned if "amount" in item.what], plan.unplanned


def test_an_amount_that_went_out_is_a_charge_not_a_refund_paid() -> None:
    plan = plan_query("Colin Lloyd here. I cancelled ORD-10024 but £76 still went out. Please refund it.")
    assert "rule 7: whether a refund was paid is asked of the invoices" not in plan.rules


@pytest.mark.parametrize("order", ["ORD-10004", "ORD-10451"])
@pytest.mark.parametrize(
    "phrasing",
    [
        "a £40 refund on {order} - will it go through?",
        "would £40 on {order} go through?",
        "see whether £40 on {order} would go thru",
        "£40 back on {order}: does that go through or not?",
    ],
)  # fmt: skip
def test_whether_a_refund_would_go_through_is_its_check(phrasing: str, order: str) -> None:
    """ "Will it go through?" asks whether the refund would be allowed: its check, and no word left unread."""
    plan = plan_query(phrasing.format(order=order))
    assert [task.arguments for task in plan.tasks.values() if task.tool == "refund_eligibility"] == [
        {"order_id": order, "amount": 40.0}
    ]
    assert not [item for item in plan.unplanned if "thr" in item.what], plan.unplanned


@pytest.mark.parametrize("customer", _customers_drawn()[3:], ids=lambda c: c["id"])
@pytest.mark.parametrize(
    ("phrasing", "paid"),
    [
        ("has {email} got her refund from us?", True),
        ("did {id} ever receive their money back?", True),
        ("{name} - did she actually get her refund?", True),
        ("can {email} get her money back on ORD-10031?", False),
    ],
)  # fmt: skip
def test_whether_they_got_their_refund_is_asked_of_the_invoices(
    phrasing: str, paid: bool, customer: dict[str, str]
) -> None:
    """Rule 7 in the customer's words: had, got, received; "can she get her money back" is no such ask."""
    plan = plan_query(phrasing.format(**customer))
    fired = "rule 7: whether a refund was paid is asked of the invoices" in plan.rules
    assert fired is paid, plan.describe()


@pytest.mark.parametrize("customer", _customers_drawn()[3:], ids=lambda c: c["id"])
@pytest.mark.parametrize(
    "phrasing",
    [
        "what's {name} had from us?",
        "can you tell us what {name}'s had from us? Ta",
        "what has {email} got from you",
    ],
)
def test_what_someone_has_had_from_us_is_their_orders(phrasing: str, customer: dict[str, str]) -> None:
    plan = plan_query(phrasing.format(**customer))
    assert "search_orders" in {task.tool for task in plan.tasks.values()}, plan.describe()


@pytest.mark.parametrize("order", ["ORD-10023", "ORD-10899"])
@pytest.mark.parametrize(
    "phrasing",
    [
        "where is the parcel for {order} right now?",
        "can you check {order} right away",
        "status of {order} as we speak",
    ],
)
def test_when_said_emphatically_is_no_ask_and_no_refund(phrasing: str, order: str) -> None:
    """ "Right now" is when, not "make it right": no refund read, and no word of it left unread."""
    plan = plan_query(phrasing.format(order=order))
    assert {task.tool for task in plan.tasks.values()} == {"get_order", "search_tickets"}, plan.describe()
    assert plan.unplanned == (), plan.unplanned


@pytest.mark.parametrize("customer", _customers_drawn()[3:], ids=lambda c: c["id"])
@pytest.mark.parametrize("named_by", ["email", "name", "id"])
@pytest.mark.parametrize(
    ("phrasing", "tool"),
    [
        ("did we pay {who} back?", "list_invoices"),
        ("have we refunded {who} yet", "list_invoices"),
        ("any open cases for {who}?", "search_tickets"),
        ("has {who} got a case logged with us", "search_tickets"),
    ],
)  # fmt: skip
def test_a_customer_asked_about_in_other_words_is_not_complete_with_their_lookup_alone(
    phrasing: str, tool: str, named_by: str, customer: dict[str, str]
) -> None:
    """Found by a probe of other phrasings: each was planned complete with the customer's lookup alone."""
    plan = plan_query(phrasing.format(who=customer[named_by]))
    assert tool in {task.tool for task in plan.tasks.values()}, plan.describe()
