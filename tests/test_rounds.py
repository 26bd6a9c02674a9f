"""Research in rounds (issue 45): the plan grows from what the first round found.

Each of the issue's samples through the five real sources, in memory: the follow-up task's arguments
come from the record the first round found (its id, its total), it says which finding it follows and
why, and the trace shows a ``plan`` span per round.
"""

from __future__ import annotations

import calendar
import functools
import random
from collections import Counter
from collections.abc import Callable
from typing import Any

import pytest
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter

from coordinator.planning.plan import FollowUp, Plan, PlannedTask, Ref
from coordinator.planning.planner import plan_query
from coordinator.planning.rounds import MOST_CHOSEN, next_round
from coordinator.reporting.report import ResearchReport, TaskSummary
from sources.domain import pounds
from sources.faults import FaultSettings
from sources.settings import SourceSettings
from sources.world import World, build_world
from tests.conftest import MODULES, call, credential, wire
from tests.test_coordinator import ask, in_memory
from traces import attributes as names

pytestmark = pytest.mark.anyio


def follow_ups(report: ResearchReport) -> list[TaskSummary]:
    return [task for task in report.tasks if task.follows]


async def orders_of(settings: SourceSettings, customer_id: str) -> list[dict[str, Any]]:
    """A customer's orders as the orders source gives them, through the mcp Client."""
    result = await call(
        MODULES["orders"].create_server(settings), "search_orders", {"customer_id": customer_id},
        credential("orders:read", source="orders"),
    )  # fmt: skip
    return list(wire(result)["results"])


async def test_mr_patels_grinder_in_full_is_checked_on_the_grinder_order_at_its_total(
    settings: SourceSettings,
) -> None:
    report = await ask(settings, "can we still refund Mr Patel's grinder in full?")
    customer = next(task for task in report.tasks if task.tool == "find_customers")
    assert customer.arguments == {"name": "Patel"}
    found = await orders_of(settings, "CUST-00076")  # Carl Patel's orders, as the first round found them
    (grinder,) = [o for o in found if any("grinder" in i["description"].lower() for i in o["items"])]
    (check,) = follow_ups(report)
    assert (check.tool, check.arguments) == (
        "refund_eligibility",
        {"order_id": grinder["id"], "amount": grinder["total"]},
    )
    assert check.follows == f"orders:{grinder['id']}" and "grinder" in check.why and "its total" in check.why
    assert check.depends_on == ["orders"]
    # billing answers for that order: outside the refund window, a gap, so the answer is partial
    assert report.status == "partial" and [gap.task for gap in report.gaps] == [check.id]


async def test_her_espresso_machine_of_750_is_the_order_the_refund_is_checked_on(
    settings: SourceSettings,
) -> None:
    query = "CUST-00042: her orders, any complaint about the espresso machine, and whether we'd refund the whole £750"
    report = await ask(settings, query)
    (check,) = follow_ups(report)
    assert (check.tool, check.arguments) == ("refund_eligibility", {"order_id": "ORD-10023", "amount": 750.0})
    assert "its total is £750.00" in check.why and "espresso machine" in check.why
    assert {task.tool for task in report.tasks} >= {"search_orders", "search_tickets", "refund_eligibility"}
    (gap,) = report.gaps  # £750 is above the automatic limit: a manager's call
    assert gap.task == check.id and gap.error_category == "business"


async def test_has_the_refund_been_paid_is_answered_from_the_invoices(settings: SourceSettings) -> None:
    query = (
        "What did Emily McCarthy buy in September, and has the refund for the one she sent back been paid?"
    )
    plan = plan_query(query)
    tools = sorted(task.tool for task in plan.tasks.values())
    assert tools == ["find_customers", "list_invoices", "search_orders"]  # no policy search, no eligibility
    report = await ask(settings, query)
    assert report.status == "complete"
    cited = {finding.citation for finding in report.findings}
    assert {"orders:search_orders:ORD-10830", "billing:list_invoices:INV-40830"} <= cited


@pytest.mark.parametrize(
    "query",
    [
        "What did Emily McCarthy buy in September, and has the refund for the one she sent back been paid?",
        "emily.mccarthy@example.org - has her refund come through yet?",
        "was CUST-00278 ever refunded for the scale?",
    ],
)
async def test_a_refund_paid_ask_is_never_complete_without_the_invoices(
    settings: SourceSettings, query: str
) -> None:
    assert "search_policies" not in {task.tool for task in plan_query(query).tasks.values()}
    down = in_memory(settings, {"billing": FaultSettings(transient=1.0)})
    report = await ask(settings, query, targets=down)
    assert report.status == "partial"
    assert [gap.source for gap in report.gaps] == ["billing"]


