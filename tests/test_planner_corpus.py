"""The planner against how people ask: a labelled corpus, properties over generated queries, Claude's plans.

The corpus (``planner_corpus.toml``) was written against the planner's specification by someone who
did not read its code: phrasings support agents type, each with every call it must plan.
"""

from __future__ import annotations

import functools
import itertools
import random
import re
from typing import Any

import anyio
import pytest
from hypothesis import HealthCheck, example, given, settings
from hypothesis import strategies as st
from num2words import num2words

from coordinator.llm import ClaudeSettings, claude_plan
from coordinator.planning.lexicon import ID_KIND_WORDS, SHORTHAND
from coordinator.planning.plan import Plan, Ref
from coordinator.planning.planner import plan_query
from coordinator.planning.reading import QueryError, read_query
from sources.world import build_world
from tests import corpus
from tests.corpus import Case, load_cases, mismatches
from tests.fake_messages_api import FakeMessagesApi, plan_as_input, tool_use

CASES = load_cases()
HELD_OUT = load_cases(corpus.HELD_OUT)


@pytest.mark.parametrize(
    "case",
    [*CASES, *HELD_OUT],
    ids=[
        *(f"corpus-{i:03d}" for i in range(len(CASES))),
        *(f"held-out-{i:03d}" for i in range(len(HELD_OUT))),
    ],
)
def test_the_planner_plans_what_the_query_asks(case: Case) -> None:
    plan, refusal = corpus.plan_or_refusal(case.query)
    assert mismatches(case, plan, refusal) == [], case.query


def test_the_corpus_is_large_and_every_query_is_new() -> None:
    queries = [case.query.lower() for case in [*CASES, *HELD_OUT]]
    assert len(CASES) >= 200 and len(HELD_OUT) >= 90 and len(set(queries)) == len(queries)
    assert (
        sum(case.refused for case in CASES) >= 10 and sum(case.unplanned is not None for case in CASES) >= 20
    )


def test_a_partly_understood_query_is_never_complete() -> None:
    """Every corpus query that leaves something unplanned has it in the plan, and the plan says partial."""
    partial = [case for case in CASES if case.unplanned]
    assert len(partial) >= 20
    for case in partial:
        plan = plan_query(case.query)
        assert plan.unplanned and all(item.why and item.next_step for item in plan.unplanned)


# --- natural phrasings: never reported complete when part was missed ----------------------------------

# False COMPLETE on the natural sets, as measured when this was written (at first sight, before the
# accounting: 198 of 460, 44 of 90, 40 of 80; the fourth set, written after it, 8 of 100); now none.
FALSE_COMPLETE_AT_MOST = {
    corpus.NATURAL: 0,
    corpus.NATURAL_HELD_OUT: 0,
    corpus.NATURAL_BLIND: 0,
    corpus.NATURAL_BLIND2: 0,
}


# What tuning reached (issue 45's end): a floor, never a target.
EXACT_AT_LEAST = {
    corpus.NATURAL: 312,
    corpus.NATURAL_HELD_OUT: 40,
    corpus.NATURAL_BLIND: 46,
    corpus.NATURAL_BLIND2: 65,
}


@pytest.mark.parametrize("path", list(FALSE_COMPLETE_AT_MOST), ids=lambda path: path.stem)
def test_natural_phrasings_are_rarely_reported_complete_when_part_was_missed(path: Any) -> None:
    cases = load_cases(path)
    assert len(cases) >= (450 if path == corpus.NATURAL else 80)
    outcomes = [corpus.outcome(case, *corpus.plan_or_refusal(case.query)) for case in cases]
    false_complete = [
        case.query for case, seen in zip(cases, outcomes, strict=True) if seen == "false complete"
    ]
    assert len(false_complete) <= FALSE_COMPLETE_AT_MOST[path], false_complete
    # nor with a read more than the labels expect: these sets' labels agree with the planner's rules
    assert [case.query for case, seen in zip(cases, outcomes, strict=True) if seen == "reads more"] == []
    # and the exact matches do not fall: a word added to the lexicon changes what the matcher compares
    assert outcomes.count("exact") >= EXACT_AT_LEAST[path]


ISSUE_SAMPLES = {
    "Has Yvonne Young been in touch about her espresso machine?": ["find_customers", "search_tickets"],
    "outstanding balance for CUST-00150?": ["customer_lookup", "list_invoices"],
    "goodwill gesture of a tenner on ORD-10751 for the late delivery, ok?": ["refund_eligibility", "search_policies"],
    "how long do people have to send something back if it's unused?": ["search_policies"],
    "what's linked from KB-DAMAGED, two hops out": ["related_policies"],
    "can ORD-10023 be refunded in full?": ["get_order", "refund_eligibility", "search_policies"],
}  # fmt: skip


@pytest.mark.parametrize("query", list(ISSUE_SAMPLES))
def test_each_reported_sample_is_planned_as_a_support_agent_expects(query: str) -> None:
    plan = plan_query(query)
    assert sorted(task.tool for task in plan.tasks.values()) == sorted(ISSUE_SAMPLES[query])
    assert plan.unplanned == (), plan.unplanned
    if "hops" in query:
        assert plan.tasks["related"].arguments == {"article_id": "KB-DAMAGED", "depth": 2}
    if "tenner" in query:
        assert plan.tasks["refund"].arguments == {"order_id": "ORD-10751", "amount": 10}
    if "in full" in query:
        check = plan.tasks["refund"]
        assert check.arguments["amount"] == Ref("order", "total") and check.depends_on == ("order",)


