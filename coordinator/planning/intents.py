"""What people ask and which tools answer it: each intent, its words (``coordinator.planning.lexicon``)
and its tools, best first.

The planner is data-driven: reading a query finds intents by their words (typos forgiven), and
planning binds each intent's tools to what the query names through the tools' published input
schemas. A source added later is planned by adding an intent (or a tool to one) here, and its words
to the lexicon, not code.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass

from coordinator.planning.lexicon import (
    INTENT_PHRASES,
    INTENT_WEAK_WORDS,
    INTENT_WORDS,
    RETURN_VERBS,
    TOPIC_WORDS,
)
from sources.identifiers import CUSTOMER_ID

__all__ = ["INTENTS", "Intent", "intent_named", "intents_answered_by", "vocabulary"]


@dataclass(frozen=True)
class Intent:
    """A kind of question, the words that ask it, and the tools that answer it, best first."""

    name: str
    words: frozenset[str]
    tools: tuple[str, ...]  # "source.tool" each planned; "a.x | b.y": the first that can be bound
    # When none of its tools can take what the query names: what was asked, and what to give.
    unanswered: str = ""
    ask_for: str = ""
    phrases: tuple[str, ...] = ()
    # A search word this intent always adds to a text search ("refund" for "money back").
    default_topic: str = ""
    # Its words are also worth searching for (a refund, a warranty), not only a choice of source.
    topical: bool = False
    # A phrasal verb whose particle may stand apart ("send the kettle back"): verbs, particle, and the
    # word a search for it uses.
    separable: tuple[tuple[str, ...], str, str] | None = None
    # Nouns that ask this intent only where its tools have something to take ("the customer of
    # ORD-10023" asks who; "the customer wants a refund" does not): never reported as unanswered.
    weak_words: frozenset[str] = frozenset()


INTENTS: tuple[Intent, ...] = (
    Intent(
        "customer",
        INTENT_WORDS["customer"],
        ("customers.customer_lookup",),
        weak_words=INTENT_WEAK_WORDS["customer"],
        phrases=INTENT_PHRASES["customer"],
        unanswered="a customer was asked about",
        ask_for=f"name them by email, {CUSTOMER_ID.shape} or name, or name one of their orders",
    ),
    Intent(
        "orders",
        INTENT_WORDS["orders"],
        ("orders.search_orders | orders.get_order",),
        phrases=INTENT_PHRASES["orders"],
        unanswered="orders were asked about",
        ask_for=f"name the customer (an email or {CUSTOMER_ID.shape}) or the order, e.g. 'orders of CUST-00042'",
    ),
    Intent(
        "tickets",
        INTENT_WORDS["tickets"],
        ("tickets.search_tickets",),
        phrases=INTENT_PHRASES["tickets"],
        unanswered="support tickets were asked about",
        ask_for="name the customer, the order, or what the tickets are about, e.g. 'open tickets of CUST-00042'",
    ),
    Intent(
        "invoices",
        INTENT_WORDS["invoices"],
        ("billing.list_invoices",),
        weak_words=INTENT_WEAK_WORDS["invoices"],
        unanswered="invoices were asked about",
        ask_for="name the customer or an order, e.g. 'invoices of CUST-00042'",
    ),
    Intent(
        "refund",
        INTENT_WORDS["refund"],
        ("billing.refund_eligibility", "kb.search_policies"),
        phrases=INTENT_PHRASES["refund"],
        default_topic="refund",
        topical=True,
        unanswered="a refund was asked about",
        ask_for="name the order and the amount, e.g. 'refund £45 on ORD-10031'",
    ),
    Intent(
        "policies",
        INTENT_WORDS["policies"],
        ("kb.search_policies | kb.related_policies",),
        phrases=INTENT_PHRASES["policies"],
        separable=(RETURN_VERBS, "back", "return"),
        topical=True,
        unanswered="a policy was asked about",
        ask_for="say which, e.g. 'policy on damaged items' or a KB id such as KB-REFUNDS",
    ),
    Intent(
        "everything",
        INTENT_WORDS["everything"],
        (
            "customers.customer_lookup",
            "orders.search_orders",
            "tickets.search_tickets",
            "billing.list_invoices",
        ),
        phrases=INTENT_PHRASES["everything"],
        unanswered="everything about someone was asked",
        ask_for="name the customer, e.g. 'everything about CUST-00042'",
    ),
)


def intent_named(name: str) -> Intent:
    """The intent of that name."""
    return next(each for each in INTENTS if each.name == name)


def intents_answered_by(tools: Iterable[str]) -> set[str]:
    """The intents one of whose tools ("source.tool") is among ``tools``: what a plan made by a model
    researches, read from the tools it calls."""
    called = set(tools)
    return {
        intent.name
        for intent in INTENTS
        if any(tool.strip() in called for entry in intent.tools for tool in entry.split("|"))
    }


def vocabulary() -> frozenset[str]:
    """Every word a typo may be corrected to: the intents' words and the topic words."""
    return TOPIC_WORDS.union(*(intent.words | intent.weak_words for intent in INTENTS))