async def test_a_second_check_a_third_of_the_first_is_made_when_billing_refuses_the_first(
    settings: SourceSettings,
) -> None:
    report = await ask(settings, "£900 back on ORD-10023 OK? If not, what about a third of it?")
    checks = [task for task in report.tasks if task.tool == "refund_eligibility"]  # beside a policy search
    first = next(task for task in checks if not task.follows)
    (second,) = follow_ups(report)
    assert first.arguments == {"order_id": "ORD-10023", "amount": 900.0} and first.state == "escalated"
    assert second.arguments == {"order_id": "ORD-10023", "amount": 300.0} and second.state == "ok"
    assert second.follows == f"{first.id}:refused"


async def test_no_second_check_when_the_first_is_allowed(settings: SourceSettings) -> None:
    report = await ask(settings, "£20 back on ORD-10031 OK? If not, what about half of it?")
    assert [task.arguments["amount"] for task in report.tasks if task.tool == "refund_eligibility"] == [20.0]
    assert follow_ups(report) == []


async def test_kb_returns_three_steps_out_passes_the_depth(settings: SourceSettings) -> None:
    report = await ask(settings, "KB-RETURNS and everything linked to it, three steps out")
    (related,) = report.tasks
    assert (related.tool, related.arguments) == ("related_policies", {"article_id": "KB-RETURNS", "depth": 3})
    assert report.status == "complete"


async def test_several_orders_matching_where_one_is_meant_is_a_gap_listing_them(
    settings: SourceSettings,
) -> None:
    report = await ask(settings, "Denise Jones wants the £258 back for the grinders, OK to refund?")
    assert follow_ups(report) == []  # nothing is checked that the question did not pick
    (ambiguous,) = [item for item in report.unplanned if "ambiguous" in item.why]
    assert "ORD-10708" in ambiguous.why and "ORD-10711" in ambiguous.why
    assert report.status == "partial"


async def test_the_trace_has_a_plan_span_per_round_and_the_finding_each_follow_up_follows(
    settings: SourceSettings, spans: InMemorySpanExporter
) -> None:
    report = await ask(settings, "can we still refund Mr Patel's grinder in full?")
    (check,) = follow_ups(report)
    finished = spans.get_finished_spans()
    plans = [span for span in finished if span.name == "plan"]
    assert [(span.attributes or {})[names.PLAN_ROUND] for span in plans] == [1, 2]
    assert list((plans[1].attributes or {})[names.PLAN_TASKS]) == [check.id]
    (subagent,) = [s for s in finished if (s.attributes or {}).get(names.TASK_ID) == check.id]
    assert (subagent.attributes or {})[names.TASK_FOLLOWS] == check.follows
    assert plans[1].start_time is not None and subagent.start_time is not None
    assert plans[1].start_time < subagent.start_time  # Jaeger shows the round before what it added


def _awaiting(follow_up: FollowUp) -> Plan:
    customer = Ref("customer", "id")
    tasks = [
        PlannedTask("customer", "customers", "customer_lookup", {"identifier": "CUST-00042"}),
        PlannedTask("orders", "orders", "search_orders", {"customer_id": customer}, depends_on=("customer",)),
    ]
    return Plan.of("q", tasks, follow_ups=(follow_up,))


def _order(order_id: str, total: float, *items: str, status: str = "delivered") -> dict[str, Any]:
    return {
        "id": order_id, "total": total, "status": status, "placed_on": "2026-10-01",
        "items": [{"description": item} for item in items],
    }  # fmt: skip


def test_nothing_is_added_that_the_findings_do_not_justify() -> None:
    plan = _awaiting(FollowUp("refund", "orders", share=1.0, words=("grinder",)))
    grown = next_round(plan, {"orders": []})
    assert grown is not None and set(grown.tasks) == set(plan.tasks)
    (gap,) = grown.unplanned
    assert "no order of the customer was found" in gap.why
    kettle = next_round(plan, {"orders": [_order("ORD-1", 40.0, "Kettle")]})
    assert kettle is not None and set(kettle.tasks) == set(plan.tasks)
    assert "none of the customer's orders matches" in kettle.unplanned[0].why