@pytest.mark.parametrize(
    ("query", "named"),
    [
        ("What's the tracking number and courier for ORD-10768?", ["tracking number", "courier"]),
        ("jane's phone number and delivery address", ["phone number"]),
    ],
)
def test_what_no_source_holds_is_named_as_such(query: str, named: list[str]) -> None:
    plan = plan_query(query)
    held = {item.what.strip("'"): item.why for item in plan.unplanned}
    for what in named:
        assert held[what].startswith("no source holds this"), plan.unplanned


def test_a_story_s_date_qualifies_nothing_and_the_ask_after_the_letter_is_planned() -> None:
    email = (
        "Hi,\n\nWe moved house in September and I've been ordering bits ever since... "
        "did my last orders go out?\n\nThanks,\njane.doe@example.com"
    )
    plan = plan_query(email)
    orders = plan.tasks["orders"]
    assert orders.tool == "search_orders" and set(orders.arguments) == {"customer_id"}  # no September filter
    assert plan.unplanned == ()
    roles = {span.text: span.role for span in plan.spans}
    assert roles["We moved house in September"] == "story"


@pytest.mark.parametrize(
    ("ran", "matches"),
    [
        ({"amount": 38.0}, True),
        ({"amount": 45.0}, False),
        ({"amount": "{order.total}"}, False),
        (None, False),
    ],
)
def test_a_researched_plan_s_upstream_value_is_scored_as_it_ran(
    ran: dict[str, Any] | None, matches: bool
) -> None:
    """ "in full" is planned as ``{order.total}``; a case that writes the total in the data (38) matches
    the value the coordinator filled in, and never one it did not fill in or a different one."""
    plan = plan_query("can we refund ORD-10451 in full?")
    case = Case(plan.query, False, tuple(corpus._expected(spec) for spec in [
        "orders.get_order order_id=ORD-10451", "billing.refund_eligibility order_id=ORD-10451 amount=38",
        "kb.search_policies query~refund"]), None)  # fmt: skip
    ran_with = {"refund": ran} if ran is not None else None
    assert (mismatches(case, plan, "", ran_with) == []) is matches
    notation = Case(plan.query, False, (*case.calls[::2], corpus._expected(
        "billing.refund_eligibility order_id=ORD-10451 amount={order.total}")), None)  # fmt: skip
    assert mismatches(notation, plan, "", ran_with) == []  # the plan's own notation always matches


@pytest.mark.parametrize(
    ("expected", "extra"),
    [
        (
            ["orders.get_order order_id=ORD-10451", "kb.search_policies query~refund"],
            ["billing.refund_eligibility"],
        ),
        (["orders.get_order order_id=ORD-10451"], ["billing.refund_eligibility", "kb.search_policies"]),
        (["orders.get_order order_id=ORD-10999", "kb.search_policies query~refund"], []),  # one missed
        (
            [
                "orders.get_order order_id=ORD-10451",
                "billing.refund_eligibility order_id=ORD-10451",
                "kb.search_policies query~refund",
                "tickets.search_tickets",
            ],
            [],
        ),
    ],
)
def test_only_reading_more_is_told_apart_from_missing_something(
    expected: list[str], extra: list[str]
) -> None:
    """A plan reported complete that is not as labelled: every expected call made plus read-only ones
    (it reads more), or part missed (a false COMPLETE)."""
    plan = plan_query("can we refund ORD-10451 in full?")
    case = Case(plan.query, False, tuple(corpus._expected(spec) for spec in expected), None)
    assert sorted(corpus.extra_reads(case, plan)) == extra
    assert corpus.outcome(case, plan) == ("reads more" if extra else "false complete")
    gap = Case(plan.query, False, case.calls, ("ORD-10451",))
    assert corpus.extra_reads(gap, plan) == []  # an expected gap not listed is missing something


@pytest.mark.parametrize("order", ["ORD-10451", "ORD-10031"])
@pytest.mark.parametrize(
    "phrasing",
    [
        "thirty-eight pounds back on {order}, ok?",
        "£38 back on {order}, is that allowed?",
        "is two hundred and fifty-eight pounds back on {order} acceptable?",
        "is £38 back on {order} possible?",
    ],
)
def test_a_question_of_money_back_on_an_order_is_a_refund_eligibility_question(
    phrasing: str, order: str
) -> None:
    """Checked, and the refund policy searched beside the check; its eligibility word is understood."""
    plan = plan_query(phrasing.format(order=order))
    checks = [task.arguments["order_id"] for task in plan.tasks.values() if task.tool == "refund_eligibility"]
    searched = [task.arguments["query"] for task in plan.tasks.values() if task.tool == "search_policies"]
    assert checks == [order] and len(searched) == 1 and "refund" in searched[0], plan.tasks
    assert plan.unplanned == (), plan.unplanned
    reported = plan_query(f"she says the jug on {order} came broken and wants 45 quid back")
    assert [task.tool for task in reported.tasks.values()] == ["refund_eligibility"]  # asks nothing


@pytest.mark.parametrize("customer", ["CUST-00010", "jane.doe@example.com"])
@pytest.mark.parametrize(
    ("about", "searched"),
    [("a wrong colour", "wrong colour"), ("the grinder", "grinder"), ("a cracked jug", "cracked jug")],
)
def test_a_customer_s_tickets_about_a_topic_search_hers_for_it(
    customer: str, about: str, searched: str
) -> None:
    plan = plan_query(f"any tickets about {about} for customer {customer}?")
    tickets = next(task for task in plan.tasks.values() if task.tool == "search_tickets")
    assert tickets.arguments["query"] == searched and "customer_id" in tickets.arguments


