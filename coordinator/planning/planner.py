"""The deterministic planner: a query's reading becomes a checked ``Plan``, and nothing is dropped.

Planning is driven by data, not by per-tool code:

- what the query names and asks comes from ``coordinator.planning.reading``;
- which tools answer which question comes from ``coordinator.planning.intents``;
- what each tool takes comes from its published input schema (``sources/tools.json``, checked
  against every server's ``tools/list`` by a test): an argument's format (its pattern) says which
  kind of thing it takes (a customer id, an order id, search text...), so a tool is bound to what the
  query names by matching kinds.

The steps:

1. Every customer the query names is looked up (an email or id with ``customer_lookup``, a person's
   name with ``find_customers``); every order id without an amount with ``get_order``; every order id
   with an amount is a refund-eligibility check, whatever the verb; every KB id is ``related_policies``.
2. Each intent's tools are bound to the best subject the query gives: a named customer, else a named
   order, else the search words. A tool that needs a customer when only an order is named gets the
   order's customer from ``get_order`` (a ``Ref``).
3. A task waits only for the lookups whose output it uses: a customer id named in the query is used
   as it is, and a refund check needs no customer at all.
4. A refund the question asks for (a request to act, read by ``coordinator.planning.writes``; never a
   question of eligibility) is planned after the check it needs: ``issue_refund`` waits for its
   eligibility check (for "in full", with the amount the order's lookup gives), so a refund the check
   refuses is blocked and says why. Its purpose is its own, which only a grant the user gives
   (``--grant billing:refund``) lets the broker elevate; its idempotency key comes from the question.
5. Whatever the query named or asked that no task uses is ``unplanned``, with why and what to do; so
   is a write it seems to ask that cannot be honoured as asked (two orders for one refund, ...).
   A query with no task at all is a ``QueryError`` that says what was understood and what is missing.
"""

from __future__ import annotations

import hashlib
import re
from collections import Counter
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, TypeVar

from coordinator.planning.accounting import account_for_words
from coordinator.planning.intents import INTENTS, Intent, intent_named, intents_answered_by
from coordinator.planning.lexicon import (
    ARTICLE_LINKS,
    NOT_ARRIVED,
    ONE_ORDER,
    REFUND_PAID,
    SHORTHAND,
    SYMPTOM_WORDS,
    THEIR_OTHER,
)
from coordinator.planning.lexicon import TOPIC_WORDS as SEARCHED_TOPICS
from coordinator.planning.money import SAY_ONE_AMOUNT, share_said
from coordinator.planning.plan import FollowUp, Plan, PlannedTask, Ref, Unplanned
from coordinator.planning.reading import Mention, QueryError, Reading, read_query, unknown_ids, why_left_out
from coordinator.planning.rounds import (
    asks_money_back,
    awaiting,
    awaiting_links,
    fallback_of,
    follow_up,
    newest,
    on_the_order,
    second_ask_at,
    singular,
    words_read,
)
from coordinator.planning.rules import Facts, adjust
from coordinator.planning.spans import clauses as clauses_of
from coordinator.planning.tools import (
    ARGUMENT_PHRASES,
    ASKED_ONLY,
    GIVES,
    LOOKUPS,
    PATH_KINDS,
    SUBJECT_KINDS,
    TASK_NAMES,
    TOPIC_WORDS,
    WHY,
    WHY_LOOKED_UP,
    Argument,
    Catalog,
    demo_catalog,
    intents_taking,
)
from coordinator.planning.writes import REFUND_TOOL, writes_in
from sources.domain import TODAY, pounds
from sources.identifiers import CUSTOMER_ID, ORDER_ID, names
from subagents.writes import AskedWrite

__all__ = ["QueryError", "account_for", "left_out", "plan_query", "read_for"]

_REFUND_PURPOSE = "refund research"
# The purpose of a refund the question asks for. The broker grants ``billing:refund`` by purpose, and
# the default grants give billing's records for refund research alone: so only a grant the user gives
# for any purpose (``--grant billing:refund``) lets the refund through; the research never gets it.
_WRITE_PURPOSE = "refund the question asks for"
# Most customers, orders or refund checks one query researches.
MAX_SUBJECTS = 10
ItemT = TypeVar("ItemT")


# --- the calls a plan is made of ---------------------------------------------------------------------


@dataclass
class _Call:
    """A planned call before task ids are given: tool, arguments, and the calls it waits for."""

    tool: str
    arguments: dict[str, Any]
    subject: str  # what it is about, to tell apart two calls of one tool ("ORD-10031")
    needs: dict[str, _Call] = field(default_factory=dict)  # argument -> the lookup it comes from
    purpose: str = "research"
    id: str = ""
    after: list[_Call] = field(default_factory=list)  # what it waits for without using its output
    why: str = ""  # why it is planned, where its tool's sentence does not say (a write asked for)

    @property
    def key(self) -> tuple[str, str]:
        plain = {name: value for name, value in self.arguments.items() if name not in self.needs}
        upstream = {name: call.key for name, call in self.needs.items()}
        return self.tool, repr(sorted(plain.items())) + repr(sorted(upstream.items()))


def _refund_check(order: str, amount: Any, needs: dict[str, _Call] | None = None) -> _Call:
    """The refund-eligibility check of ``amount`` on ``order`` (refund research, whatever the verb)."""
    return _Call(
        "billing.refund_eligibility", {"order_id": order, "amount": amount}, subject=order,
        needs=needs or {}, purpose=_REFUND_PURPOSE,
    )  # fmt: skip


@dataclass
class _Subject:
    """Something a tool can be about: a customer, an order, or search words; and how to pass it."""

    kind: str  # customer, order, text, article
    label: str
    values: dict[str, Any]  # argument kind -> value ("customer_id" -> "CUST-00042")
    lookup: _Call | None = None  # the call that gives the values a lookup would give


