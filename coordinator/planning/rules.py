"""The intent rules: what a question's records imply beyond its words, as a table of named rules.

The planner specification that ``tests/planner_corpus.toml`` is written against numbers its rules
1-14; this module writes them down. The rules that change which intents a query asks (the
*adjustments*) are ``RULES``, run in order by ``adjust``, and each one that fires is named on the
plan (``Plan.rules``). The other numbered rules are carried out where their data is; ``ELSEWHERE``
says where, so a maintainer finds every rule from its number.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

from coordinator.planning.intents import INTENTS, intent_named
from coordinator.planning.lexicon import ONE_ORDER, PRODUCT_WORDS, RETURN_NOUNS, SYMPTOM_WORDS
from coordinator.planning.reading import Reading, phrases_in
from coordinator.planning.rounds import asks_money_back, refunds_all
from coordinator.planning.spans import ASKS
from coordinator.planning.spans import clauses as clauses_of
from coordinator.planning.tools import LOOKUPS

__all__ = ["ELSEWHERE", "RULES", "Facts", "Rule", "adjust"]


@dataclass(frozen=True)
class Facts:
    """What the intent rules read: the query's reading and what it names that the planner looks up."""

    reading: Reading
    customers: bool  # a customer is named (looked up)
    orders: bool  # an order is named
    order_lookups: bool  # an order is named that is looked up (not only a refund check's)
    articles: bool  # a KB article is named
    refund_paid: bool  # "has the refund been paid / come through"
    only_the_amount_paid: bool  # every clause asking of invoices holds a refund check's amount
    placed_by: bool  # the orders or tickets asked are of the customer who placed the order named


@dataclass(frozen=True)
class Rule:
    """One intent rule: its name (the number the corpus cites, and what it says), why, when it
    applies to the intents read so far, and the intents after it."""

    name: str
    doc: str
    applies: Callable[[Facts, frozenset[str]], bool]
    apply: Callable[[Facts, frozenset[str]], frozenset[str]]


def adjust(facts: Facts, intents: frozenset[str]) -> tuple[frozenset[str], tuple[str, ...]]:
    """The intents after every rule of ``RULES`` in order, and the names of the rules that fired."""
    fired = []
    for rule in RULES:
        if rule.applies(facts, intents):
            after = rule.apply(facts, intents)
            if after != intents:
                fired.append(rule.name)
            intents = after
    return intents, tuple(fired)


def _named_a_customer(facts: Facts) -> bool:
    return bool(facts.reading.of("email", "customer_id", "name"))


def _money_back_of_a_customer(facts: Facts, intents: frozenset[str]) -> bool:
    reading = facts.reading
    money_back = "refund" not in intents and not facts.refund_paid and asks_money_back(reading)
    # of an order named, only a question ("£38 back on ORD-1, ok?") asks if it is allowed (not "she
    # wants £45 back")
    asked = "?" in reading.query or any(span.question for span in reading.spans)
    return money_back and (asked if reading.values("order_id") else _named_a_customer(facts))


def _paid_from_invoices(facts: Facts, intents: frozenset[str]) -> frozenset[str]:
    intents = (intents - {"refund"}) | {"invoices"}
    if not _a_policy_beyond_the_return(facts.reading):
        intents -= {"policies"}  # "the money of his return, is it arrived?": what was sent back
    return intents | {"orders"} if _named_a_customer(facts) else intents


def _a_policy_beyond_the_return(reading: Reading) -> bool:
    """Whether a span asks of the policies in words other than "return": in "has the money for his
    return come through" the return is what the money is for, where "and what's our policy if it
    hasn't" asks for a policy."""
    policy = intent_named("policies")
    words = policy.words - RETURN_NOUNS
    for span in reading.spans:
        if "policies" in span.asked:
            text = " ".join(token.word for token in span.tokens)
            if words & {token.word for token in span.tokens} or phrases_in(text, [policy]):
                return True
    return False


def _answered_by_lookups(facts: Facts, intents: frozenset[str]) -> frozenset[str]:
    """The intents asked only in clauses that name what one of their tools looks up: "related
    articles for KB-ESCALATION", "which policies sit two steps from KB-RETURNS" ask for the article's
    links, which its lookup answers, not for a search of the words."""
    reading = facts.reading
    answered = set()
    for intent in INTENTS:
        if len(intent.tools) != 1:
            continue  # "everything about jane.doe@example.com" asks every tool, not the lookup alone
        alternatives = {tool.strip() for tool in intent.tools[0].split("|")}
        kinds = {kind for kind, tool in LOOKUPS.items() if tool in alternatives}
        spans = list(reading.spans)
        clauses = [[spans[i] for i in group] for group in clauses_of(spans)]
        asking = [clause for clause in clauses if intent.name in {i for span in clause for i in span.asked}]
        named = [[m for span in clause for m in reading.mentions_in(span)] for clause in asking]
        if kinds and asking and all(any(m.kind in kinds for m in mentions) for mentions in named):
            answered.add(intent.name)
    return intents - answered


def _a_record_looked_up_is_no_customer(facts: Facts, intents: frozenset[str]) -> bool:
    """ "Look up our returns policy": "look up" asks for a customer only where no other record is
    asked in its clause; here it is the verb of the policy ask, and no one is named to look up."""
    if "customer" not in intents or facts.customers or facts.orders:
        return False
    spans = list(facts.reading.spans)
    clauses = [{i for index in group for i in spans[index].asked} for group in clauses_of(spans)]
    return all(asked - {"customer"} for asked in clauses if "customer" in asked)