@pytest.mark.parametrize("identifier", ["TCK-20535", "XYZ-123", "abc-0042"])
@pytest.mark.parametrize("phrasing", ["what's the status of ticket {id}?", "any news on {id}", "{id} pls"])
def test_an_id_of_a_kind_no_tool_takes_is_reported_never_searched_as_text(
    identifier: str, phrasing: str
) -> None:
    try:
        plan = plan_query(phrasing.format(id=identifier))
    except QueryError as refusal:  # nothing else asked: refused, saying why
        assert identifier.upper() in str(refusal) and "no tool looks a record up" in str(refusal)
    else:
        assert any(identifier.upper() in item.what for item in plan.unplanned), plan.unplanned
        searched = " ".join(str(task.arguments.get("query", "")) for task in plan.tasks.values())
        assert identifier.split("-")[0].lower() not in searched.split(), searched


@pytest.mark.parametrize(
    "query",
    [
        "any news on TCK-20051 for jane.doe@example.com",
        "what happened with TCK-20051, cust 42",
        "TCK-20042 is CUST-00042's: still open?",
        "TICKET-123 for CUST-00042",
    ],
)
def test_a_ticket_id_with_its_customer_named_searches_that_customers_tickets(query: str) -> None:
    """No tool looks a ticket up by its id, but the customer's tickets hold it: the id's prefix is read
    as the ticket it names (as an invoice's is), never left as a word no record holds."""
    plan = plan_query(query)
    (tickets,) = [task for task in plan.tasks.values() if task.tool == "search_tickets"]
    assert "customer_id" in tickets.arguments and "query" not in tickets.arguments, tickets.arguments
    assert all(item.what.strip("'").lower() != "tck" for item in plan.unplanned), plan.unplanned
    # and the plan says how the id is looked for: a reader who finds it absent knows it was looked for
    (identifier,) = [word.strip(",:?") for word in query.split() if word.startswith(("TCK-", "TICKET-"))]
    assert any(identifier in note and "looked for among the records found" in note for note in plan.notes)


@pytest.mark.parametrize(
    ("query", "identifier"),
    [
        ("any news on XYZ-123 for CUST-00042", "XYZ-123"),
        ("XYZ-123 - jane.doe@example.com's, what is it?", "XYZ-123"),
        ("REFUND-123 for CUST-00042", "REFUND-123"),
        ("what about POLICY-777 on ORD-10023?", "POLICY-777"),
        ("CAMPAIGN-777 for ORD-10023", "CAMPAIGN-777"),
    ],
)
def test_an_id_of_no_kind_of_record_asked_is_listed_even_with_a_customer_named(
    query: str, identifier: str
) -> None:
    """A customer named does not say which of their records hold an id of a kind nothing reads
    ("XYZ-"), nor one whose kind is no record of theirs (a refund's check, the policies searched by
    topic): it is listed, asking which records; its prefix is never left as a word no record holds."""
    plan = plan_query(query)
    (listed,) = [item for item in plan.unplanned if identifier in item.what]
    assert "no tool looks a record up" in listed.why and "which of their records" in listed.next_step
    prefix = identifier.split("-")[0].lower()
    assert all(item.what.strip("'").lower() != prefix for item in plan.unplanned), plan.unplanned
    assert not any("looked for among" in note for note in plan.notes), plan.notes


@pytest.mark.parametrize(
    "query",
    [
        "what does /tmp/pytest-917/docs/refund-policy.md say, and is a £45 refund on ORD-10031 allowed?",
        "orders of CUST-00042 - see notes/TCK-20051.md",
        r"tickets of CUST-00042, notes in C:\shared\case-2024\notes.txt",
    ],
)
def test_a_folder_or_file_name_shaped_like_an_id_is_no_id(query: str) -> None:
    """A path's folder or file named like an id ("pytest-917", "TCK-20051.md") is a name in a path, not
    an id asked about: nothing is listed for it."""
    plan = plan_query(query)
    listed = " ".join(item.what for item in plan.unplanned).upper()
    assert not any(shape in listed for shape in ("PYTEST-917", "TCK-20051", "CASE-2024")), plan.unplanned
    assert not any("looked for among" in note for note in plan.notes), plan.notes


@pytest.mark.parametrize(
    "query",
    [
        "Status of {ids} for jane.doe@example.com?",
        "any news on {ids}, cust 42",
        "({ids}) for CUST-00042",
        "{ids}?",
    ],
)
@pytest.mark.parametrize(
    "ids", [["TCK-20051", "INV-40008"], ["XYZ-123", "ABC-456"], ["XYZ-123", "ORD-10023"], ["TCK-1", "INV-2"]]
)
def test_ids_joined_by_a_slash_are_read_as_ids_joined_by_and(query: str, ids: list[str]) -> None:
    """ "TCK-20051/INV-40008" is a list of ids, not a path: each is looked for, or listed, as when
    they are written "TCK-20051 and INV-40008"."""

    def plan_or_refusal(joined: str) -> Any:
        try:
            plan = plan_query(query.format(ids=joined))
        except QueryError as refused:
            return str(refused)
        return (
            sorted(plan.tasks),
            plan.notes,
            [(item.what, item.why, item.next_step) for item in plan.unplanned],
        )

    assert plan_or_refusal("/".join(ids)) == plan_or_refusal(" and ".join(ids))


