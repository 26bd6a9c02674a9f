"""Plan: a research query becomes a DAG of tasks (a ``networkx.DiGraph``).

The default planner is deterministic and offline. It reads the query for what it names (emails,
``CUST-`` and ``ORD-`` ids, SKUs, amounts with their currency, dates) and what it asks about (orders,
tickets, invoices, refunds, policies), and plans only that:

    resolve the customer ──► orders, tickets, invoices, refund eligibility   (they use the resolved id)
    policies                                                                 (need nothing; start at once)

A ``CUST-`` id named in the query needs no resolving: its tasks run beside the lookup, not after it.

An argument that comes from an upstream task is a ``Ref``: ``Ref("customer", "id")`` is the ``id``
of the first record the ``customer`` task returned. A plan that is not acyclic, or that names an
unknown source or tool, or refers to a task it does not depend on, is refused before anything runs.
"""

from __future__ import annotations

import re
import unicodedata
from dataclasses import dataclass, field
from datetime import date
from typing import Any

import networkx as nx

from sources.catalogue import TOOLS

__all__ = ["MAX_QUERY_CHARS", "Plan", "PlanError", "PlannedTask", "QueryError", "Ref", "plan_query"]

MAX_QUERY_CHARS = 2000


class QueryError(ValueError):
    """The query cannot be researched as written; the message says what to do instead."""


class PlanError(ValueError):
    """A plan that must not run: cyclic, or naming a source, tool or task that does not exist."""


@dataclass(frozen=True)
class Ref:
    """An argument taken from an upstream task's first record."""

    task: str
    field: str

    def __str__(self) -> str:
        return f"{{{self.task}.{self.field}}}"


@dataclass(frozen=True)
class PlannedTask:
    id: str
    source: str
    tool: str
    arguments: dict[str, Any]
    purpose: str = "research"
    depends_on: tuple[str, ...] = ()
    why: str = ""


@dataclass
class Plan:
    query: str
    tasks: dict[str, PlannedTask]
    graph: nx.DiGraph = field(default_factory=nx.DiGraph)

    @classmethod
    def of(cls, query: str, tasks: list[PlannedTask]) -> Plan:
        """Build and check a plan; a plan that must not run raises ``PlanError``."""
        by_id: dict[str, PlannedTask] = {}
        graph = nx.DiGraph()
        for task in tasks:
            if task.id in by_id:
                raise PlanError(f"two tasks are named {task.id!r}")
            if task.source not in TOOLS:
                raise PlanError(
                    f"task {task.id!r} names unknown source {task.source!r}; sources are {', '.join(TOOLS)}"
                )
            if task.tool not in TOOLS[task.source]:
                raise PlanError(
                    f"task {task.id!r} names unknown tool {task.tool!r} of {task.source}; "
                    f"it offers {', '.join(sorted(TOOLS[task.source]))}"
                )
            by_id[task.id] = task
            graph.add_node(task.id)
        for task in tasks:
            for upstream in task.depends_on:
                if upstream not in by_id:
                    raise PlanError(f"task {task.id!r} depends on {upstream!r}, which is not in the plan")
                graph.add_edge(upstream, task.id)
            for value in task.arguments.values():
                if isinstance(value, Ref) and value.task not in task.depends_on:
                    raise PlanError(f"task {task.id!r} uses {value} but does not depend on {value.task!r}")
        if not nx.is_directed_acyclic_graph(graph):
            cycle = " -> ".join(edge[0] for edge in nx.find_cycle(graph))
            raise PlanError(f"the plan has a cycle ({cycle}); a task cannot wait for itself")
        return cls(query=query, tasks=by_id, graph=graph)

    def order(self) -> list[PlannedTask]:
        """The tasks in an order that puts every task after what it depends on."""
        return [self.tasks[task_id] for task_id in nx.lexicographical_topological_sort(self.graph)]


# --- reading the query ---------------------------------------------------------------------------