def test_tickets_on_them_are_each_orders_up_to_the_bound() -> None:
    plan = _awaiting(FollowUp("tickets", "orders", status="processing", each=True))
    found = [_order(f"ORD-{n}", 10.0, "Cups", status="processing") for n in range(MOST_CHOSEN)]
    grown = next_round(plan, {"orders": [*found, _order("ORD-9", 5.0, "Jug")]})
    assert grown is not None
    added = [task for task in grown.order() if task.follows]
    assert sorted(task.arguments["order_id"] for task in added) == [o["id"] for o in found]
    too_many = next_round(plan, {"orders": [*found, _order("ORD-8", 1.0, status="processing")]})
    assert too_many is not None and not [task for task in too_many.order() if task.follows]
    assert too_many.unplanned and "ORD-8" in too_many.unplanned[0].why


def test_the_rounds_are_bounded() -> None:
    plan = _awaiting(FollowUp("refund", "orders", share=0.5, words=("grinder",)))
    grown = next_round(plan, {"orders": [_order("ORD-1", 100.0, "Burr coffee grinder")]})
    assert grown is not None and grown.rounds == 2 and grown.follow_ups == ()
    (check,) = [task for task in grown.order() if task.follows]
    assert check.arguments == {"order_id": "ORD-1", "amount": 50.0}
    assert next_round(grown, {}) is None  # nothing left to follow


async def test_a_refund_of_no_amount_on_the_one_she_sent_back_names_the_candidates(
    settings: SourceSettings,
) -> None:
    report = await ask(
        settings, "georgina.gibson@example.net returned stuff - can we refund the one she sent back?"
    )
    assert follow_ups(report) == [] and report.status == "partial"
    (candidates,) = [item for item in report.unplanned if "ORD-" in item.why]
    assert "ORD-10383" in candidates.why and "ORD-10384" in candidates.why and "returned" in candidates.why


async def test_a_count_the_question_states_is_the_searchs_limit(settings: SourceSettings) -> None:
    report = await ask(settings, "George Davey's three most recent tickets please")
    (tickets,) = [task for task in report.tasks if task.tool == "search_tickets"]
    assert tickets.arguments["limit"] == 3
    assert len([f for f in report.findings if f.tool == "search_tickets"]) <= 3


# --- issue 45, blind set 4: records reached through another record, and has-the-money-moved asks ----
# Generated from the demo world (seed 42): several phrasings x several records drawn from it.


@functools.cache
@functools.cache
def _world() -> World:
    """The demo world of seed 42, built once: the sets below are drawn from it."""
    return build_world(42)


def _world_orders() -> tuple[dict[str, Any], ...]:
    return tuple(_world().tables["orders"]["orders"])


def _drawn(count: int, keep: Callable[[dict[str, Any]], bool] = lambda order: True) -> list[dict[str, Any]]:
    """``count`` orders of the demo world, drawn with seed 42 among those ``keep`` accepts."""
    return random.Random(42).sample([order for order in _world_orders() if keep(order)], count)


@pytest.mark.parametrize("order", [order["id"] for order in _drawn(3)])
@pytest.mark.parametrize(
    ("phrasing", "tool", "arguments"),
    [
        ("{id} - what else has that customer ordered from us?", "search_orders", {}),
        ("who placed {id}, and what else have they bought?", "search_orders", {}),
        ("Whoever placed {id}: pull up their other orders", "search_orders", {}),
        ("Who placed {id}? Pull any other open tickets that customer has.", "search_tickets", {"status": "open"}),
    ],
)  # fmt: skip
def test_the_other_records_of_an_orders_customer_are_searched_by_its_customer_id(
    order: str, phrasing: str, tool: str, arguments: dict[str, Any]
) -> None:
    plan = plan_query(phrasing.format(id=order))
    (search,) = [task for task in plan.tasks.values() if task.tool == tool]
    lookup = next(task for task in plan.tasks.values() if task.tool == "get_order")
    assert lookup.arguments == {"order_id": order}
    assert search.arguments == {"customer_id": Ref(lookup.id, "customer_id"), **arguments}, search.arguments


_PAID_ASKS = (
    "has teh refnd for {order} gone thru??",
    "{order} was sent back - did the money ever go back to the customer?",
    "did the refund for {order} go back on the card?",
    "has the refund for {email} come through?",
    "Writing for {email}. The money of his return, it is arrived on his account or still not?",
    "{name} thinks we still took the money for the cancelled order",
)