class _Planner:
    def __init__(self, reading: Reading, catalog: Catalog) -> None:
        self.reading = reading
        self.catalog = catalog
        # The writes the question asks for (``coordinator.planning.writes``): its refunds, and a
        # registered server's write tools it asks for by name (no other write is planned).
        self.asked = writes_in(reading, catalog.writes)
        self.tools = catalog.tools
        self.calls: list[_Call] = []
        self.unplanned: list[Unplanned] = []
        # (ask, orders search): an ask about the order the next round chooses from what the search finds
        self.awaiting: list[tuple[str, _Call]] = []
        self.refund_amount_known = True
        # "has her refund come through?": kept as found, for the words it reads (``_read_here``)
        self.refund_paid_ask = REFUND_PAID.search(_said_plainly(reading))
        self.pairs, self.single_amounts = _pair_amounts(reading)
        self._second_amounts_apart()
        self.pairs = self._at_most(
            self.pairs, "refund checks", lambda pair: f"{pair[1].describe()} on {pair[0].value}"
        )
        paired_orders = {order.value for order, _ in self.pairs}
        self.customers = self._customers()
        orders = self._at_most(reading.values("order_id"), "orders", str)
        self.orders = [_Subject("order", order, {"order_id": order}) for order in orders]
        self.order_lookups = {
            subject.label: self._add(self._lookup_call("order_id", subject.label))
            for subject in self.orders
            if subject.label not in paired_orders
        }
        self.articles = [_Subject("article", a, {"article_id": a}) for a in reading.values("article_id")]
        self.placed_by = self._placed_by()
        # What the question's records imply beyond its words: the intent rules (``rules.RULES``)
        intents, self.rules = adjust(self._facts(), reading.intents)
        self.intents = set(intents)
        # One search text for every text search: the query's own words, and the word each topical
        # intent always searches for ("refund" for "money back").
        words, self.unknown_ids, self.looked_for_among = _without_unknown_ids(reading, self.intents)
        for intent in INTENTS:
            if intent.name in self.intents and intent.default_topic and intent.default_topic not in words:
                words.append(intent.default_topic)
        self.text = " ".join(words)
        self.own_words = bool(
            set(reading.topic) - {i.default_topic for i in INTENTS} - intent_named("refund").words
        )

    # -- subjects

    def _at_most(self, items: list[ItemT], what: str, name: Callable[[ItemT], str]) -> list[ItemT]:
        """The first ``MAX_SUBJECTS`` of ``items``; the rest listed as not researched (a pasted list of
        hundreds of ids must not become hundreds of calls)."""
        for item in items[MAX_SUBJECTS:]:
            self.unplanned.append(Unplanned(
                name(item), f"one query researches at most {MAX_SUBJECTS} {what}",
                "ask about the rest in another query",
            ))  # fmt: skip
        return items[:MAX_SUBJECTS]

    def _customers(self) -> list[_Subject]:
        subjects: list[_Subject] = []
        mentions = list(
            {m.value: m for m in reversed(self.reading.of("email", "customer_id", "name"))}.values()
        )
        mentions.sort(key=lambda mention: mention.start)
        for mention in self._at_most(mentions, "customers", lambda m: str(m.value)):
            lookup = self._add(self._lookup_call(mention.kind, mention.value))
            values = {"customer": mention.value if mention.kind != "name" else None}
            values["customer_id"] = mention.value if mention.kind == "customer_id" else None
            subjects.append(_Subject("customer", mention.value, values, lookup))
        return subjects

    def _placed_by(self) -> list[_Subject]:
        """The customers who placed the orders named, where the question asks of them and names no
        customer ("who placed ORD-10412, and what else have they ordered?"): their searches take the
        customer_id the order's lookup gives."""
        if self.customers or not self.orders or not THEIR_OTHER.search(self.reading.query.lower()):
            return []
        subjects = []
        for order in self.orders:
            lookup = self.order_lookups.get(order.label) or self._add(
                self._lookup_call("order_id", order.label)
            )
            self.order_lookups[order.label] = lookup
            subjects.append(_Subject("customer", f"the customer of {order.label}", {}, lookup))
        return subjects

    def _lookup_call(self, kind: str, value: str) -> _Call:
        tool = LOOKUPS[kind]
        arguments = {name: value for name, argument in self.tools[tool].items() if argument.required}
        return _Call(tool, arguments, subject=value)

    def _add(self, call: _Call) -> _Call:
        for planned in self.calls:
            if planned.key == call.key:
                return planned
        self.calls.append(call)
        return call

    # -- binding a tool to a subject

    def _bind(self, tool: str, subject: _Subject, *, derived: bool) -> _Call | None:
        """The call of ``tool`` about ``subject``, or None when the tool cannot take it.

        ``derived`` allows a customer argument to come from an order's lookup.
        """
        lookup = subject.lookup
        if (
            lookup is not None
            and tool in LOOKUPS.values()
            and tool.split(".")[0] == lookup.tool.split(".")[0]
        ):
            return lookup  # the subject's own lookup already answers who they are
        arguments: dict[str, Any] = {}
        needs: dict[str, _Call] = {}
        takes_subject = False
        for name, argument in self.tools[tool].items():
            value = self._value(argument, subject, name, needs, derived=derived)
            if value is None:
                if argument.required:
                    return None
                continue
            arguments[name] = value
            takes_subject = takes_subject or argument.kind in SUBJECT_KINDS or argument.kind == subject.kind
        if not takes_subject:
            return None
        text = next((name for name, argument in self.tools[tool].items() if argument.kind == "text"), None)
        about = _searched_about(self.reading) if subject.kind == "customer" and text else None
        if text and about:  # "her tickets about a wrong colour": what to search for within hers
            arguments[text] = about
        return _Call(tool, arguments, subject=subject.label, needs=needs)

    def _value(
        self, argument: Argument, subject: _Subject, name: str, needs: dict[str, _Call], *, derived: bool
    ) -> Any:
        kind = argument.kind
        if kind in ("customer_id", "customer") and subject.kind == "customer":
            direct = subject.values.get(kind) or subject.values.get("customer_id")
            if direct is not None:
                return direct
            assert subject.lookup is not None
            needs[name] = subject.lookup
            return Ref("?", GIVES[subject.lookup.tool]["customer_id"])
        if kind in ("customer_id", "customer") and subject.kind == "order" and derived:
            lookup = self.order_lookups.get(subject.label) or self._add(
                self._lookup_call("order_id", subject.label)
            )
            self.order_lookups[subject.label] = lookup
            needs[name] = lookup
            return Ref("?", GIVES[lookup.tool]["customer_id"])
        if kind == "order_id" and subject.kind == "order":
            return subject.values["order_id"]
        if kind == "text" and subject.kind == "text":
            return subject.values["text"]
        if kind == "article_id" and subject.kind == "article":
            return subject.values["article_id"]
        if kind == "choice":
            return next((word for word in self.reading.words if word in argument.choices), None)
        if kind == "sku" and subject.kind == "customer":
            skus = self.reading.values("sku")
            return skus[0] if skus else None
        if kind == "date" and subject.kind == "customer":
            return self._date(name)
        if kind == "links" and subject.kind == "article":
            counts = self.reading.values("links")
            return counts[0] if counts else None
        if subject.kind not in _BUILT_IN_SUBJECTS:  # a registered tool's: what the query names of its kind
            return subject.values[kind] if kind == subject.kind else next(iter(self._named(kind)), None)
        return None

    def _date(self, name: str) -> str | None:
        ranges = [mention.value for mention in self.reading.of("dates")]
        if not ranges:
            return None
        bound = "after" if "after" in name or "since" in name or "from" in name else "before"
        return next((getattr(r, bound) for r in ranges if getattr(r, bound)), None)

    # -- intents

    def plan_intent(self, intent: Intent) -> bool:
        """Plan every tool of the intent (alternatives: the first that binds); False if none bound."""
        planned = False
        for entry in intent.tools:
            alternatives = [tool.strip() for tool in entry.split("|")]
            if alternatives == ["billing.refund_eligibility"]:
                planned = self.plan_refunds() or planned
                continue
            calls = self._calls_for(alternatives)
            for call in calls:
                self._add(call)
            planned = planned or bool(calls)
        return planned

    def _calls_for(self, alternatives: list[str]) -> list[_Call]:
        scopes: list[list[_Subject]] = [self.customers or self.placed_by, self.orders]
        if self.text:
            scopes.append([_Subject("text", self.text, {"text": self.text})])
        scopes.append(self.articles)
        for derived in (False, True):
            for scope in scopes:
                for tool in alternatives:
                    calls = [
                        call for subject in scope if (call := self._bind(tool, subject, derived=derived))
                    ]
                    if calls:
                        return calls
        return []

    def plan_refunds(self) -> bool:
        for order, amount in self.pairs:
            self._add(_refund_check(order.value, amount.value))
        for in_full in self._refunded_in_full():
            lookup = self.order_lookups[in_full]  # its paid amount is the order's own total
            paid = Ref("?", GIVES[lookup.tool]["amount"])
            self._add(_refund_check(in_full, paid, needs={"amount": lookup}))
        # "half back on ORD-10023": a share of the order's total, which the next round reads off its lookup
        for in_part in self._refunded_in_part():
            if ("refund", self.order_lookups[in_part]) not in self.awaiting:
                self.awaiting.append(("refund", self.order_lookups[in_part]))
        return bool(self.pairs) or bool(self._refunded_in_full())

    def _second_amounts_apart(self) -> None:
        """ "Can the full amount go back? If not, the two makers (2 x £39)": the first check is of the
        order's total, and an amount after the condition is the second check's, paired with no order."""
        second = second_ask_at(self.reading)
        full = self.reading.full_amount.lower()
        if not full or full not in self.reading.query.lower()[:second]:
            return
        later = [(order, amount) for order, amount in self.pairs if amount.start >= second]
        self.pairs = [pair for pair in self.pairs if pair not in later]
        self.single_amounts = sorted([*self.single_amounts, *(a for _, a in later)], key=lambda a: a.start)

    def _refunded_in_part(self) -> list[str]:
        """The orders a share of whose total the refund asks ("a third of it back on ORD-10023")."""
        if self.reading.full_amount or "refund" not in self.intents or self.single_amounts:
            return []
        if share_said(self.reading.query) in (None, 1.0):
            return []
        return [order for order in self.order_lookups if order not in {o.value for o, _ in self.pairs}]

    def _refunded_in_full(self) -> list[str]:
        """The orders a refund "in full" (or "of the whole order") is asked on: no amount of their own."""
        if not self.reading.full_amount or "refund" not in self.intents:
            return []
        return [order for order in self.order_lookups if order not in {o.value for o, _ in self.pairs}]

    # -- the writes the question asks for

    def plan_writes(self) -> None:
        """Each refund the question asks for, after the check it needs: its eligibility for the amount
        asked (for "in full", the order's total from its lookup, as a ``Ref``), then ``issue_refund``
        waiting for that check, so a refund the check refuses is blocked, its gap saying why."""
        refunds = [write for write in self.asked.writes if write.tool == REFUND_TOOL and write.target]
        for write in self._at_most(refunds, "refunds", lambda write: write.describe()):
            order = str(write.target)
            amount: Any = write.amount
            needs: dict[str, _Call] = {}
            if write.full:
                lookup = self.order_lookups.get(order) or self._add(self._lookup_call("order_id", order))
                self.order_lookups[order] = lookup
                amount, needs = Ref("?", GIVES[lookup.tool]["amount"]), {"amount": lookup}
            else:  # the check already planned for that amount, if any ("two fivers" read as 10, asked as 10.0)
                amount = next(
                    (c.arguments["amount"] for c in self.calls if _checks(c, order, amount)), amount
                )
            check = self._add(_refund_check(order, amount, needs=dict(needs)))
            arguments = {
                "order_id": order,
                "amount": amount,
                "idempotency_key": _idempotency_key(self.reading, write),
            }
            self.calls.append(_Call(
                f"billing.{REFUND_TOOL}", arguments, subject=order, needs=needs, purpose=_WRITE_PURPOSE,
                after=[check], why=_why_asked(write),
            ))  # fmt: skip

    # -- the whole plan

    def plan(self) -> Plan:
        reading = self.reading
        for article in self.articles:
            self._add(
                self._bind(LOOKUPS["article_id"], article, derived=False)
                or self._lookup_call("article_id", article.label)
            )
        self.plan_refunds()
        self._await_the_tickets()
        for intent in INTENTS:
            if intent.name in self.intents and not self.plan_intent(intent):
                self.unplanned.append(_unanswerable(intent))
            elif intent.name in reading.weak_intents and self.order_lookups:
                self.plan_intent(intent)  # "the customer of ORD-10023": who placed it
        for tool in sorted(self.catalog.registered):
            for call in self._registered_calls(tool):
                self._add(call)
        self._await_the_order()
        self._await_the_order_meant()
        self._await_the_article()
        for call in self.calls:  # "her three most recent tickets": the newest three, not a text search's best
            limit = newest(reading).get(call.tool)
            if limit and "query" not in call.arguments and "limit" in self.tools[call.tool]:
                call.arguments["limit"] = limit
        self._account_for_refunds()
        self.plan_writes()
        self._refund_research_purpose()
        tasks = self._tasks()
        follow_ups = self._follow_ups()
        # An amount a follow-up places is listed until the round that places it (so no plan drops it)
        awaited = {amount for f in follow_ups for amount in f.amounts_placed}
        self.unplanned += [awaiting(a.describe()) for a in reading.of("amount") if a.value in awaited]
        self.unplanned += self._unaccounted_now(tasks, follow_ups)
        subject_named = _names_a_subject(reading)
        self.unplanned += [_no_tool_takes(i, subject_named=subject_named) for i in self.unknown_ids]
        # A write the question seems to ask but cannot be honoured as asked: not done, and what to write
        # instead (where the planner lists the same thing already, "a refund on ORD-10031", its entry stays).
        listed = {item.what for item in self.unplanned}
        self.unplanned += [gap for gap in self.asked.gaps if gap.what not in listed]
        not_read, spans = account_for_words(reading, tasks)
        read = self._read_here(tasks, follow_ups) | {i.split("-")[0].lower() for i in self.unknown_ids}
        not_read = [item for item in not_read if not (_words_in(item.what) or {""}) <= read]
        self.unplanned += not_read
        # A refund word alone plans the refund policy; with the refund itself not researchable and no
        # words of the query's own to search for, that is no answer to what was asked.
        policy_only = all(task.tool == "search_policies" for task in tasks) and not self.own_words
        policy_only = policy_only and "policies" not in self.intents
        if not tasks or (policy_only and self.unplanned):
            raise QueryError(
                _nothing_to_research(reading, [u for u in self.unplanned if u not in not_read], not_read)
            )
        return Plan.of(
            reading.query, tasks, tuple(self.unplanned),
            _notes(reading) + tuple(_looked_for_among(i) for i in self.looked_for_among),
            offered=self.catalog.plannable,
            spans=tuple(spans), follow_ups=follow_ups, rules=self.rules, looked_for=tuple(self.looked_for_among),
        )  # fmt: skip

    def _unaccounted_now(self, tasks: list[PlannedTask], follow_ups: tuple[FollowUp, ...]) -> list[Unplanned]:
        """What the query names that this round's tasks do not use; a count of links a related
        follow-up passes as its depth is listed as awaiting that round, as an amount is."""
        depths = {f.depth for f in follow_ups if f.depth}
        waiting = [awaiting_links(m.text) for m in self.reading.of("links") if m.value in depths]
        unused = _unaccounted(self.reading, tasks, [*self.unplanned, *waiting], self.catalog)
        return [*waiting, *(gap for gap in unused if gap.what not in {w.what for w in waiting})]

    def _facts(self) -> Facts:
        return Facts(
            self.reading, customers=bool(self.customers), orders=bool(self.orders),
            order_lookups=bool(self.order_lookups), articles=bool(self.articles),
            refund_paid=self.refund_paid_ask is not None, placed_by=bool(self.placed_by),
            only_the_amount_paid=_only_the_amount_paid(self.reading, self.pairs),
        )  # fmt: skip

    def _refund_research_purpose(self) -> None:
        """The broker grants financial records for refund research (a write keeps its own purpose)."""
        if "refund" in self.intents or self.pairs or self.asked.writes or self.refund_paid_ask:
            for call in self.calls:
                if call.tool.startswith("billing.") and call.tool not in ASKED_ONLY:
                    call.purpose = _REFUND_PURPOSE

    def _read_here(self, tasks: list[PlannedTask], follow_ups: tuple[FollowUp, ...]) -> set[str]:
        """Words the accounting does not read that the plan does: what picks an order and its amount,
        read by the next round (or by an orders search: "the order he sent back"); a has-the-refund-
        been-paid ask, answered from the invoices."""
        query = self.reading.query
        read = {word for f in follow_ups for word in f.words}
        read |= {word for word in self.reading.topic if singular(word) in read}  # "scales" as "scale"
        if follow_ups or any(task.tool == "search_orders" for task in tasks):
            read |= words_read(query)
        if any(f.ask == "related" for f in follow_ups):  # "whatever it points to": the links followed
            read |= {word for said in ARTICLE_LINKS.finditer(query.lower()) for word in _words_in(said[0])}
        paid = self.refund_paid_ask
        if paid and any(task.tool == "list_invoices" for task in tasks):
            read |= _words_in(paid[0])
        return read

    def _await_the_order(self) -> None:
        """A refund asked about a customer's order the question names only by what it holds, its
        total or status ("Mr Patel's grinder", "the one of £750"): the customer's orders are searched,
        and the next round (``coordinator.planning.rounds``) checks the refund on the order found. A
        question of policy asks it too where it asks an order's money back ("is the whole of the £290
        order back allowed?")."""
        policy = "policies" in self.intents and not asks_money_back(self.reading)
        asked = "refund" in self.intents and not policy
        if not asked or self.pairs or self.orders or not self.customers:
            return
        wanted = follow_up("refund", "", self.reading, self.single_amounts)
        if not wanted.picks:
            return
        self.refund_amount_known = wanted.how_much
        self._await("refund")

    def _await_the_order_meant(self) -> None:
        """One of a customer's orders the question picks by what it holds, its status or date ("Scott
        Knowles' cafetiere order", "her October order"), asked of itself: the next round selects it
        among the orders found, and lists the candidates where several match."""
        asked = {token.word for span in self.reading.spans for token in span.tokens}
        # "I ordered two cold brew makers and they never arrived": a complaint about the order that
        # holds them, asked of its tickets
        complaint = bool(NOT_ARRIVED.search(self.reading.query.lower()) or asked & SYMPTOM_WORDS)
        one_order = bool(asked & ONE_ORDER or complaint) and not asked & {"orders", "purchases"}
        if "orders" not in self.intents or self.awaiting or self.orders or not one_order:
            return
        if follow_up("order", "", self.reading, self.single_amounts).picks:
            self._await("tickets" if complaint else "order")

    def _await_the_article(self) -> None:
        """The links of an article the question finds by a search, not by its id ("the returns policy
        and whatever it points to", "the shipping article and everything two links away from it"):
        the next round follows the links of the search's best match."""
        asked = self.reading.of("links") or ARTICLE_LINKS.search(self.reading.query.lower())
        search = next((call for call in self.calls if call.tool == "kb.search_policies"), None)
        if asked and search is not None and not self.articles:
            self.awaiting.append(("related", search))

    def _whose_orders(self) -> list[_Subject]:
        """The customers whose orders a follow-up chooses among: those named, else those who placed
        the orders named ("whoever owns ORD-10098: their newest order")."""
        return self.customers or self.placed_by

    def _await(self, ask: str) -> None:
        for customer in self._whose_orders():
            search = self._bind("orders.search_orders", customer, derived=False)
            if search is not None:
                self.awaiting.append((ask, self._add(search)))

    def _await_the_tickets(self) -> None:
        """Tickets asked of the order a customer's question points at ("her latest order and any
        tickets on it"): that order's tickets, next round, not every ticket of the customer."""
        meant = not self.orders or self.placed_by  # an order named only to say whose is not the one meant
        if "tickets" in self.intents and self._whose_orders() and meant and on_the_order(self.reading):
            self.intents.discard("tickets")
            self._await("tickets")

    def _follow_ups(self) -> tuple[FollowUp, ...]:
        """What the next round places (``coordinator.planning.rounds``): the asks awaiting an order,
        and a second check the question makes conditional on a first ("failing that, half of it?")."""
        found = [
            follow_up(ask, call.id, self.reading, self.single_amounts, order=_order_of(call))
            for ask, call in self.awaiting
        ]
        for order, amount in self.pairs:
            check = next(c for c in self.calls if _checks(c, order.value, amount.value))
            second = fallback_of(check.id, order.value, amount.value, self.reading, self.single_amounts)
            if second is not None:
                found.append(second)
        for in_full in self._refunded_in_full():  # "if not, at least £78": the amount asked next
            check = next(
                c for c in self.calls if c.tool == "billing.refund_eligibility" and c.subject == in_full
            )
            second = fallback_of(check.id, in_full, None, self.reading, self.single_amounts)
            if second is not None and second.amount is not None:
                found.append(second)
        return tuple(found)

    # -- registered sources: planned by what their tools take, as their entries say

    def _registered_calls(self, tool: str) -> list[_Call]:
        """A call of a registered tool for each thing the query names that its first subject argument
        takes (each path, each time zone...), bound as a built-in tool's call is (``_bind``): its other
        arguments from what else the query names. A write is planned only where the question asks for
        it by name."""
        if tool in self.catalog.writes and tool.rsplit(".", 1)[-1] not in {w.tool for w in self.asked.writes}:
            return []
        arguments = self.tools[tool]
        subjects = [
            name
            for name, argument in arguments.items()
            if argument.required and argument.kind not in _QUALIFIERS
        ]
        if not subjects:
            return []  # a tool that takes only search words is planned by no one's words in particular
        kind = arguments[subjects[0]].kind
        named = [_Subject(kind, str(value), {kind: value}) for value in self._named(kind)]
        return [call for subject in named if (call := self._bind(tool, subject, derived=False))]

    def _named(self, kind: str) -> list[Any]:
        """The values the query names of ``kind``: a file or a folder among its paths, its search words..."""
        if kind == "text":
            return [self.text] if self.text else []
        if kind in PATH_KINDS:
            paths = self.reading.values("path")
            return [path for path in paths if kind == "path" or (kind == "folder") == _is_folder(path)]
        if kind == "customer":
            return [*self.reading.values("email"), *self.reading.values("customer_id")]
        return self.reading.values(kind)

    def _account_for_refunds(self) -> None:
        paired = {order.value for order, _ in self.pairs}
        # A refund asked with nothing to check is not researched; about refund *policy*, it is the topic.
        asked = "refund" in self.intents and "policies" not in self.intents
        # awaiting the order: the next round names it, but a refund of no amount is still not researched
        placed = self.awaiting and self.refund_amount_known
        if asked and not self.pairs and not self.orders and not self.single_amounts and not placed:
            self.unplanned.append(_unanswerable(intent_named("refund")))
        if "refund" in self.intents:
            for order in self.reading.values("order_id"):
                if order not in paired and order not in [
                    *self._refunded_in_full(),
                    *self._refunded_in_part(),
                ]:
                    self.unplanned.append(Unplanned(
                        f"a refund on {order}", "no amount was given for it",
                        f"say how much, e.g. 'refund £45 on {order}'",
                    ))  # fmt: skip

    def _tasks(self) -> list[PlannedTask]:
        names = [TASK_NAMES.get(call.tool, call.tool.split(".")[1]) for call in self.calls]
        counts = Counter(names)
        taken: set[str] = set()
        for call, name in zip(self.calls, names, strict=True):
            if counts[name] > 1:
                name = f"{name}_{_slug(call.subject)}"
            while name in taken:
                name += "_"
            call.id = name
            taken.add(name)
        tasks = []
        for call in self.calls:
            arguments = {
                name: Ref(call.needs[name].id, value.field) if isinstance(value, Ref) else value
                for name, value in call.arguments.items()
            }
            depends = tuple(dict.fromkeys(upstream.id for upstream in [*call.needs.values(), *call.after]))
            source, tool = call.tool.split(".")
            tasks.append(PlannedTask(call.id, source, tool, arguments, purpose=call.purpose,
                                     depends_on=depends, why=call.why or self._why(call)))  # fmt: skip
        return tasks

    def _why(self, call: _Call) -> str:
        """Why ``call`` is planned, in words: its tool's sentence, its arguments said as they read."""
        kinds = {name: argument.kind for name, argument in self.tools[call.tool].items()}
        said = {
            name: self._said(call, name, value, kinds.get(name, "other"))
            for name, value in call.arguments.items()
        }
        return _why(call.tool, said, kinds, looked_up=set(call.needs))

    def _said(self, call: _Call, name: str, value: Any, kind: str) -> str:
        """An argument's value as a why says it: an amount in pounds; a value a lookup gives as what it
        is, "the customer" (the plan's one customer), "Jane Doe" (one of several), "ORD-10023's customer"."""
        if isinstance(value, Ref):
            upstream = call.needs[name]
            if value.field != "id":
                return f"{self._about(upstream)}'s {value.field.removesuffix('_id').replace('_', ' ')}"
            kind_given = next(given for given, field in GIVES[upstream.tool].items() if field == "id")
            alike = [c for c in self.calls if GIVES.get(c.tool, {}).get(kind_given) == "id"]
            return f"the {kind_given.removesuffix('_id')}" if len(alike) == 1 else self._about(upstream)
        if kind == "amount" and isinstance(value, int | float) and not isinstance(value, bool):
            return pounds(value)
        return str(value)

    def _about(self, lookup: _Call) -> str:
        """What a lookup looks up, in words: what it was given ("jane.doe@example.com"), or, when that
        came from another lookup, what that one gives ("ORD-10023's customer")."""
        for name, value in lookup.arguments.items():
            if isinstance(value, Ref):
                return self._said(lookup, name, value, "other")
        return lookup.subject