def test_an_id_with_a_longer_prefix_is_an_id() -> None:
    """ "INVOICE-40008" is as much an id as "INV-40008": looked for among the invoices of the customer named."""
    plan = plan_query("INVOICE-40008 for CUST-00042")
    assert "list_invoices" in {task.tool for task in plan.tasks.values()} and not plan.unplanned
    assert any("INVOICE-40008" in note and "looked for among" in note for note in plan.notes), plan.notes


@pytest.mark.parametrize(
    ("written", "spelled"),
    [("ORDER-10023", "ORD-10023"), ("CUSTOMER-00042", "CUST-00042"), ("Order-10023", "order 10023")],
)
def test_a_record_noun_and_its_number_joined_by_a_hyphen_is_that_id(written: str, spelled: str) -> None:
    """ "ORDER-10023" is order 10023 and "CUSTOMER-00042" customer 42, as "order 10023" and "customer
    #42" are: looked up, not listed as an id of a kind no tool takes."""
    joined, apart = (plan_query(f"tickets of {identifier}") for identifier in (written, spelled))
    assert joined.tasks == apart.tasks and not joined.unplanned, joined.unplanned


# Every way an id's prefix may name a kind of record: the words, and the shorthand read as one.
_ID_KINDS = sorted({*ID_KIND_WORDS, *(short for short, word in SHORTHAND.items() if word in ID_KIND_WORDS)})


@pytest.mark.parametrize("kind", _ID_KINDS)
def test_an_id_with_a_short_number_after_a_kind_of_record_is_an_id(kind: str) -> None:
    """ "REFUND-77", "TCK-12", "case-5": an id however short its number, looked for among the records
    found or listed, never read as its word alone and the number dropped (a question about REFUND-77
    once came back complete, REFUND-77 never mentioned)."""
    shapes = ["{id} on order-10023, £20", "what about {id} for CUST-00042?", "{id} - jane.doe@example.com"]
    for number, spelled, shape in itertools.product(("7", "77"), (str.upper, str.lower, str.title), shapes):
        identifier = f"{spelled(kind)}-{number}"
        plan = plan_query(shape.format(id=identifier))
        said = [item.what for item in plan.unplanned] + [
            note for note in plan.notes if "looked for among" in note
        ]
        assert any(identifier.upper() in line for line in said), (identifier, plan.unplanned, plan.notes)


@pytest.mark.parametrize(
    "word", ["COVID-19", "covid-19", "top-10", "Windows-11", "GPT-4", "MP-3", "iPhone-15"]
)
def test_a_short_number_after_any_other_word_is_no_id(word: str) -> None:
    """ "COVID-19" and "top-10" name no record: nothing is listed or looked for as an id for them."""
    plan = plan_query(f"{word} and the orders of CUST-00042")
    said = " ".join([*(item.what for item in plan.unplanned), *plan.notes]).upper()
    assert word.upper() not in said, (plan.unplanned, plan.notes)


def test_a_month_and_its_year_joined_by_a_hyphen_is_a_date() -> None:
    """ "since Mar-2024" is "since Mar 2024", not "since Mar" of this year and an id "MAR-2024"."""
    joined, apart = (plan_query(f"orders of CUST-00042 since {when}") for when in ("Mar-2024", "Mar 2024"))
    assert joined.tasks["orders"].arguments == apart.tasks["orders"].arguments
    assert joined.tasks["orders"].arguments["placed_after"] == "2024-03-01"
    assert not joined.unplanned, joined.unplanned


@pytest.mark.parametrize("query", ["orders of CUST-00042 since mid-2024", "pre-2020 orders of CUST-00042"])
def test_a_year_with_a_word_before_it_is_no_id(query: str) -> None:
    """ "mid-2024" is no id of a kind nothing looks up; the word the planner does not read is listed."""
    listed = [item.what for item in plan_query(query).unplanned]
    assert listed and not any("2024" in what or "2020" in what for what in listed), listed


def test_amounts_and_counts_in_words() -> None:
    assert (
        plan_query("pay back sixty-four pounds fifty on ORD-10008").tasks["refund"].arguments["amount"]
        == 64.5
    )
    assert plan_query("refund two fivers on ORD-10031").tasks["refund"].arguments["amount"] == 10
    assert plan_query("KB-REFUNDS three links away").tasks["related"].arguments["depth"] == 3


@pytest.mark.parametrize(
    ("query", "listed"),
    [
        ("orders of CUST-00042 + reset his password", "reset his password"),
        ("pls: (a) refund £8.50 on ORD-10021 (b) send out a replacement jug", "send out a replacement jug"),
        ("cancel the order ORD-10031 for jane.doe@example.com", "cancel the order"),
        # its object an id no tool takes: listed as a write not done, beside the id's own gap
        ("close ticket TCK-20051", "close ticket TCK-20051"),
        ("escalate case TCK-20051 to a manager", "escalate case TCK-20051"),
    ],
)
def test_a_clause_that_asks_for_something_to_be_done_is_listed_not_done(query: str, listed: str) -> None:
    plan = plan_query(query)
    assert any(listed in item.what and "does nothing" in item.why for item in plan.unplanned), plan.unplanned
    # Nothing else is done but a refund the query asks for ("(a) refund £8.50 on ORD-10021"), after its check.
    refunds = [task for task in plan.tasks.values() if task.tool == "issue_refund"]
    asked = [("ORD-10021", 8.5)] if "refund £8.50" in query else []
    assert [(task.arguments["order_id"], task.arguments["amount"]) for task in refunds] == asked
    assert all(plan.tasks[task.depends_on[-1]].tool == "refund_eligibility" for task in refunds)