def _customer_of(order: dict[str, Any]) -> dict[str, Any]:
    return next(c for c in _world().tables["customers"]["customers"] if c["id"] == order["customer_id"])


@pytest.mark.parametrize(
    "order", _drawn(3, lambda order: order["status"] == "returned"), ids=lambda o: o["id"]
)
@pytest.mark.parametrize("phrasing", _PAID_ASKS)
def test_has_the_money_gone_back_in_other_words_is_asked_of_the_invoices(
    order: dict[str, Any], phrasing: str
) -> None:
    customer = _customer_of(order)
    query = phrasing.format(order=order["id"], email=customer["email"], name=customer["name"])
    tools = {task.tool for task in plan_query(query).tasks.values()}
    assert "list_invoices" in tools and "refund_eligibility" not in tools, (query, tools)


async def test_an_order_picked_by_its_items_among_several_is_a_gap_naming_each(
    settings: SourceSettings,
) -> None:
    """ "Scott Knowles cafetiere order": the orders whose items hold the product named, listed where
    several match and one is meant; never complete."""
    rng, asked = random.Random(42), 0
    for customer_id in sorted({o["customer_id"] for o in _world_orders()}):
        found = await orders_of(settings, customer_id)
        products = Counter(
            item["description"] for o in found for item in {i["description"]: i for i in o["items"]}.values()
        )
        shared = sorted(name for name, count in products.items() if count >= 2)
        customer = next(c for c in _world().tables["customers"]["customers"] if c["id"] == customer_id)
        if not shared or customer_id in {"CUST-00001", "CUST-00013"}:
            continue
        product = rng.choice(shared)
        word = product.split(",")[0].lower()
        phrasing = rng.choice(["can u check {c} {p} order", "{c}'s {p} order — what's going on with it?"])
        query = phrasing.format(c=customer["email"], p=word)
        matching = [o["id"] for o in found if any(i["description"] == product for i in o["items"])]
        report = await ask(settings, query)
        listed = " ".join(item.why for item in report.unplanned)
        assert report.status == "partial" and all(order in listed for order in matching), (query, listed)
        asked += 1
        if asked == 4:
            break
    assert asked == 4


def _dated(order: dict[str, Any]) -> bool:
    """An order of a customer anyone may look up, not placed in May ("may" is read as a verb)."""
    return order["customer_id"] not in {"CUST-00001", "CUST-00013"} and order["placed_on"][5:7] != "05"


@pytest.mark.parametrize("order", _drawn(3, _dated), ids=lambda o: o["id"])
@pytest.mark.parametrize(
    "phrasing",
    ["{name}'s {month} order - did it ever get delivered?", "{name}: the {month} order, any news?"],
)
def test_a_month_before_the_order_dates_the_customers_orders_searched(
    order: dict[str, Any], phrasing: str
) -> None:
    month = calendar.month_name[int(order["placed_on"][5:7])]
    plan = plan_query(phrasing.format(name=_customer_of(order)["name"], month=month))
    (search,) = [task for task in plan.tasks.values() if task.tool == "search_orders"]
    assert search.arguments["placed_after"][5:7] == order["placed_on"][5:7], search.arguments
    assert [f.ask for f in plan.follow_ups] == ["order"] and plan.follow_ups[0].dated


def _one_of_status(status: str) -> list[dict[str, Any]]:
    """Orders that are their customer's only one of ``status``, drawn with seed 42."""
    counts = Counter((o["customer_id"], o["status"]) for o in _world_orders())
    return _drawn(2, lambda o: o["status"] == status and counts[o["customer_id"], status] == 1 and _dated(o))


@pytest.mark.parametrize(
    ("phrasing", "status"),
    [
        ("{name}'s order that's shown as shipped - anything in tickets about it?", "shipped"),
        ("{name}: the shipped one, any tickets on it?", "shipped"),
        ("{name}, order marked as shipped. tickets on it?", "shipped"),
        ("{name}: the one still processing, any tickets on it?", "processing"),
        ("{name} - the cancelled one, tickets on it?", "cancelled"),
    ],
)
async def test_a_status_word_picks_the_order_the_tickets_are_on(
    settings: SourceSettings, phrasing: str, status: str
) -> None:
    for order in _one_of_status(status):
        plan = plan_query(phrasing.format(name=_customer_of(order)["name"]))
        (search,) = [task for task in plan.tasks.values() if task.tool == "search_orders"]
        grown = next_round(plan, {search.id: await orders_of(settings, order["customer_id"])})
        assert grown is not None
        tickets = [task.arguments for task in grown.tasks.values() if task.tool == "search_tickets"]
        assert tickets == [{"order_id": order["id"]}], (phrasing, order, grown.unplanned)


