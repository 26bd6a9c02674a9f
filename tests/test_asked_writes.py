"""The question reader for writes: a write is asked only by a request to act, on what the request names
positively, within the amount it says; never by a question of eligibility, policy or status, a story,
a negated imperative, or a negated, contrasted or quoted mention (``coordinator.planning.writes``).

Hand-written hostile phrasings first, then generated ones: request and question forms, positive and
negated, quoted or contrasted mentions, amounts in digits and in words, with filler clauses and stories.
"""

from __future__ import annotations

import re

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from coordinator.planning.writes import REFUND_TOOL, AskedWrites, asked_writes

Seen = tuple[str, str | None, float | None, bool]


def seen(asked: AskedWrites) -> list[Seen]:
    return [(write.tool, write.target, write.amount, write.full) for write in asked.writes]


def refund(order: str, amount: float | None = None) -> Seen:
    return (REFUND_TOOL, order, amount, amount is None)


# --- hand-written -----------------------------------------------------------------------------------------

ASKED = {
    "Refund £45 on ORD-10031 now, the jug leaked": [refund("ORD-10031", 45)],
    "issue a £20 refund on ORD-10031": [refund("ORD-10031", 20)],
    "refund ORD-10031 in full": [refund("ORD-10031")],
    "refund ORD-10031 in full please": [refund("ORD-10031")],  # "in full please" is no clause of its own
    "refund ORD-10031, in full, thanks": [refund("ORD-10031")],
    "please process a refund of £45 for order 10031": [refund("ORD-10031", 45)],
    "pay back £45 on ORD-10031": [refund("ORD-10031", 45)],
    "can you refund £45 on ORD-10031 please": [refund("ORD-10031", 45)],
    "Can you refund £45 on ORD-10031?": [refund("ORD-10031", 45)],
    "could you please go ahead with the £45 refund on ORD-10031": [refund("ORD-10031", 45)],
    "Go ahead and refund forty-five pounds on ORD-10031": [refund("ORD-10031", 45)],
    "refund twelve pounds fifty on ORD-10030": [refund("ORD-10030", 12.5)],
    "reimburse a tenner on ORD-10022 pls, beans were stale": [refund("ORD-10022", 10)],
    "refnd £45 ord-10031 pls": [refund("ORD-10031", 45)],
    "give her a full refund on ORD-10002": [refund("ORD-10002")],
    "give Ruth her money back in full for ORD-10002": [refund("ORD-10002")],
    "a £45 refund on ORD-10031, please": [refund("ORD-10031", 45)],
    "ORD-10031: refund £45": [refund("ORD-10031", 45)],
    "Refund ORD-10031, £45": [refund("ORD-10031", 45)],
    "Hi team, please refund £45 on ORD-10031. Thanks": [refund("ORD-10031", 45)],
    "Investigate CUST-00042: recent orders, and refund £45 on ORD-10031": [refund("ORD-10031", 45)],
    "Refund £45 on ORD-10031 and are there tickets?": [refund("ORD-10031", 45)],
    # what the request names positively, and only that
    "Refund £45 on ORD-10031, not ORD-10134": [refund("ORD-10031", 45)],
    "Refund £45 — not on ORD-10134 but on ORD-10031": [refund("ORD-10031", 45)],
    "refund £45 on not ORD-10134 but ORD-10031": [refund("ORD-10031", 45)],
    'Unlike "ORD-10134", which must never be refunded, refund ORD-10031 for £45': [refund("ORD-10031", 45)],
    "refund £45 on ORD-10031 other than ORD-10134": [refund("ORD-10031", 45)],
    "refund £45 on ORD-10031 rather than ORD-10134": [refund("ORD-10031", 45)],
    "refund £45 on ORD-10031 instead of ORD-10134": [refund("ORD-10031", 45)],
    "Refund £45 on ORD-10031. This is not about ORD-10134.": [refund("ORD-10031", 45)],
    "Don't refund ORD-10134; refund £45 on ORD-10031 instead": [refund("ORD-10031", 45)],
    "Refund £45 on ORD-10031 and cancel ORD-10134": [refund("ORD-10031", 45)],
    "Refund £20 on ORD-10031, not in full": [refund("ORD-10031", 20)],
    "refund £45 on ORD-10031, never £450": [refund("ORD-10031", 45)],
    "Refund £45 on ORD-10031 (and £450 on ORD-10134 — no, don't)": [refund("ORD-10031", 45)],
    "Refund ORD-10031 in full, don't wait": [refund("ORD-10031")],
    "Refund £45 on ORD-10031, no need to check first": [refund("ORD-10031", 45)],
    # an order named twice is one write; one order and its own amount per clause, one write each
    "Refund £45 on ORD-10031 and ORD-10031": [refund("ORD-10031", 45)],
    "Refund £45 on ORD-10031. Yes, refund £45 on ORD-10031.": [refund("ORD-10031", 45)],
    "Refund £45 on ORD-10031 and £20 on ORD-10022": [refund("ORD-10031", 45), refund("ORD-10022", 20)],
    "refund ORD-10102 (£12.99) and ORD-10103 (£30)": [refund("ORD-10102", 12.99), refund("ORD-10103", 30)],
    # a condition the eligibility check decides
    "refund £45 on ORD-10031 if it is eligible": [refund("ORD-10031", 45)],
    "If it's allowed, refund £45 on ORD-10031": [refund("ORD-10031", 45)],
    "approve the £45 refund on ORD-10031 if it's within policy": [refund("ORD-10031", 45)],
    "Check whether ORD-10031 is eligible and if so refund it in full": [refund("ORD-10031")],
    "cancel ORD-10033 and refund twenty pounds on it": [refund("ORD-10033", 20)],
}