def _order_of(lookup: _Call) -> str:
    """The order a lookup of one order gives (an ask awaiting it is about that order), or ""."""
    return lookup.subject if lookup.tool == LOOKUPS["order_id"] else ""


def _checks(call: _Call, order: str, amount: Any) -> bool:
    """Whether ``call`` is the refund check of ``amount`` (a number) on ``order``."""
    checked = call.arguments.get("amount")
    return (
        call.tool == "billing.refund_eligibility"
        and call.arguments.get("order_id") == order
        and isinstance(checked, int | float)
        and checked == amount
    )


def _idempotency_key(reading: Reading, write: AskedWrite) -> str:
    """A refund's idempotency key, derived from the question that asks for it: its order, its amount
    ("full" in full) and its words (any case and spacing). Asking the same question twice makes the
    same key, and billing pays a key once (the second call replays the first refund): it pays once."""
    amount = "full" if write.amount is None else f"{write.amount:.2f}"
    asked = f"{write.target}|{amount}|{' '.join(reading.query.lower().split())}"
    return "q-" + hashlib.sha256(asked.encode()).hexdigest()[:16]


# At most this many characters of the words that asked are quoted in a refund's why.
_MOST_QUOTED = 120


def _why_asked(write: AskedWrite) -> str:
    """Why a refund is planned: what the question asks, in its own words."""
    said = write.asked if len(write.asked) <= _MOST_QUOTED else write.asked[: _MOST_QUOTED - 1] + "…"
    if write.full:
        return f"the question asks to refund {write.target} in full (the order's total): '{said}'"
    return f"the question asks to refund {pounds(write.amount or 0)} on {write.target}: '{said}'"