def _articles() -> list[dict[str, Any]]:
    """Policy articles of the demo world, drawn with seed 42 (the VIP one is about accounts, not read here)."""
    policies = [p for p in _world().tables["kb"]["policies"] if p["id"] != "KB-VIP"]
    return random.Random(42).sample(policies, 3)


@pytest.mark.parametrize("article", _articles(), ids=lambda a: a["id"])
@pytest.mark.parametrize(
    ("phrasing", "depth"),
    [
        ("the {title} policy and whatever it points to pls", None),
        ("Look up our policy on {title} and list the articles linked to it.", None),
        ("{title} article plus anything linked to it up to two hops away", 2),
        ("Find the {title} article and everything up to three links away from it", 3),
    ],
)
async def test_the_links_of_an_article_found_by_a_search_are_followed_at_the_depth_stated(
    settings: SourceSettings, article: dict[str, Any], phrasing: str, depth: int | None
) -> None:
    report = await ask(settings, phrasing.format(title=article["title"].lower()))
    (related,) = [task for task in report.tasks if task.tool == "related_policies"]
    assert related.arguments == {"article_id": article["id"], **({"depth": depth} if depth else {})}
    assert related.follows and related.follows.startswith("policies:"), related.follows


@functools.cache
def _items_of_orders() -> dict[str, list[str]]:
    items: dict[str, list[str]] = {}
    for item in _world().tables["orders"]["order_items"]:
        items.setdefault(item["order_id"], []).append(item["description"])
    return items


def _only_holder(order: dict[str, Any]) -> bool:
    """An order holding one product that no other order of its customer holds."""
    items = _items_of_orders()
    others = {d for o in _world_orders() if o["customer_id"] == order["customer_id"] and o["id"] != order["id"]
              for d in items.get(o["id"], [])}  # fmt: skip
    return (
        _dated(order) and len(set(items.get(order["id"], []))) == 1 and not others & set(items[order["id"]])
    )


@pytest.mark.parametrize(
    "phrasing",
    [
        "Subject: {product} never arrived\n\nHello,\nI ordered a {product} and it still hasn't turned up. "
        "Can someone tell me what is happening?\n\nKind regards,\n{name}",
        "{name} says the {product} she ordered never arrived - can you look into it?",
        "{email}: ordered a {product}, still waiting for it. what's going on?",
    ],
)
async def test_a_complaint_that_the_order_never_came_is_asked_of_its_tickets(
    settings: SourceSettings, phrasing: str
) -> None:
    for order in _drawn(3, _only_holder):
        customer = _customer_of(order)
        product = _items_of_orders()[order["id"]][0].split(",")[0].lower()
        plan = plan_query(phrasing.format(product=product, name=customer["name"], email=customer["email"]))
        (search,) = [task for task in plan.tasks.values() if task.tool == "search_orders"]
        grown = next_round(plan, {search.id: await orders_of(settings, order["customer_id"])})
        assert grown is not None, (phrasing, order, plan.follow_ups)
        tickets = [task.arguments for task in grown.tasks.values() if task.tool == "search_tickets"]
        assert tickets == [{"order_id": order["id"]}], (phrasing, order, product, grown.unplanned)


def _newest_of_customer(order: dict[str, Any]) -> str | None:
    """The id of the newest order of ``order``'s customer, if one order alone is the newest."""
    theirs = [o for o in _world_orders() if o["customer_id"] == order["customer_id"]]
    last = max(o["placed_on"] for o in theirs)
    newest = [o["id"] for o in theirs if o["placed_on"] == last]
    return newest[0] if len(newest) == 1 else None