_EMAIL = re.compile(r"[A-Za-z0-9._%+-]+@[A-Za-z0-9-]+(?:\.[A-Za-z0-9-]+)*\.[A-Za-z]{2,}")
_CUSTOMER_ID = re.compile(r"\bCUST-\d{5}\b", re.I)
_ORDER_ID = re.compile(r"\bORD-\d{5}\b", re.I)
_SKU = re.compile(r"\bSKU-\d{4}-[A-Za-z]{3}\b", re.I)
_AMOUNT = re.compile(
    r"(?:£|GBP\s?)(\d[\d,]*(?:\.\d{1,2})?)|(\d[\d,]*(?:\.\d{1,2})?)\s?(?:GBP|pounds?)\b", re.I
)
_DATE = re.compile(r"\b(since|after|from|before|until)\s+(\d{4}-\d{2}-\d{2})\b", re.I)
_WORD = re.compile(r"[a-z]+")

_ASKS = {
    "orders": re.compile(r"\b(orders?|purchases?|bought|deliver(y|ed|ies))\b", re.I),
    "tickets": re.compile(r"\b(tickets?|complaints?|support|cases?)\b", re.I),
    "invoices": re.compile(r"\b(invoices?|billing|payments?|paid|charges?)\b", re.I),
    "refund": re.compile(r"\brefund(s|ed|able)?\b", re.I),
    "policies": re.compile(
        r"\b(polic(y|ies)|rules?|allowed|qualif(y|ies)|eligib\w*|damaged|returns?|warranty|gdpr|escalat\w*)\b",
        re.I,
    ),
    "open": re.compile(r"\bopen\b", re.I),
    "customer": re.compile(r"\b(customer|account|investigate|who is)\b", re.I),
}
_STOPWORDS = frozenset(
    [
        "a",
        "an",
        "and",
        "are",
        "as",
        "at",
        "be",
        "by",
        "can",
        "do",
        "does",
        "for",
        "from",
        "has",
        "have",
        "how",
        "i",
        "in",
        "is",
        "it",
        "its",
        "of",
        "on",
        "or",
        "our",
        "the",
        "their",
        "this",
        "to",
        "was",
        "we",
        "what",
        "whether",
        "which",
        "who",
        "why",
        "will",
        "with",
        "any",
        "all",
        "about",
        "recent",
        "open",
        "investigate",
        "customer",
        "customers",
        "orders",
        "order",
        "tickets",
        "ticket",
        "invoices",
        "invoice",
        "allowed",
        "policy",
        "policies",
        "qualify",
        "qualifies",
    ]
)


@dataclass(frozen=True)
class Reading:
    """What the planner understood from a query."""

    emails: list[str]
    customer_ids: list[str]
    order_ids: list[str]
    skus: list[str]
    amounts: list[float]
    placed_after: str | None
    placed_before: str | None
    asks: frozenset[str]
    topic: str


def _check(query: str) -> str:
    text = query.strip()
    if not text:
        raise QueryError(
            'the query is empty; ask a question, e.g. "Investigate jane.doe@example.com: recent orders"'
        )
    if len(text) > MAX_QUERY_CHARS:
        raise QueryError(f"the query is {len(text):,} characters long; keep it under {MAX_QUERY_CHARS:,}")
    control = next(
        (char for char in text if unicodedata.category(char) == "Cc" and char not in "\t\n\r"), None
    )
    if control is not None:
        raise QueryError(
            f"the query holds a control character (U+{ord(control):04X}); remove it and ask again"
        )
    return text