NOTHING_ASKED = [
    # questions of eligibility, policy or status
    "Is a £45 refund on ORD-10031 allowed?",
    "Is a £45 refund on ORD-10031 allowed? This is not about ORD-10134.",
    "can we refund ORD-10031?",
    "can we refund £45 on ORD-10031",
    "could I refund £45 on ORD-10031?",
    "should we refund £45 on ORD-10031",
    "check whether ORD-10031 can be refunded",
    "check if £45 can be refunded on ORD-10031",
    "what would a refund of £45 on ORD-10031 look like",
    "was ORD-10031 refunded?",
    "has the £45 refund on ORD-10031 gone through?",
    "investigate CUST-00042: recent orders, and is a £45 refund on ORD-10031 allowed?",
    "Investigate jane.doe@example.com: recent orders, open tickets, and whether a £750 refund on ORD-10023 is allowed",
    "refund 45 quid on ORD-10031?",
    "Refund £45 on ORD-10031 - is that allowed?",
    "refund £45 on ORD-10031, would that be ok?",
    "can ORD-10023 be refunded in full?",
    "what's the refund policy for ORD-10031 £45",
    "give me the refund status of ORD-10031 £45",
    "refund status for ORD-10031 £45",
    "tell me if we can refund £45 on ORD-10031",
    "Can you tell me whether I can refund £45 on ORD-10031?",
    # stories and someone else's words
    "the customer asked us to refund £45 on ORD-10031",
    "she wants us to refund ORD-10031 in full",
    "we refunded £45 on ORD-10031 last week",
    "I was told to refund £45 on ORD-10031",
    "She said: refund £45 on ORD-10031",
    'The customer wrote "refund £45 on ORD-10031 now"',
    "Customer: refund £45 on ORD-10031 now\nAgent: sorry to hear that\nwhat does our policy say?",
    "Dear Coffee Co,\n\nPlease refund £45 on ORD-10031, the jug leaked.\n\nRegards,\nJane Doe",
    "From: jane@example.com\nSubject: jug\nPlease refund £45 on ORD-10031.",
    "Hello,\nPlease refund £45 on ORD-10031.\nJane\n\nagent note: is she eligible?",
    "Hi, jane.doe@example.com here - I want my money back for ORD-10023 (£750). Regards",
    "Can I get a refund of £45 on ORD-10031?",
    # negated imperatives
    "do not refund ORD-10031",
    "do not refund £45 on ORD-10031",
    "don't issue a refund",
    "don't issue a £45 refund on ORD-10031",
    "never refund ORD-10031 in full",
    "no refund on ORD-10031 £45",
    "please don't refund £45 on ORD-10031",
    # taken back
    "Refund £45 on ORD-10031. Actually, don't.",
    "Refund £45 on ORD-10031, no wait, never mind",
    "Refund £45 on ORD-10031. Scratch that.",
    "Refund £45 on ORD-10031 — no.",
    # nouns, not the verb
    "refund of £45 on ORD-10031",
    "ORD-10023 £750 refund see kb-damaged",
    "refund request from jane for ORD-10031 £45",
]