@pytest.mark.parametrize(
    "phrasing",
    [
        "Whoever owns {id}: find their newest order and tell me if there are tickets about it.",
        "who placed {id}? any tickets on their latest order?",
        "{id} - whoever placed it, pull their most recent order and any tickets on it",
    ],
)
async def test_the_newest_order_of_whoever_owns_an_order_is_found_through_its_customer(
    settings: SourceSettings, phrasing: str
) -> None:
    for order in _drawn(3, lambda o: _dated(o) and _newest_of_customer(o) not in (None, o["id"])):
        plan = plan_query(phrasing.format(id=order["id"]))
        lookup = next(task for task in plan.tasks.values() if task.tool == "get_order")
        (search,) = [task for task in plan.tasks.values() if task.tool == "search_orders"]
        assert search.arguments == {"customer_id": Ref(lookup.id, "customer_id")}
        grown = next_round(plan, {search.id: await orders_of(settings, order["customer_id"])})
        assert grown is not None, (phrasing, plan.follow_ups)
        tickets = [task.arguments for task in grown.tasks.values() if task.tool == "search_tickets"]
        assert tickets == [{"order_id": _newest_of_customer(order)}], (phrasing, order, grown.unplanned)


def _only_order_with(description: str) -> Callable[[dict[str, Any]], bool]:
    def keep(order: dict[str, Any]) -> bool:
        items = _items_of_orders()
        theirs = [o["id"] for o in _world_orders() if o["customer_id"] == order["customer_id"]]
        holding = [i for i in theirs if description in items.get(i, [])]
        return _dated(order) and holding == [order["id"]]

    return keep


@pytest.mark.parametrize(
    "phrasing",
    [
        "{name}'s cafetière order - any tickets on it?",
        "{email}: the cafetière one, tickets on it pls",
        "can u check {name} cafetières order, tickets on it?",
    ],
)
async def test_an_accented_product_name_picks_the_order_holding_it(
    settings: SourceSettings, phrasing: str
) -> None:
    for order in _drawn(3, _only_order_with("Cafetiere, 8 cup")):
        customer = _customer_of(order)
        plan = plan_query(phrasing.format(name=customer["name"], email=customer["email"]))
        (search,) = [task for task in plan.tasks.values() if task.tool == "search_orders"]
        grown = next_round(plan, {search.id: await orders_of(settings, order["customer_id"])})
        assert grown is not None, (phrasing, plan.follow_ups)
        tickets = [task.arguments for task in grown.tasks.values() if task.tool == "search_tickets"]
        assert tickets == [{"order_id": order["id"]}], (phrasing, order, grown.unplanned)


async def total_of(settings: SourceSettings, order_id: str) -> float:
    """An order's total as the orders source gives it, through the mcp Client."""
    result = await call(
        MODULES["orders"].create_server(settings), "get_order", {"order_id": order_id},
        credential("orders:read", source="orders"),
    )  # fmt: skip
    (order,) = wire(result)["results"]
    return float(order["total"])


_SEED = random.Random(42)
_SHARE_ASKS = (
    ("can we give a third of that back on {order}", 1 / 3),
    ("can he have half back on {order}?", 1 / 2),
    ("at least give a third of it back on {order}?", 1 / 3),
    ("{order}: could she get two thirds back?", 2 / 3),
    ("is a quarter of it back on {order} ok?", 1 / 4),
)
_SHARED = [
    (asked.format(order=order), order, share)
    for asked, share in _SHARE_ASKS
    for order in _SEED.sample(["ORD-10023", "ORD-10031", "ORD-10277", "ORD-10721", "ORD-10900"], 2)
]


@pytest.mark.parametrize(("query", "order", "share"), _SHARED, ids=[query for query, _, _ in _SHARED])
async def test_a_share_asked_back_on_an_order_named_is_checked_at_that_share_of_its_total(
    settings: SourceSettings, query: str, order: str, share: float
) -> None:
    report = await ask(settings, query)
    (check,) = follow_ups(report)
    total = await total_of(settings, order)
    assert (check.tool, check.arguments) == (
        "refund_eligibility",
        {"order_id": order, "amount": round(total * share, 2)},
    )
    assert check.follows == f"order:{order}" and "the order the question names" in check.why


_FULL_THEN = (
    ("{order}: can the full amount go back? If not, at least the two makers (2 x £{price}).", 2),
    ("refund {order} in full? failing that, 3 x £{price}", 3),
    ("can {order} be refunded in full? if not, what about £{price}?", 1),
)
_OVER_THE_LIMIT = ["ORD-10023", "ORD-10721", "ORD-10900"]  # totals over £500: the full check is refused
_FULL_THEN_ASKED = [
    (asked.format(order=order, price=price), order, count * price)
    for asked, count in _FULL_THEN
    for order, price in zip(_SEED.sample(_OVER_THE_LIMIT, 2), (_SEED.randint(10, 60) for _ in range(2)), strict=True)
]  # fmt: skip