def read_query(query: str) -> Reading:
    text = _check(query)
    amounts = []
    for match in _AMOUNT.finditer(text):
        amounts.append(float((match[1] or match[2]).replace(",", "")))
    after = before = None
    for word, value in _DATE.findall(text):
        try:
            date.fromisoformat(value)
        except ValueError:
            raise QueryError(
                f"{value} is not a real date; write dates as YYYY-MM-DD, e.g. 2026-10-01"
            ) from None
        if word.lower() in ("before", "until"):
            before = value
        else:
            after = value
    identifiers = {
        m.lower()
        for m in _EMAIL.findall(text)
        + _CUSTOMER_ID.findall(text)
        + _ORDER_ID.findall(text)
        + _SKU.findall(text)
    }
    words = [word for word in _WORD.findall(text.lower()) if word not in _STOPWORDS and len(word) > 2]
    topic = " ".join(dict.fromkeys(word for word in words if not any(word in ident for ident in identifiers)))
    return Reading(
        emails=list(dict.fromkeys(email.lower() for email in _EMAIL.findall(text))),
        customer_ids=list(dict.fromkeys(match.upper() for match in _CUSTOMER_ID.findall(text))),
        order_ids=list(dict.fromkeys(match.upper() for match in _ORDER_ID.findall(text))),
        skus=list(dict.fromkeys(match.upper() for match in _SKU.findall(text))),
        amounts=amounts,
        placed_after=after,
        placed_before=before,
        asks=frozenset(name for name, pattern in _ASKS.items() if pattern.search(text)),
        topic=topic,
    )


def plan_query(query: str) -> Plan:
    """The deterministic plan for a query; ``QueryError`` when it names nothing researchable."""
    reading = read_query(query)
    tasks: list[PlannedTask] = []
    customer = (reading.emails + reading.customer_ids)[:1]
    asks = reading.asks
    wants_refund = "refund" in asks and bool(reading.order_ids) and bool(reading.amounts)
    if customer:
        tasks.append(PlannedTask("customer", "customers", "customer_lookup", {"identifier": customer[0]},
                                 why=f"resolve {customer[0]}"))  # fmt: skip
        # An email must be resolved to an id first; a CUST- id named in the query is used as it is,
        # so the customer's orders, tickets and billing need not wait for (or fail with) the lookup.
        needs_customer: tuple[str, ...] = () if reading.customer_ids and not reading.emails else ("customer",)
        customer_id: Any = reading.customer_ids[0] if not needs_customer else Ref("customer", "id")
        if "orders" in asks or reading.skus or (reading.order_ids and not wants_refund):
            arguments: dict[str, Any] = {"customer_id": customer_id}
            if reading.skus:
                arguments["sku"] = reading.skus[0]
            if reading.placed_after:
                arguments["placed_after"] = reading.placed_after
            if reading.placed_before:
                arguments["placed_before"] = reading.placed_before
            tasks.append(PlannedTask("orders", "orders", "search_orders", arguments, depends_on=needs_customer,
                                     why="the customer's orders"))  # fmt: skip
        if "tickets" in asks:
            arguments = {"customer_id": customer_id}
            if "open" in asks:
                arguments["status"] = "open"
            tasks.append(PlannedTask("tickets", "tickets", "search_tickets", arguments, depends_on=needs_customer,
                                     why="the customer's support tickets"))  # fmt: skip
        if "invoices" in asks:
            tasks.append(PlannedTask("invoices", "billing", "list_invoices", {"customer_id": customer_id},
                                     purpose="refund research" if "refund" in asks else "billing research",
                                     depends_on=needs_customer, why="the customer's invoices"))  # fmt: skip
        if wants_refund:
            tasks.append(PlannedTask(
                "refund", "billing", "refund_eligibility",
                {"order_id": reading.order_ids[0], "amount": reading.amounts[0]},
                purpose="refund research", depends_on=needs_customer,
                why=f"whether £{reading.amounts[0]:,.2f} may be refunded on {reading.order_ids[0]}",
            ))  # fmt: skip
    if "policies" in asks or "refund" in asks:
        topic = reading.topic or "refunds"
        tasks.append(
            PlannedTask(
                "policies", "kb", "search_policies", {"query": topic[:200]}, why=f"policies on {topic}"
            )
        )
    if not tasks or (not customer and not any(task.source == "kb" for task in tasks)):
        raise QueryError(
            "the query names nothing to research: mention a customer (an email or CUST-NNNNN) with what you want "
            'to know (orders, tickets, invoices, a refund), or a policy topic, e.g. "What is our policy on refunds?"'
        )
    return Plan.of(query, tasks)