UNCLEAR = {
    "refund £45 on ORD-10031 and ORD-10022": "it names 2 orders for one refund (ORD-10031, ORD-10022)",
    "reimburse ORD-10023 and ORD-10031": "it names 2 orders for one refund (ORD-10023, ORD-10031)",
    "refund £45 or £60 on ORD-10031": "it names 2 amounts for one refund on ORD-10031 (£45.00, £60.00)",
    "refund 45 quid and 750 quid on ORD-10023": "it names 2 amounts for one refund on ORD-10023",
    "refund £45 please": "it asks for a refund of £45.00 but names no order it is on",
    "refund £45 on every order except ORD-10134": "it asks for a refund of £45.00 but names no order",
    "Refund 'ORD-10031' £45": "names no order it is on (a negated or quoted one is not taken)",
    "refund ORD-10031": "it asks to refund ORD-10031 but says no amount",
    "refund ORD-10031 if it is eligible": "it asks to refund ORD-10031 but says no amount",
    "refund on ORD-10031 please": "it asks to refund ORD-10031 but says no amount",
    "refund ORD-10031 please, not in full": "it asks to refund ORD-10031 but says no amount",
    "refund ORD-10031 please, but not in full": "it asks to refund ORD-10031 but says no amount",
    "refund please": "it asks for a refund but names no order and no amount",
    "refund £45 on ORD-10031 if the customer returns it": "only 'if the customer returns it', which research cannot",
    "refund £45 on ORD-10031 unless it was already refunded": "only 'unless it was already refunded'",
    "Did the jug arrive broken? If so, refund £45 on ORD-10031": "only 'If so', which research cannot decide",
    "Is ORD-10031 eligible? If not, refund £20 on ORD-10031": "only 'If not'",
    "Refund £45 on ORD-10031. Refund £20 on ORD-10031.": "it asks for 2 different issue_refund calls on ORD-10031",
    "Mary's scale on ORD-10020 came back. Refund her the full amount if policy allows.": (
        "it asks for a refund in full but names no order it is on"
    ),
}


@pytest.mark.parametrize("query", list(ASKED))
def test_a_request_to_act_asks_for_exactly_its_write(query: str) -> None:
    asked = asked_writes(query)
    assert seen(asked) == ASKED[query], asked
    assert asked.unclear == ()
    assert all(write.asked and write.asked in query for write in asked.writes)


@pytest.mark.parametrize("query", NOTHING_ASKED)
def test_a_question_a_story_or_a_negated_imperative_asks_for_no_write(query: str) -> None:
    assert asked_writes(query) == AskedWrites(), query


@pytest.mark.parametrize("query", list(UNCLEAR))
def test_what_cannot_be_honoured_as_asked_is_no_write_and_says_what_to_write(query: str) -> None:
    asked = asked_writes(query)
    assert asked.writes == (), asked
    assert len(asked.unclear) == 1 and UNCLEAR[query] in asked.unclear[0], asked.unclear
    why, _, next_step = asked.unclear[0].partition(": ")
    assert why.startswith("it ") and next_step, asked.unclear  # "why: what to write instead"
    assert [(gap.why, gap.next_step) for gap in asked.gaps] == [(why, next_step)]


def test_an_unclear_sentence_says_what_to_write_instead() -> None:
    (two,) = asked_writes("refund £45 on ORD-10031 and ORD-10022").unclear
    assert two.endswith(
        "ask for one refund per order, e.g. 'refund £45.00 on ORD-10031' and 'refund £45 on ORD-10022'"
    )
    (none,) = asked_writes("refund £45 on ORD-10031 if the customer returns it").unclear
    assert none.endswith("find that out first, then ask for the refund without the condition")
    (amount,) = asked_writes("Is ORD-10031 right? Refund £45").unclear
    assert amount.endswith("name the order in the request, e.g. 'refund £45.00 on ORD-10031'")


def test_the_words_that_asked_are_kept() -> None:
    (write,) = asked_writes("Hi team, please refund £45 on ORD-10031, the jug leaked").writes
    assert write.asked == "please refund £45 on ORD-10031"
    (write,) = asked_writes("Refund ORD-10031, £45").writes
    assert write.asked == "Refund ORD-10031, £45"


def test_an_amount_in_another_currency_is_never_refunded() -> None:
    asked = asked_writes("please issue a refund of $45 on ORD-10031")
    assert asked.writes == () and "says no amount" in asked.unclear[0]


def test_a_query_that_cannot_be_read_asks_for_nothing() -> None:
    assert asked_writes("refund $45 on ORD-10031") == AskedWrites()
    assert asked_writes("refund £45 on ORD-10031\x00") == AskedWrites()


# --- a registered server's write tools ------------------------------------------------------------------

TOOLS = ("append_line", "notes.wipe", "issue_refund")