@pytest.mark.parametrize(
    "query",
    ["pls send me her invoices CUST-00042", "send the invoices for CUST-00042 over", "jane's phone number"],
)
def test_a_verb_that_delivers_or_names_a_thing_is_no_action(query: str) -> None:
    plan = plan_query(query)
    assert not any("does nothing" in item.why for item in plan.unplanned), plan.unplanned


def test_what_a_how_much_question_measures_must_be_held() -> None:
    plan = plan_query("How much VAT did we charge CUST-00014 on her invoices?")
    assert [item.what for item in plan.unplanned] == ["'VAT'"]
    assert plan_query("how many orders has CUST-00014 placed?").unplanned == ()


def test_typos_are_corrected_only_in_words_that_are_not_english() -> None:
    """ "cancelld" is a record's value mistyped; "chipped" is English and stays itself (not "shipped")."""
    assert plan_query("ord-10030 cancelld but was she chargd?").unplanned == ()
    assert "chipped" in plan_query("espresso cups chipped on arrival").tasks["policies"].arguments["query"]


def test_a_search_for_what_is_not_a_word_explains_nothing() -> None:
    """ "damgd" (two slips from "damaged") would find nothing: it is listed, not searched for silently."""
    plan = plan_query("damgd jug polcy + kb-damaged links")
    assert any("damgd" in item.what for item in plan.unplanned), plan.unplanned


@pytest.mark.parametrize(
    ("query", "thing"),
    [
        ("which courier collects the returns?", "courier"),
        ("can you confirm what address you have for CUST-00042?", "address"),
        ("Sian Cox - full picture please, plus her twitter handle", "twitter handle"),
    ],
)
def test_the_thing_a_question_asks_for_must_be_a_records(query: str, thing: str) -> None:
    """Searching policies for "courier" does not say which courier: the thing asked for right after
    "which"/"what", or someone's ("her ..."), is answered only by a record's field."""
    held = [item.what for item in plan_query(query).unplanned if item.why.startswith("no source holds")]
    assert f"'{thing}'" in held, held


def test_a_story_told_of_the_customer_asks_nothing_of_them() -> None:
    """ "The customer has been very patient" tells; it does not ask who the customer is."""
    plan = plan_query("Is the whole order refundable on ORD-10026? The customer has been very patient.")
    assert sorted(task.tool for task in plan.tasks.values()) == [
        "get_order",
        "refund_eligibility",
        "search_policies",
    ]


def test_before_in_shorthand_bounds_a_date() -> None:
    plan = plan_query("did cust 10 evr buy SKU-3799-BLU b4 2026-06-01")
    assert plan.tasks["orders"].arguments == {
        "customer_id": "CUST-00010",
        "sku": "SKU-3799-BLU",
        "placed_before": "2026-05-31",
    }


def test_record_values_are_read_from_the_output_schemas() -> None:
    """ "cancelled" and "gold" are values the order and customer records publish, not unknown words."""
    assert plan_query("is ORD-10013 cancelled?").unplanned == ()
    assert plan_query("is CUST-00042 a gold customer?").unplanned == ()


@pytest.mark.parametrize(
    ("query", "unread"),
    [
        ("refund £12 on ORD-10030 et vérifiez la politique de retour svp", "vérifiez"),
        ("returns policy + ¿cuántos días tengo para devolverlo?", "cuántos días"),
        # in English letters: words that are neither English nor the planner's, side by side
        ("ord-10026 customer wrote 'mae fy archeb wedi torri', any tickets?", "archeb wedi torri"),
        (
            'webhook says {"event":"chargeback_opened"} for ORD-10028, open tickets?',
            '{"event":"chargeback_opened"}',
        ),
    ],
)
def test_another_language_and_pasted_code_are_not_read(query: str, unread: str) -> None:
    plan = plan_query(query)
    assert any(item.what == f"'{unread}'" for item in plan.unplanned), plan.unplanned


def test_plus_signs_and_list_markers_separate_asks() -> None:
    plan = plan_query("need 3 things: 1) who placed ORD-10026 2) their phone 3) returns policy")
    assert [item.what for item in plan.unplanned] == ["'phone'"]
    assert {task.tool for task in plan.tasks.values()} == {"get_order", "customer_lookup", "search_policies"}


def test_a_story_s_keywords_count_for_what_it_names_or_when_the_ask_is_only_look() -> None:
    charged = plan_query(
        "Hi,\n\nI think I was charged twice for ORD-10899.\n\nI'd be grateful if you could refund the duplicate."
        "\n\nSam Harrison"
    )
    assert "list_invoices" in {task.tool for task in charged.tasks.values()}
    look = plan_query(
        "mary higgins reckons she was charged for ord 10021 after she cancelled it can you have a look"
    )
    assert "list_invoices" in {task.tool for task in look.tasks.values()}


def test_an_article_named_answers_the_words_that_ask_for_its_links() -> None:
    related = plan_query("KB-DAMAGED related articles")
    assert [task.tool for task in related.tasks.values()] == ["related_policies"]
    both = plan_query("kb-damaged and the shipping policy")
    assert sorted(task.tool for task in both.tasks.values()) == ["related_policies", "search_policies"]


