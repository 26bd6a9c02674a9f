"""What the planner knows of each tool: what its arguments take, what its record gives, what it is for.

The kinds of a tool's arguments are read from its published input schema (``sources/tools.json``,
checked against every server's ``tools/list`` by a test): an argument's format (its pattern) says
which kind of value it takes, so the planner binds a tool to what a query names by matching kinds,
whatever the argument is called. The rest is data about tools that a schema does not say: which
lookup a named thing gets, which field of a looked-up record later tasks use, a task's plain name,
and why a call is planned, in words.
"""

from __future__ import annotations

import functools
from dataclasses import dataclass
from typing import Any

from sources.catalogue import input_schemas
from sources.formats import (
    AMOUNT_DESCRIPTION,
    ARTICLE_ID,
    CUSTOMER_ID,
    CUSTOMER_IDENTIFIER,
    ISO_DATE,
    ORDER_ID,
    PERSON_NAME,
    SEARCH_TEXT,
    SKU,
)

__all__ = ["GIVES", "LOOKUPS", "SUBJECT_KINDS", "TASK_NAMES", "WHY", "Argument", "tool_arguments"]

# An argument's kind, read from the format its schema publishes.
_KIND_OF_PATTERN = {
    CUSTOMER_ID.pattern: "customer_id",
    CUSTOMER_IDENTIFIER.pattern: "customer",
    ORDER_ID.pattern: "order_id",
    SKU.pattern: "sku",
    ARTICLE_ID.pattern: "article_id",
    ISO_DATE.pattern: "date",
    SEARCH_TEXT.pattern: "text",
    PERSON_NAME.pattern: "name",
}
# The kinds that say what a call is about (the others filter or qualify it).
SUBJECT_KINDS = frozenset({"customer_id", "customer", "order_id", "text", "name", "article_id"})

# The lookup a named thing gets, by kind of mention.
LOOKUPS = {
    "email": "customers.customer_lookup",
    "customer_id": "customers.customer_lookup",
    "name": "customers.find_customers",
    "order_id": "orders.get_order",
    "article_id": "kb.related_policies",
}
# What a looked-up record gives to later tasks: kind -> the record's field.
GIVES = {
    "customers.customer_lookup": {"customer_id": "id"},
    "customers.find_customers": {"customer_id": "id"},
    "orders.get_order": {"customer_id": "customer_id"},
}
# A plain name for each tool's task (a reader sees "orders", not "search_orders").
TASK_NAMES = {
    "customers.customer_lookup": "customer",
    "customers.find_customers": "customer",
    "orders.search_orders": "orders",
    "orders.get_order": "order",
    "billing.list_invoices": "invoices",
    "billing.refund_eligibility": "refund",
    "tickets.search_tickets": "tickets",
    "kb.search_policies": "policies",
    "kb.related_policies": "related",
}
# Why each tool is planned, in words; arguments the sentence does not name are added as filters.
WHY = {
    "customers.customer_lookup": "resolve {identifier}",
    "customers.find_customers": "customers named {name}",
    "orders.get_order": "order {order_id}",
    "orders.search_orders": "the orders of {customer_id}",
    "billing.list_invoices": "the invoices of {customer_id}",
    "billing.refund_eligibility": "whether {amount} may be refunded on {order_id}",
    "tickets.search_tickets": "support tickets",
    "kb.search_policies": "policies on {query}",
    "kb.related_policies": "policies linked to {article_id}",
}


@dataclass(frozen=True)
class Argument:
    kind: str  # a key of SUBJECT_KINDS, or sku, date, amount, choice, other
    required: bool
    choices: tuple[str, ...] = ()


@functools.cache
def tool_arguments() -> dict[str, dict[str, Argument]]:
    """Every tool's arguments ("source.tool" -> name -> kind), read from the published input schemas."""
    tools: dict[str, dict[str, Argument]] = {}
    for source, schemas in input_schemas().items():
        for tool, schema in schemas.items():
            required = set(schema.get("required", []))
            tools[f"{source}.{tool}"] = {
                name: _argument(prop, schema.get("$defs", {}), name in required)
                for name, prop in schema.get("properties", {}).items()
            }
    return tools


def _argument(prop: dict[str, Any], defs: dict[str, Any], required: bool) -> Argument:
    for found in [prop, *prop.get("anyOf", [])]:
        variant = {**found, **defs.get(found.get("$ref", "").rsplit("/", 1)[-1], {})}
        if variant.get("pattern") in _KIND_OF_PATTERN:
            return Argument(_KIND_OF_PATTERN[variant["pattern"]], required)
        # A choice that defaults to nothing filters (a ticket's status); one with a default is a mode
        # of the tool (customer_lookup's simulated outcomes), which a query never sets.
        if "enum" in variant and prop.get("default") is None:
            return Argument("choice", required, tuple(variant["enum"]))
    if AMOUNT_DESCRIPTION in prop.get("description", ""):
        return Argument("amount", required)
    return Argument("other", required)