@pytest.mark.parametrize(
    ("query", "expected"),
    [
        ("run append_line with hello", [("append_line", None)]),
        ("append_line hello", [("append_line", None)]),
        ("please call notes.append_line with 'hello'", [("append_line", None)]),
        ("can you run `append_line` with hello?", [("append_line", None)]),
        ("use the append_line tool to add hello", [("append_line", None)]),
        ("run append_line on ORD-10031", [("append_line", "ORD-10031")]),
        ("wipe the scratch folder", [("wipe", None)]),
        ("run append_line with hello, and what are CUST-00042's orders?", [("append_line", None)]),
        ("don't run append_line", []),
        ("never call append_line on ORD-10031", []),
        ("is append_line safe to run?", []),
        ("should we run append_line?", []),
        ("the admin ran append_line yesterday", []),
        ('she wrote "run append_line with hello"', []),
        ("check what append_line does", []),
        ("what does the wipe tool do?", []),
        ("append the line hello", []),
        ("Refund £45 on ORD-10031", [("issue_refund", "ORD-10031")]),  # a refund by the refund rules
    ],
)
def test_a_registered_write_is_asked_only_by_name_in_a_request(
    query: str, expected: list[tuple[str, str | None]]
) -> None:
    asked = asked_writes(query, TOOLS)
    assert [(write.tool, write.target) for write in asked.writes] == expected, asked
    assert all(write.amount is None for write in asked.writes if write.tool != REFUND_TOOL)


def test_a_registered_write_on_two_ids_is_unclear() -> None:
    asked = asked_writes("run append_line on ORD-10031 and ORD-10022", TOOLS)
    assert asked.writes == ()
    assert asked.unclear == (
        "it asks for one append_line call on 2 ids (ORD-10031, ORD-10022): "
        "ask for one append_line call per id, e.g. 'run append_line on ORD-10031'",
    )


# --- generated phrasings ------------------------------------------------------------------------------

ORDER, DECOY = "ORD-10031", "ORD-10134"
# An amount as written, and its value.
AMOUNTS = [
    ("£45", 45.0), ("45 GBP", 45.0), ("£45.00", 45.0), ("45 quid", 45.0), ("forty-five pounds", 45.0),
    ("£20", 20.0), ("twenty pounds", 20.0), ("a tenner", 10.0), ("twelve pounds fifty", 12.5),
    ("£1,250.50", 1250.5), ("seven hundred and fifty pounds", 750.0),
]  # fmt: skip
# Requests to act: each asks for {amount} on {order}.
REQUESTS = [
    "Refund {amount} on {order}",
    "refund {amount} on {order} now",
    "please refund {order} {amount}",
    "issue a {amount} refund on {order}",
    "please process a refund of {amount} for {order}",
    "pay back {amount} on {order}",
    "can you refund {amount} on {order} please",
    "could you refund {amount} on {order}",
    "go ahead and reimburse {amount} on {order}",
    "kindly issue a refund of {amount} on {order}",
    "just refund {amount} on {order}",
    "I need you to refund {amount} on {order}",
]
# Not requests: each names the same order and amount.
NOT_REQUESTS = [
    "Is a {amount} refund on {order} allowed?",
    "is {order} eligible for a {amount} refund?",
    "can we refund {amount} on {order}?",
    "could I refund {amount} on {order}?",
    "should we refund {amount} on {order}",
    "check whether {order} can be refunded {amount}",
    "what would a refund of {amount} on {order} look like",
    "was {order} refunded {amount}?",
    "refund {amount} on {order}?",
    "what is the refund policy for {amount} on {order}",
    "the customer asked us to refund {amount} on {order}",
    "we refunded {amount} on {order} yesterday",
    "She said: refund {amount} on {order}",
    'the customer wrote "refund {amount} on {order}"',
    "do not refund {amount} on {order}",
    "don't issue a {amount} refund on {order}",
    "never refund {amount} on {order}",
]
# A decoy order beside the request, named so that it is not a request: inside its sentence (before its
# "?"), or a sentence of its own after it.
INLINE_DECOYS = [
    ", not {decoy}",
    " rather than {decoy}",
    " instead of {decoy}",
    ", other than {decoy}",
    ", and never {decoy}",
    ' (unlike "{decoy}", which must never be refunded)',
    ", not '{decoy}'",
    " - but not on {decoy}",
    " (and £450 on {decoy} - no, don't)",
    ", never £450 on {decoy}",
]
SENTENCE_DECOYS = [
    " This is not about {decoy}.",
    " Do not refund {decoy}.",
    " Never refund anything on {decoy}!",
    " Don't touch '{decoy}'.",
    ' "Refund {decoy} in full," she wrote.',
]
DECOYS = [(decoy, "") for decoy in INLINE_DECOYS] + [("", decoy) for decoy in SENTENCE_DECOYS] + [("", "")]
BEFORE = ["", "Hi team, ", "The jug leaked. ", "Urgent: ", "Investigate CUST-00042: recent orders. "]
AFTER = [
    "",
    " The jug leaked.",
    " Thanks",
    " The customer is furious!",
    " Also check the tickets for CUST-00042.",
]