# Arguments that qualify a call rather than say what it is about.
_QUALIFIERS = frozenset({"text", "choice", "other", "date", "amount", "sku", "links"})
# What a built-in tool is about (``_Subject.kind``); a registered tool's subject is of its own kind.
_BUILT_IN_SUBJECTS = frozenset({"customer", "order", "text", "article"})


def _is_folder(path: str) -> bool:
    """A folder if it is one here, else if its last part has no extension (``docs`` yes, ``a.md`` no)."""
    found = Path(path)
    return found.is_dir() or (not found.exists() and not found.suffix)


def _unaccounted(
    reading: Reading, tasks: list[PlannedTask], unplanned: list[Unplanned], catalog: Catalog | None = None
) -> list[Unplanned]:
    """What the query names that no task uses and no entry lists yet: nothing is dropped silently.

    Checked on every plan, the deterministic planner's and Claude's alike.
    """
    used = {str(value) for task in tasks for value in task.arguments.values()}
    listed = " ".join(str(item) for item in unplanned)
    searches_orders = any(task.tool == "search_orders" for task in tasks)
    # "has the £45 been paid back": the invoices' refunded amounts are where the amount is looked for
    paid_back = any(task.tool == "list_invoices" for task in tasks) and _refund_paid(reading)
    found = []
    for mention in reading.mentions:
        if mention.kind == "dates":
            elsewhere = _dated_elsewhere(reading, mention)
            if elsewhere:
                found.append(Unplanned(
                    f"the dates {mention.describe()}", f"{elsewhere} cannot be searched by date",
                    "ask without the dates, or for a customer's orders in them, e.g. 'orders of CUST-00042 since last month'",
                ))  # fmt: skip
            elif not searches_orders:
                found.append(Unplanned(
                    f"the dates {mention.describe()}", "dates narrow a customer's orders, and no orders search was planned",
                    "name the customer whose orders to search, e.g. 'orders of CUST-00042 since last month'",
                ))  # fmt: skip
        elif mention.kind == "amount":
            if (
                not paid_back
                and not any(task.arguments.get("amount") == mention.value for task in tasks)
                and mention.describe() not in listed
            ):
                found.append(Unplanned(
                    f"the amount {mention.describe()}", "no order was named that it could be refunded on",
                    f"name the order, e.g. 'refund {mention.describe()} on ORD-10031'",
                ))  # fmt: skip
        elif str(mention.value) not in used and mention.describe() not in listed:
            found.append(_unused(mention, catalog or demo_catalog()))
    for typed in reading.other_currency:
        found.append(Unplanned(
            f"the amount '{typed}'", "it is not an amount in pounds: billing works in GBP only",
            "give the amount in pounds, e.g. £45 or 45 GBP",
        ))  # fmt: skip
    for typed, why in reading.unread_amounts:
        found.append(Unplanned(f"the amount '{typed}'", why, SAY_ONE_AMOUNT))
    # Named only to be left out ("not about ORD-10134"): not researched, and no action offered on it.
    first: dict[object, Mention] = {}
    for mention in reading.excluded:
        first.setdefault(mention.value, mention)
    for mention in first.values():
        if str(mention.value) not in used and mention.describe() not in listed:
            found.append(Unplanned(mention.describe(), why_left_out(reading, mention), _LEFT_OUT))
    return found