def test_contractions_without_apostrophes_are_function_words() -> None:
    assert plan_query("cust 42 says shes been charged twice, doesnt she? invoices pls").unplanned == ()


def test_a_long_query_of_filler_is_refused_with_what_was_understood() -> None:
    with pytest.raises(QueryError, match="names nothing"):
        plan_query("hi there, thanks so much! " * 2000)


def test_a_query_of_64000_characters_is_planned() -> None:
    query = ("orders of CUST-00042 and the espresso machine, " * 1400)[:63_999]
    plan = plan_query(query)
    assert "orders" in plan.tasks


# --- Claude's plans go through the same checks ------------------------------------------------------


def _renamed(task_id: str) -> str:
    return f"step_{re.sub(r'[^a-z0-9]', '_', task_id)}"


def _scripted_lead_agent(request: dict[str, Any]) -> Any:
    """A lead agent that plans what the query asks, under task names of its own, listing what it cannot."""
    plan = plan_query(request["messages"][0]["content"])
    return tool_use(plan_as_input(plan, rename=_renamed))


@pytest.mark.anyio
async def test_claude_plans_for_the_corpus_pass_the_same_checks() -> None:
    api = FakeMessagesApi(_scripted_lead_agent)
    claude = ClaudeSettings(api_key="test-key", base_url=api.base_url, max_retries=0, timeout_s=10)
    failures = {}
    try:
        with anyio.fail_after(240):
            for case in [*CASES, *HELD_OUT]:
                if case.refused:
                    continue
                plan, summary = await claude_plan(case.query, claude)
                assert summary.planner == "claude" and summary.steps[-1].action == "plan", summary.steps
                assert all(task_id.startswith("step_") for task_id in plan.tasks)
                problems = mismatches(case, plan)
                if problems:
                    failures[case.query] = problems
    finally:
        api.close()
    assert failures == {}
    assert not api.script_errors


@pytest.mark.anyio
async def test_what_claude_leaves_out_is_listed_by_the_code() -> None:
    """A model plan that ignores an order the query names: the code lists it as not researched."""
    query = "what did CUST-00042 buy, and whats up with ORD-10031"
    reply = tool_use({"tasks": [{"id": "orders", "source": "orders", "tool": "search_orders",
                                 "arguments": {"customer_id": "CUST-00042"}}]})  # fmt: skip
    api = FakeMessagesApi([reply])
    try:
        with anyio.fail_after(30):
            plan, _ = await claude_plan(
                query, ClaudeSettings(api_key="k", base_url=api.base_url, max_retries=0, timeout_s=10)
            )
    finally:
        api.close()
    assert [item.what for item in plan.unplanned] == ["ORD-10031"]


# --- properties over generated queries ---------------------------------------------------------------

_FILLER = st.sampled_from([
    "", "hi,", "pls", "quick one:", "can you check", "customer says", "urgent -", "re:", "fyi", "thanks!",
    "what about", "and", "also", "asap", "the jug came twice", "arrived late",
])  # fmt: skip
_ORDER_NUMBER = st.integers(10000, 99999)
_PENCE = st.integers(1, 9_999_999)


def _order_text(number: int, style: int) -> str:
    return [f"ORD-{number}", f"ord-{number}", f"order {number}", f"order #{number}", f"#{number}", f"ORD {number}"][style]  # fmt: skip


def _amount_text(pence: int, style: int) -> str:
    pounds = pence / 100
    whole = f"{pounds:.2f}".removesuffix(".00")
    grouped = f"{pounds:,.2f}"
    return [f"£{whole}", f"{whole} GBP", f"GBP {grouped}", f"{whole} pounds", f"{whole} quid", f"£{grouped}", f"£ {whole}"][style]  # fmt: skip


@settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    number=_ORDER_NUMBER, order_style=st.integers(0, 5), pence=_PENCE, amount_style=st.integers(0, 6),
    before=_FILLER, between=st.sampled_from(["on", "for", "back for", "refund on", "-", "(", "against"]),
    after=_FILLER, amount_first=st.booleans(),
)  # fmt: skip
@example(number=10031, order_style=0, pence=4500, amount_style=4, before="refund", between="on", after="?", amount_first=True)  # fmt: skip
def test_an_order_and_an_amount_in_pounds_is_a_refund_check_with_exactly_those_values(
    number: int, order_style: int, pence: int, amount_style: int, before: str, between: str, after: str,
    amount_first: bool,
) -> None:  # fmt: skip
    order, amount = _order_text(number, order_style), _amount_text(pence, amount_style)
    parts = [amount, between, order] if amount_first else [order, between, amount]
    query = " ".join(filter(None, [before, *parts, after]))
    checks = [task for task in plan_query(query).tasks.values() if task.tool == "refund_eligibility"]
    assert [(task.arguments["order_id"], task.arguments["amount"]) for task in checks] == [
        (f"ORD-{number}", pence / 100)
    ], query
    assert checks[0].depends_on == ()  # a refund check waits for nothing


_CUSTOMER = st.sampled_from([
    "jane.doe@example.com", "Jane.Doe@Example.com", "CUST-00042", "cust-42", "customer 77", "CUST 13",
    "new.customer@example.com", "jane", "noah newman", "priya", "tom's",
])  # fmt: skip
_ASK = st.sampled_from([
    "orders", "what did they buy", "open tickets", "complaints", "invoices", "billing", "everything about",
    "refund", "money back", "policy on damaged items", "warranty", "who is", "since last month",
    "in october 2026", "before 2026-10-01", "with SKU-4417-BLK", "KB-REFUNDS", "status", "polcy", "tikets",
])  # fmt: skip
_THING = st.one_of(
    _CUSTOMER,
    st.builds(_order_text, _ORDER_NUMBER, st.integers(0, 5)),
    st.builds(_amount_text, _PENCE, st.integers(0, 6)),
)