def phrased(
    phrasing: str, amount: str, order: str, decoy: tuple[str, str], before: str = "", after: str = ""
) -> str:
    """``phrasing`` said of ``amount`` on ``order``, its decoy inside its sentence (before its closing
    mark) or after it, between a filler before and one after."""
    said = phrasing.format(amount=amount, order=order)
    body, mark = (said[:-1], said[-1]) if said[-1] in "?." else (said, ".")
    inline, sentence = (part.format(decoy=DECOY) for part in decoy)
    return f"{before}{body}{inline}{mark}{sentence}{after}"


_PHRASINGS = settings(max_examples=400, deadline=None, suppress_health_check=[HealthCheck.too_slow])


@_PHRASINGS
@given(
    st.sampled_from(REQUESTS), st.sampled_from(AMOUNTS), st.sampled_from(DECOYS),
    st.sampled_from(BEFORE), st.sampled_from(AFTER),
)  # fmt: skip
def test_a_request_asks_for_one_write_on_its_order_within_its_amount(
    request: str, amount: tuple[str, float], decoy: tuple[str, str], before: str, after: str
) -> None:
    query = phrased(request, amount[0], ORDER, decoy, before, after)
    asked = asked_writes(query)
    assert seen(asked) == [refund(ORDER, amount[1])], (query, asked)
    assert asked.unclear == ()


@_PHRASINGS
@given(
    st.sampled_from(NOT_REQUESTS), st.sampled_from(AMOUNTS), st.sampled_from(DECOYS),
    st.sampled_from(BEFORE), st.sampled_from(AFTER),
)  # fmt: skip
def test_a_question_story_or_negated_imperative_never_asks_for_a_write(
    phrasing: str, amount: tuple[str, float], decoy: tuple[str, str], before: str, after: str
) -> None:
    query = phrased(phrasing, amount[0], ORDER, decoy, before, after)
    assert asked_writes(query).writes == (), query


@_PHRASINGS
@given(
    st.lists(
        st.tuples(st.sampled_from(REQUESTS + NOT_REQUESTS), st.sampled_from(AMOUNTS), st.sampled_from(DECOYS)),
        min_size=1, max_size=4,
    ),
    st.sampled_from([ORDER, "ORD-10022", "ORD-10008"]),
)  # fmt: skip
def test_whatever_is_said_a_write_is_never_more_than_asked_and_at_most_one_per_order(
    parts: list[tuple[str, tuple[str, float], tuple[str, str]]], order: str
) -> None:
    """Several sentences, requests and not, about one order: at most one write, on that order, never on
    a decoy, and never more than an amount a request asked for (two different asks: none, unclear)."""
    query = " ".join(phrased(phrasing, amount[0], order, decoy) for phrasing, amount, decoy in parts)
    asked = asked_writes(query)
    requested = {amount[1] for phrasing, amount, _ in parts if phrasing in REQUESTS}
    targets = [write.target for write in asked.writes]
    assert len(targets) == len(set(targets)) <= 1 and DECOY not in targets, (query, asked)
    for write in asked.writes:
        assert write.target == order and write.amount in requested, (query, asked)
    if len(requested) == 1:
        assert seen(asked) == [refund(order, requested.pop())], (query, asked)
    elif len(requested) > 1:
        assert asked.writes == () and any("different issue_refund calls" in u for u in asked.unclear), query


@_PHRASINGS
@given(st.sampled_from(REQUESTS), st.sampled_from(AMOUNTS), st.sampled_from(AMOUNTS))
def test_two_orders_or_two_amounts_for_one_refund_is_no_write(
    request: str, amount: tuple[str, float], other: tuple[str, float]
) -> None:
    two_orders = request.format(amount=amount[0], order=f"{ORDER} and ORD-10022")
    asked = asked_writes(two_orders)
    assert asked.writes == () and "orders for one refund (ORD-10031, ORD-10022)" in asked.unclear[0], (
        two_orders
    )
    if amount[1] != other[1]:
        two_amounts = request.format(amount=f"{amount[0]} or {other[0]}", order=ORDER)
        asked = asked_writes(two_amounts)
        assert asked.writes == () and re.search(r"2 amounts for one refund on ORD-10031", asked.unclear[0])