_LEFT_OUT = "nothing: the question does not ask about it"


def _dated_elsewhere(reading: Reading, mention: Mention) -> str:
    """What a date qualifies that no tool filters by dates, where its clause asks for that and not
    for orders ("any tickets she raised after 2026-06-15": tickets); "" where it may qualify orders."""
    spans = list(reading.spans)
    for group in clauses_of(spans):
        if any(spans[i].start <= mention.start < spans[i].end for i in group):
            asked = {intent for i in group for intent in spans[i].asked}
            if asked and not asked & intents_taking("date"):
                return " and ".join(sorted(asked))
    return ""


def left_out(query: str, catalog: Catalog | None = None) -> dict[str, str]:
    """The records ``query`` names only to leave them out ("this is not about ORD-10134"), each with
    why, in the question's words; one it also asks about elsewhere is not among them. Whoever plans,
    no task researches them (a model's plan is refused: ``coordinator.llm``, ``coordinator.lead_rounds``)
    and no call names them (``subagents.hooks.LeftOut``), as the planner's own plan lists them."""
    try:
        reading = read_for(query, catalog or demo_catalog())
    except QueryError:
        return {}
    asked = {str(mention.value).upper() for mention in reading.mentions}
    return {
        str(mention.value): why_left_out(reading, mention)
        for mention in reading.excluded
        if str(mention.value).upper() not in asked
    }