@pytest.mark.parametrize(
    ("query", "order", "next_amount"), _FULL_THEN_ASKED, ids=[q for q, _, _ in _FULL_THEN_ASKED]
)
async def test_the_full_amount_then_an_amount_if_refused_checks_the_total_then_that_amount(
    settings: SourceSettings, query: str, order: str, next_amount: float
) -> None:
    report = await ask(settings, query)
    checks = [task for task in report.tasks if task.tool == "refund_eligibility"]
    first = next(task for task in checks if not task.follows)
    (second,) = follow_ups(report)
    assert first.arguments == {"order_id": order, "amount": await total_of(settings, order)}
    assert first.state == "escalated"  # over the automatic limit
    assert second.arguments == {"order_id": order, "amount": next_amount}
    assert second.follows == f"{first.id}:refused"


@pytest.mark.parametrize(
    "customer", _SEED.sample(["CUST-00303", "CUST-00088", "CUST-00242", "CUST-00104"], 3)
)
@pytest.mark.parametrize(
    "asked",
    [
        "{customer} is asking for the whole of the £{total:g} order back. Allowed?",
        "can {customer} have half of the £{total:g} order back?",
    ],
)
async def test_an_amount_naming_one_of_the_customers_orders_selects_it(
    settings: SourceSettings, customer: str, asked: str
) -> None:
    found = await orders_of(settings, customer)
    totals = [order["total"] for order in found]
    order = next(order for order in found if totals.count(order["total"]) == 1)
    report = await ask(settings, asked.format(customer=customer, total=order["total"]))
    (check,) = follow_ups(report)
    share = 0.5 if "half" in asked else 1.0
    assert check.arguments == {"order_id": order["id"], "amount": round(order["total"] * share, 2)}
    assert f"its total is {pounds(order['total'])}" in check.why


_IF_REFUSED = (
    ("If that's a no, try half of it instead.", None),
    ("and if she can't, would £{second} be OK?", "amount"),
    ("if it gets refused, see whether £{second} would do", "amount"),
)
_REFUSED_THEN = [
    (f"Can {order} have £{first} refunded? {then.format(second=second)}", order, second if said else first / 2)
    for then, said in _IF_REFUSED
    for order, first, second in [(_SEED.choice(_OVER_THE_LIMIT), _SEED.randint(501, 700), _SEED.randint(10, 90))]
]  # fmt: skip


@pytest.mark.parametrize(
    ("query", "order", "next_amount"), _REFUSED_THEN, ids=[q for q, _, _ in _REFUSED_THEN]
)
async def test_a_second_check_said_as_if_refused_is_made_when_billing_refuses_the_first(
    settings: SourceSettings, query: str, order: str, next_amount: float
) -> None:
    report = await ask(settings, query)
    (second,) = follow_ups(report)
    assert second.arguments == {"order_id": order, "amount": next_amount}


def _one_of_total() -> list[dict[str, Any]]:
    """Orders no other order of their customer shares a total with (the customer one person by name),
    drawn with seed 42."""
    totals = Counter((o["customer_id"], o["total"]) for o in _world_orders())
    return _drawn(
        3, lambda o: totals[o["customer_id"], o["total"]] == 1 and _customer_of(o)["name"].count(" ") == 1
    )


@pytest.mark.parametrize(
    "phrasing",
    [
        "{name}, the {total} one: any tickets?",
        "{name}'s {total} order - any tickets about it?",
        "{name}: tickets for the one of {total} please",
    ],
)
async def test_a_total_picks_the_order_the_tickets_are_on(settings: SourceSettings, phrasing: str) -> None:
    for order in _one_of_total():
        total = pounds(order["total"])
        plan = plan_query(phrasing.format(name=_customer_of(order)["name"], total=total))
        (search,) = [task for task in plan.tasks.values() if task.tool == "search_orders"]
        grown = next_round(plan, {search.id: await orders_of(settings, order["customer_id"])})
        assert grown is not None, (phrasing, order, plan.unplanned)
        tickets = [task.arguments for task in grown.tasks.values() if task.tool == "search_tickets"]
        assert tickets == [{"order_id": order["id"]}], (phrasing, order, grown.unplanned)