@functools.cache
def _plan_of(query: str) -> tuple[Plan | None, str]:
    return corpus.plan_or_refusal(query)


@settings(max_examples=400, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.lists(st.one_of(_ASK, _THING, _FILLER), min_size=1, max_size=7))
@example(["£0.02", "thanks!", "refund", "ORD-10000", "£0.01"])  # two checks on one order, one refund
def test_generated_queries_use_every_mention_and_wait_only_for_what_they_use(parts: list[str]) -> None:
    query = " ".join(parts)
    plan, _ = _plan_of(query)
    if plan is None:
        return  # refused as a usage error: the refusal is the answer (tested by the corpus)
    for task in plan.tasks.values():
        referenced = {value.task for value in task.arguments.values() if isinstance(value, Ref)}
        # A refund also waits for its eligibility check, the gate it is planned after: the check of
        # its order for its amount (not another amount's check on the same order).
        gates = {
            other.id
            for other in plan.tasks.values()
            if task.tool == "issue_refund"
            and other.tool == "refund_eligibility"
            and other.arguments.get("order_id") == task.arguments.get("order_id")
            and other.arguments.get("amount") == task.arguments.get("amount")
        }
        assert set(task.depends_on) == referenced | gates, f"{query!r}: {task.id} waits for {task.depends_on}"
    used = {str(value) for task in plan.tasks.values() for value in task.arguments.values()}
    listed = " ".join(str(item) for item in plan.unplanned)
    for mention in read_query(query).mentions:
        if mention.kind == "dates":
            dated = any(
                task.tool == "search_orders" and ({"placed_after", "placed_before"} & set(task.arguments))
                for task in plan.tasks.values()
            )
            assert dated or mention.text in listed, f"{query!r}: {mention} dropped"
        elif mention.kind == "amount":
            amounts = [task.arguments.get("amount") for task in plan.tasks.values()]
            assert mention.value in amounts or mention.describe() in listed, f"{query!r}: {mention} dropped"
        else:
            assert str(mention.value) in used or mention.describe() in listed, f"{query!r}: {mention} dropped"


@settings(max_examples=300, deadline=None)
@given(st.text(max_size=300))
def test_any_text_is_planned_or_refused_in_words(text: str) -> None:
    plan, refusal = corpus.plan_or_refusal(text)
    assert plan is not None or (refusal and "\n" not in refusal and "Traceback" not in refusal)


def test_an_order_named_for_a_refund_does_not_stand_for_what_someone_ordered() -> None:
    """ "ordered" asks of orders where it is asked ("what has jane ordered since October"), even beside
    a refund's order; told in a story ("I ordered it (ORD-10023)"), the order named is the one meant."""
    asked = plan_query("refund on ORD-10031 of £45 and what has jane.doe@example.com ordered since October")
    assert asked.tasks["orders"].arguments["placed_after"] == "2026-10-01" and asked.unplanned == ()
    told = plan_query(
        "Hello,\n\nI ordered the Barista Pro on 12 October (ORD-10023) and it turned up cracked. "
        "I would like a refund of the full £750, please.\n\nKind regards"
    )
    assert sorted(task.tool for task in told.tasks.values()) == ["refund_eligibility", "search_policies"]


def _drawn_orders() -> list[dict[str, Any]]:
    """Three orders of the demo world with their customer and first item, drawn with seed 42."""
    world = build_world(42)
    customers = {c["id"]: c for c in world.tables["customers"]["customers"]}
    items = {i["order_id"]: i for i in world.tables["orders"]["order_items"]}
    orders = [
        o for o in world.tables["orders"]["orders"] if o["customer_id"] not in {"CUST-00001", "CUST-00013"}
    ]
    drawn = random.Random(42).sample(orders, 3)
    return [{**o, "customer": customers[o["customer_id"]], "sku": items[o["id"]]["sku"]} for o in drawn]


@pytest.mark.parametrize("order", _drawn_orders(), ids=lambda o: o["id"])
@pytest.mark.parametrize(
    ("phrasing", "tool"),
    [
        ("Kindly provide related policy of KB-REFUNDS up to 2 levels, thank you.", "related_policies"),
        ("{customer_id} orders containing {sku}", "search_orders"),
        ("{name}'s last order, there's a problem with it - any tickets on it?", "search_orders"),
    ],
)
def test_words_that_frame_an_ask_in_other_words_are_read(
    order: dict[str, Any], phrasing: str, tool: str
) -> None:
    customer = order["customer"]
    plan = plan_query(phrasing.format(customer_id=customer["id"], sku=order["sku"], name=customer["name"]))
    assert tool in {task.tool for task in plan.tasks.values()}
    assert plan.unplanned == (), plan.unplanned


def _people_named_like_words() -> list[str]:
    """Customers of the demo world whose first name is also a word ("Jack", "Dawn"), drawn with seed 42."""
    from coordinator.planning.lexicon import NOT_NAMES

    people = [
        c["name"] for c in build_world(42).tables["customers"]["customers"]
        if c["name"].split()[0].lower() in NOT_NAMES and len(c["name"].split()) == 2
    ]  # fmt: skip
    return random.Random(42).sample(people, 3)