def account_for(plan: Plan, catalog: Catalog | None = None) -> Plan:
    """``plan`` (made by a model) with what its query names but no task uses listed as unplanned, and
    a write it seems to ask that cannot be honoured as asked. An id no tool looks up ("TCK-20051") is
    held to the planner's own rule: looked for among the records the plan's tasks find where they find
    records of its kind for a customer or an order named (the report lists it if it is not among
    them), else listed, unless a task passes it to its tool."""
    catalog = catalog or demo_catalog()
    try:
        reading = read_for(plan.query, catalog)
    except QueryError:
        return plan  # the query was refused before planning; nothing to add
    tasks = list(plan.tasks.values())
    missing = _unaccounted(reading, tasks, list(plan.unplanned), catalog)
    listed = {item.what for item in (*plan.unplanned, *missing)}
    missing += [gap for gap in writes_in(reading).gaps if gap.what not in listed]
    _, unknown, among = _without_unknown_ids(
        reading, intents_answered_by(f"{t.source}.{t.tool}" for t in tasks)
    )
    passed = " ".join(str(value) for task in tasks for value in task.arguments.values())
    said = " ".join(str(item) for item in (*plan.unplanned, *missing))
    subject_named = _names_a_subject(reading)
    missing += [
        _no_tool_takes(i, subject_named=subject_named)
        for i in unknown
        if not names(passed, i) and not names(said, i)
    ]
    looked_for = (*plan.looked_for, *(i for i in among if i not in plan.looked_for))
    noted = tuple(_looked_for_among(i) for i in looked_for if i not in plan.looked_for)
    return plan.rebuilt(
        tasks,
        (*plan.unplanned, *missing),
        offered=catalog.plannable,
        notes=plan.notes + noted,
        looked_for=looked_for,
    )