def _asked_words(reading: Reading) -> set[str]:
    """The words of the spans that ask (not a story's, not courtesy)."""
    return {token.word for span in reading.spans if span.role == ASKS for token in span.tokens}


def _a_product_or_symptom_alone(facts: Facts, intents: frozenset[str]) -> bool:
    nobody = not facts.customers and not facts.orders and not facts.articles
    topic = set(facts.reading.topic) & (PRODUCT_WORDS | SYMPTOM_WORDS)
    return nobody and not intents & {"tickets", "policies"} and bool(topic)


def _an_order_alone(facts: Facts, intents: frozenset[str]) -> bool:
    asked = (intents | facts.reading.weak_intents) - {"orders"}
    return facts.order_lookups and not facts.customers and not facts.articles and not asked


RULES: tuple[Rule, ...] = (
    Rule(
        "money back of a customer's order is a refund",
        '"can we give her the £139 back": a refund on one of her orders, whatever the verb (the next '
        'round finds which); of an order named, asked as a question ("£38 back on ORD-10451, ok?"), a '
        "refund whose amount's check rule 2 plans",
        _money_back_of_a_customer,
        lambda facts, intents: intents | {"refund"},
    ),
    Rule(
        "rule 7: whether a refund was paid is asked of the invoices",
        "whether money moved is in billing's invoices (paid and refunded amounts), and the customer's "
        "orders say which was sent back; never a question of refund eligibility, nor of the returns "
        "policy where the return is only what the money is for",
        lambda facts, intents: facts.refund_paid,
        _paid_from_invoices,
    ),
    Rule(
        "rule 2: an amount paid on an order is a refund check, not invoices",
        '"Janice paid thirty-two pounds for it on ORD-10015, can we refund that" says what was paid, not '
        "to list the invoices",
        lambda facts, intents: "invoices" in intents and facts.only_the_amount_paid,
        lambda facts, intents: intents - {"invoices"},
    ),
    Rule(
        "rules 5 and 9: an ask its lookup answers",
        "an intent asked only in clauses that name what one of its tools looks up is answered by that "
        'lookup ("related articles for KB-ESCALATION"), not by a search of the words',
        lambda facts, intents: True,
        _answered_by_lookups,
    ),
    Rule(
        "rule 5: the order named is the one meant",
        '"the knock box in my order has a crack" beside "#10019": its lookup answers it; only words '
        "that ask for other orders search them",
        lambda facts, intents: (
            facts.orders
            and not facts.placed_by
            and _asked_words(facts.reading) & intent_named("orders").words <= ONE_ORDER
        ),
        lambda facts, intents: intents - {"orders"},
    ),
    Rule(
        "rule 5: orders read by meaning are the order named",
        '"can you check where this is up to?" after naming ORD-10002: the order\'s lookup answers it',
        lambda facts, intents: (
            "orders" in facts.reading.inferred and facts.order_lookups and not facts.placed_by
        ),
        lambda facts, intents: intents - {"orders"},
    ),
    Rule(
        "rule 10: a policy looked up asks no customer",
        '"look up our returns policy": with no one named, "look up" is the verb of the other ask in its '
        "clause, not a question about a customer",
        _a_record_looked_up_is_no_customer,
        lambda facts, intents: intents - {"customer"},
    ),
    Rule(
        "rule 11: everything is about a customer",
        'everything about an order is the order alone (rule 4); "refund the lot" is the whole order, '
        "not all about the customer",
        lambda facts, intents: not facts.customers or refunds_all(facts.reading),
        lambda facts, intents: intents - {"everything"},
    ),
    Rule(
        "rule 12: a product or symptom alone is tickets and policies",
        "with no customer, order or article named: who reported it, and what we do about it",
        _a_product_or_symptom_alone,
        lambda facts, intents: intents | {"tickets", "policies"},
    ),
    Rule(
        "rule 4: an order alone is the order and its tickets",
        "an order named with nothing else asked: what the sources can say about it",
        _an_order_alone,
        lambda facts, intents: intents | {"tickets"},
    ),
)

# The numbered rules that choose tools and arguments rather than intents, and where each is done.
ELSEWHERE: dict[str, str] = {
    "rule 1": "every customer named is looked up: by email or id customer_lookup, by name find_customers "
    "(planner._Planner._customers, tools.LOOKUPS)",
    "rule 2": "an order with an amount is a refund-eligibility check whatever the words "
    "(planner._pair_amounts, planner._Planner.plan_refunds)",
    "rule 3": "a refund word also searches the refund policy (intents.INTENTS: refund's tools, its default_topic)",
    "rule 5": "orders asked with only an order id are answered by get_order "
    "(intents.INTENTS: 'orders.search_orders | orders.get_order', the first that binds)",
    "rule 6": "tickets by the customer named, else by the order, else by the topic words "
    "(planner._Planner._calls_for: customers, then orders, then text)",
    "rule 8": "an order id without an amount is looked up with get_order (planner._Planner.order_lookups)",
    "rule 9": "a KB id is related_policies (planner._Planner.plan, tools.LOOKUPS['article_id'])",
    "rule 10": "a policy question searches the policies with its topic words (intents.INTENTS: policies)",
    "rule 13": "what the query names that no task uses is listed as not researched (planner._unaccounted, "
    "accounting.account_for_words)",
    "rule 14": "a query with nothing researchable is refused (planner._nothing_to_research, a QueryError)",
}