@pytest.mark.parametrize("name", _people_named_like_words())
@pytest.mark.parametrize(
    "phrasing",
    [
        "{name}'s tickets, the open ones",
        "hi its {name}, my knock box came smashed - any tickets?",
        "{name} - any orders?",
    ],
)
def test_a_first_name_that_is_a_word_before_a_surname_names_a_customer(name: str, phrasing: str) -> None:
    plan = plan_query(phrasing.format(name=name))
    lookups = [task.arguments for task in plan.tasks.values() if task.tool == "find_customers"]
    assert lookups == [{"name": name}], (phrasing, name, plan.unplanned)


# --- amounts as people say them (issue 45): the amount meant, or said not understood; never another ---

_SEED = random.Random(42)
_ORDERS = ("ORD-10023", "ORD-10031", "ORD-10277", "ORD-10900")
_ASKING = (
    "refund {amount} on {order}",
    "is {amount} back on {order} ok?",
    "can I refund {amount} on {order}?",
)


def _in_words(number: int) -> str:
    return num2words(number).replace(",", "")


def _spellings(pence: int) -> list[str]:
    """``pence`` as people write it: digits with or without grouping and pence, a decimal comma, "45p",
    in words ("one hundred and twenty pounds fifty"), as a price ("twelve fifty"), in thousands ("£1.2k")."""
    pounds, part = divmod(pence, 100)
    plain = f"{pence / 100:.2f}".removesuffix(".00")
    said = [f"£{plain}", f"£{pence / 100:,.2f}", f"{plain} GBP", f"{plain}GBP", f"£ {plain}", f"{plain} quid"]
    if part:
        said += [f"£{pounds},{part:02d}", f"{_in_words(pounds)} pounds {_in_words(part)}"]
    if not pounds:
        said.append(f"{part}p")
    if pounds and part >= 10:
        said.append(f"{_in_words(pounds)} {_in_words(part)}")
    if not part and not pounds % 100 and pounds >= 1000:
        said.append(f"£{pounds / 1000:g}k")
    return said


_AMOUNTS = [
    *(_SEED.randint(1, 500_000) for _ in range(12)),
    *(_SEED.randint(10, 50) * 10_000 for _ in range(3)),  # whole hundreds of pounds: "£1.2k"
    *(_SEED.randint(1, 99) for _ in range(2)),  # pence alone: "45p"
]
_SAID = [
    (_SEED.choice(_ASKING).format(amount=said, order=_SEED.choice(_ORDERS)), pence / 100, said)
    for pence in _AMOUNTS
    for said in _spellings(pence)
]
# Written as no amount of pounds and pence reads: a range, three digits of pence, thousands not in threes.
_NOT_ONE_AMOUNT = ["£45-£50", "£1.299", "£45.999", "45-50 quid", "1.2999k GBP", "£1,2345"]


@pytest.mark.parametrize(("query", "meant", "said"), _SAID, ids=[query for query, _, _ in _SAID])
def test_an_amount_as_people_say_it_is_read_as_that_amount_or_said_not_understood(
    query: str, meant: float, said: str
) -> None:
    plan = plan_query(query)
    checked = [task.arguments["amount"] for task in plan.tasks.values() if task.tool == "refund_eligibility"]
    unread = [item.what for item in plan.unplanned if said in item.what]
    assert checked == [pytest.approx(meant)] or (not checked and unread), (checked, plan.unplanned)


@pytest.mark.parametrize("said", _NOT_ONE_AMOUNT)
@pytest.mark.parametrize("asking", _ASKING)
def test_what_is_not_one_amount_is_never_checked_in_part(said: str, asking: str) -> None:
    plan = plan_query(asking.format(amount=said, order="ORD-10023"))
    assert "refund_eligibility" not in {task.tool for task in plan.tasks.values()}
    (unread,) = [item for item in plan.unplanned if said in item.what]
    assert "refund check takes one" in unread.why or "pounds and pence" in unread.why


_PRICED = [
    (asked.format(count=count, price=price, order=_SEED.choice(_ORDERS)), count * price)
    for asked in ("refund {count} x £{price} on {order}", "{order}: {count}x£{price} back, ok?", "refund {count} × £{price} on {order}?")
    for count, price in ((_SEED.randint(2, 9), _SEED.randint(3, 120)) for _ in range(3))
]  # fmt: skip


@pytest.mark.parametrize(("query", "meant"), _PRICED, ids=[query for query, _ in _PRICED])
def test_a_count_at_a_unit_price_is_the_amount_they_make(query: str, meant: float) -> None:
    checked = [task.arguments["amount"] for task in plan_query(query).tasks.values() if task.tool == "refund_eligibility"]  # fmt: skip
    assert checked == [meant]


@pytest.mark.parametrize("order", _SEED.sample(_ORDERS, 2))
@pytest.mark.parametrize("person", ["Mrs Hussain", "Mr Patel", "Ms Barnett"])
@pytest.mark.parametrize(
    "asked",
    ["can we refund half of {order} for {person}?", "{person} wants to know: a third of {order} back?"],
)
def test_a_titled_surname_beside_an_order_named_is_that_orders_customer(
    asked: str, person: str, order: str
) -> None:
    """The order's record names its customer: a surname alone is not looked up beside it."""
    plan = plan_query(asked.format(order=order, person=person))
    assert "find_customers" not in {task.tool for task in plan.tasks.values()}
    (wanted,) = plan.follow_ups
    assert wanted.order == order and wanted.share in (1 / 2, 1 / 3)