def _said_plainly(reading: Reading) -> str:
    """The query, lower case, with each record it names (a name, an email, an id) as one mark ("#")
    and each amount as one mark ("£"): how far apart an ask's words are ("has the refund for
    graeme.matthews@example.com's return come through") is counted in words, not in an address's
    characters, and "has the £45 been paid back" reads as "has the £ been paid back"."""
    said, end = [], 0
    for mention in sorted(reading.mentions, key=lambda mention: mention.start):
        plain = "#" if mention.kind in LOOKUPS else "£" if mention.kind == "amount" else None
        if plain and mention.start >= end:
            said += [reading.query[end : mention.start], plain]
            end = mention.start + len(mention.text)
    return "".join([*said, reading.query[end:]]).lower()


def _refund_paid(reading: Reading) -> bool:
    """Whether the query asks if money has moved back ("has the refund come through")."""
    return bool(REFUND_PAID.search(_said_plainly(reading)))


def _only_the_amount_paid(reading: Reading, pairs: list[tuple[Mention, Mention]]) -> bool:
    """Whether every clause asking of invoices holds an amount a refund check takes: "Janice paid
    thirty-two pounds for it on ORD-10015, can we refund that" says what was paid, not to list it."""
    checked = [amount.start for _, amount in pairs]
    asking = [span for span in reading.spans if "invoices" in span.asked]
    return bool(asking) and all(any(span.start <= at < span.end for at in checked) for span in asking)


def _pair_amounts(reading: Reading) -> tuple[list[tuple[Mention, Mention]], list[Mention]]:
    """Each amount with its order; the amounts left without one.

    As many amounts as orders pair in the order they are written ("ORD-10031 (45 GBP) and ORD-10023
    (750 GBP)"). Otherwise the query's own direction decides: if its first amount comes before its
    first order ("£45 on ORD-10031"), each order takes the nearest free amount before it, else the
    nearest free amount after it. An order takes one amount.
    """
    amounts = reading.of("amount")
    orders = list({mention.value: mention for mention in reversed(reading.of("order_id"))}.values())
    orders.sort(key=lambda mention: mention.start)
    if not amounts or not orders:
        return [], amounts
    if len(amounts) == len(orders):
        return list(zip(orders, amounts, strict=True)), []
    forward = amounts[0].start < orders[0].start
    pairs, free = [], list(amounts)
    for order in orders if forward else reversed(orders):
        side = [a for a in free if (a.start < order.start if forward else a.start > order.start)]
        if side:
            amount = side[-1] if forward else side[0]
            free.remove(amount)
            pairs.append((order, amount))
    return sorted(pairs, key=lambda pair: pair[0].start), free


def _why(tool: str, said: dict[str, str], kinds: dict[str, str], *, looked_up: set[str]) -> str:
    """The why of a call of ``tool`` whose arguments are ``said`` (name -> value in words): its
    sentence (``WHY``) with the arguments it names in it, the others after it as their kinds say
    (``ARGUMENT_PHRASES``): "support tickets of the customer, open ones", "refund policies",
    "the orders of CUST-00042, with SKU-4417-BLK, placed from 2026-10-01 to 2026-10-31"."""
    source, name = tool.split(".")
    said_so = [argument for argument in sorted(looked_up) if (tool, argument) in WHY_LOOKED_UP]
    template = (  # a registered tool's: its name and its source, its arguments after
        WHY_LOOKED_UP[(tool, said_so[0])] if said_so else WHY.get(tool, f"{_words(name)} from {source}")
    )
    named = set(re.findall(r"\{(\w+)\}", template)) | set(said_so[:1])
    values = dict(said)
    if "topic" in named:  # the search text's topic words lead ("refund policies"); the rest is searched
        searched = next((argument for argument in said if kinds.get(argument) == "text"), None)
        values["topic"], rest = _topic(said[searched]) if searched else ("", "")
        if searched:
            values[searched] = rest
    text = " ".join(template.format_map({key: values.get(key, "?") for key in named}).split())
    subjects, qualifiers = [text], []
    dates = {argument: value for argument, value in values.items() if kinds.get(argument) == "date" and value}
    for argument, value in values.items():
        kind = kinds.get(argument, "other")
        if argument in named or argument not in said or not value or kind == "date":
            continue
        if kind == "links":
            qualifiers.append("directly" if value == "1" else f"up to {value} links away")
        elif argument == "limit":  # a count the question stated: the newest that many
            qualifiers.append(f"the newest {value}")
        elif kind == "text":
            subjects.append(ARGUMENT_PHRASES[kind].format(_searched(value)))
        elif kind in ARGUMENT_PHRASES:
            phrase = ARGUMENT_PHRASES[kind].format(value)
            (subjects if kind in SUBJECT_KINDS else qualifiers).append(phrase)
        elif kind == "other":
            qualifiers.append(f"{_words(argument)} {value}")
        else:  # a kind of a registered source's (a path, a time zone): what the call is for
            subjects.append(f"for {value}")
    if dates:  # a range of dates is one phrase, and the last
        qualifiers.append(_dated(dates))
    return ", ".join([" ".join(subjects), *qualifiers])


# At most this many of a search's words are quoted in its why (the call shows them all).
_MOST_SEARCHED = 6


def _searched(text: str) -> str:
    words = text.split()
    return " ".join(words[:_MOST_SEARCHED]) + (" …" if len(words) > _MOST_SEARCHED else "")


def _topic(text: str) -> tuple[str, str]:
    """A search text's topic words (``TOPIC_WORDS``, in any form: "refunds"), and its other words."""
    words = text.split()
    topics = sorted({topic for topic in TOPIC_WORDS for word in words if _form_of(word.lower(), topic)})
    rest = [word for word in words if not any(_form_of(word.lower(), topic) for topic in TOPIC_WORDS)]
    return " ".join(topics), " ".join(rest)


def _form_of(word: str, topic: str) -> bool:
    return word == topic or (word.startswith(topic) and word[len(topic) :] in ("s", "ed", "ing", "able"))


def _dated(dates: dict[str, str]) -> str:
    """Date bounds as one phrase: "placed on 2026-10-20", "placed from A to B", "placed since A"."""
    lower = {name: value for name, value in dates.items() if _LOWER_BOUND.search(name)}
    upper = {name: value for name, value in dates.items() if name not in lower}
    stem = " ".join(_words(_UPPER_BOUND.sub("_", _LOWER_BOUND.sub("_", next(iter(dates))))).split())
    after, before = next(iter(lower.values()), None), next(iter(upper.values()), None)
    if after and before:
        when = f"on {after}" if after == before else f"from {after} to {before}"
    else:
        when = f"since {after}" if after else f"up to {before}"
    return f"{stem} {when}".strip()


# The words of a date argument's name that say which bound it is (the planner's ``_date`` reads them so).
# "tickets about a wrong colour", "complaints regarding the grinder": what a customer's records are
# searched for, the topic words (things sold, what goes wrong) of the phrase after the preposition.
_ABOUT = re.compile(r"\b(?:about|regarding|concerning|re)\s+((?:[\w'-]+\s+){0,3}[\w'-]+)")


def _searched_about(reading: Reading) -> str | None:
    about = _ABOUT.search(reading.query.lower())
    words = [word for word in about[1].split() if word in SEARCHED_TOPICS] if about else []
    return " ".join(words) or None


# An identifier's shape (letters, a hyphen, digits: "TCK-20535", "XYZ-123"); those of a kind the
# sources know (``sources.identifiers``) are read as mentions, any other is listed, not dropped.
def _without_unknown_ids(reading: Reading, intents: set[str]) -> tuple[list[str], list[str], list[str]]:
    """The topic words but an unknown id's prefix ("TCK-20535" is never searched as "tck"), then the
    unknown ids in two lists: those to list as not researched, and those looked for among the records
    the plan finds ("INV-40008, cust 42's" among her invoices): an id whose prefix reads as a kind of
    record one of ``intents`` (those planned) finds, with a customer or an order named whose records
    of that kind hold it. An id of no kind planned ("XYZ-123") is listed, subject or not."""
    unknown = unknown_ids(reading.query, (*reading.mentions, *reading.context, *reading.excluded))
    words = [word for word in reading.topic if word not in {i.split("-")[0].lower() for i in unknown}]
    subject_named = _names_a_subject(reading)
    among = [i for i in unknown if subject_named and _finds_records_of(intents, i)]
    return words, [identifier for identifier in unknown if identifier not in among], among


def _names_a_subject(reading: Reading) -> bool:
    """Whether the question names a customer or an order, whose records an unknown id may be among."""
    return bool(reading.of("email", "customer_id", "name", "order_id"))


def _finds_records_of(intents: set[str], identifier: str) -> bool:
    """Whether one of ``intents`` finds a subject's records of the kind ``identifier``'s prefix names
    ("TCK" read as 'ticket', "INV" as 'invoice', "TICKET" as itself). A topical intent finds none: a
    refund's check and the policies searched by topic hold no "REFUND-123"."""
    prefix = identifier.split("-")[0].lower()
    read_as = SHORTHAND.get(prefix, prefix)
    return any(read_as in intent.words and not intent.topical for intent in map(intent_named, intents))


def _looked_for_among(identifier: str) -> str:
    return f"no tool looks {identifier} up by its id: it is looked for among the records found"


def _no_tool_takes(identifier: str, *, subject_named: bool) -> Unplanned:
    """``identifier`` listed as not researched; with a customer or an order named, what to add is which
    of their records hold it."""
    return Unplanned(
        identifier,
        f"no tool looks a record up by an id of this kind ({identifier.split('-')[0]}-...)",
        "say which of their records hold it, e.g. 'the tickets of CUST-00042' or 'the invoices of ORD-10031'"
        if subject_named
        else "name the customer or the order it is about, e.g. 'tickets of CUST-00042' or 'tickets on ORD-10031'",
    )


_LOWER_BOUND = re.compile(r"(?:^|_)(?:after|since|from)(?:_|$)")
_UPPER_BOUND = re.compile(r"(?:^|_)(?:before|until|to)(?:_|$)")


def _words(name: str) -> str:
    return name.replace("_", " ").strip()


def _words_in(listed: str) -> set[str]:
    return set(re.findall(r"[a-z]+", listed.lower()))


def _slug(text: str) -> str:
    return re.sub(r"[^a-z0-9]+", "_", text.lower()).strip("_")[:24] or "x"


def _unanswerable(intent: Intent) -> Unplanned:
    return Unplanned(intent.unanswered, "the query names nothing those tools can look up", intent.ask_for)


def _unused(mention: Mention, catalog: Catalog) -> Unplanned:
    if mention.kind not in _READ_ALWAYS:  # a path, or a kind of thing a registered source defined
        broken = "; ".join(
            f"{source}: {why}" for source, why in catalog.not_usable.items() if "." not in source
        )
        return Unplanned(
            mention.describe(), f"no registered source's tool takes it{f' ({broken})' if broken else ''}",
            "`research sources check NAME` says what a source's tools take",
        )  # fmt: skip
    if mention.kind == "links":
        return Unplanned(
            f"'{mention.text}'", "a count of links says how far to follow a policy article's links, and no article was named",
            f"name the article, e.g. 'policies {mention.text} from KB-REFUNDS'",
        )  # fmt: skip
    if mention.kind == "sku":
        return Unplanned(
            mention.value, "orders are searched by SKU within one customer's orders, and no customer was named",
            f"name the customer, e.g. 'orders of CUST-00042 with {mention.value}'",
        )  # fmt: skip
    return Unplanned(mention.describe(), "no planned task uses it", "ask about it on its own")


def _notes(reading: Reading) -> tuple[str, ...]:
    notes = [f"read '{written}' as '{read}'" for written, read in reading.corrections]
    for mention in reading.of("dates"):
        notes.append(
            f"dates {mention.describe()} are relative to the demo world's calendar (today is {TODAY.isoformat()})"
        )
    return tuple(notes)


def _nothing_to_research(reading: Reading, unplanned: list[Unplanned], not_read: list[Unplanned]) -> str:
    """Why a query plans nothing: what it asked that cannot be researched, or else what was understood,
    what was not (``not_read``: the words no source holds or no keyword reads), and what to write."""
    if unplanned:
        return "the query names nothing that can be researched: " + "; ".join(
            f"{item.what}, but {item.why}: {item.next_step}" for item in unplanned
        )
    understood = [mention.describe() for mention in reading.mentions]
    seen = f"understood only {', '.join(understood)}; " if understood else ""
    unread = "; ".join(f"{item.what} ({item.why.split(':')[0]})" for item in not_read)
    seen += f"did not read {unread}; " if unread else ""
    return (
        f"the query names nothing to research: {seen}mention a customer (an email, {CUSTOMER_ID.shape} or a name), "
        f"an order ({ORDER_ID.shape}) or a policy topic, and what you want to know (orders, tickets, invoices, "
        'a refund), e.g. "What is our policy on refunds?"'
    )


# The kinds every query is read for; others are read only where a registered source takes them.
_READ_ALWAYS = frozenset(
    {"email", "customer_id", "name", "order_id", "sku", "article_id", "amount", "dates", "links"}
)


def read_for(query: str, catalog: Catalog) -> Reading:
    """``query`` read for what the tools in ``catalog`` take."""
    return read_query(query, catalog.entities, paths=catalog.reads_paths)


def plan_query(query: str, catalog: Catalog | None = None) -> Plan:
    """The deterministic plan for a query over ``catalog`` (the demo sources' tools by default);
    ``QueryError`` when it names nothing researchable."""
    catalog = catalog or demo_catalog()
    return _Planner(read_for(query, catalog), catalog).plan()
