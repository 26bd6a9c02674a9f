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
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from coordinator.planning.intents import INTENTS
from sources.catalogue import TOOLS, input_schemas
from sources.deferred import deferred
from sources.formats import (
    AMOUNT_DESCRIPTION,
    ARTICLE_ID,
    CUSTOMER_ID,
    CUSTOMER_IDENTIFIER,
    ISO_DATE,
    LINKS_DESCRIPTION,
    ORDER_ID,
    PERSON_NAME,
    SEARCH_TEXT,
    SKU,
)

if TYPE_CHECKING:
    import jsonschema
else:
    jsonschema = deferred("jsonschema")  # only a registered source's schemas are checked

__all__ = [
    "ARGUMENT_PHRASES",
    "ASKED_ONLY",
    "CARDS",
    "GIVES",
    "LOOKUPS",
    "PATH_KINDS",
    "SUBJECT_KINDS",
    "TASK_NAMES",
    "TOPIC_WORDS",
    "WHY",
    "WHY_LOOKED_UP",
    "Argument",
    "Catalog",
    "ToolCard",
    "demo_catalog",
    "intents_taking",
    "tool_arguments",
    "with_registered",
]

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


@dataclass(frozen=True)
class ToolCard:
    """What the planner and the brief know of one demo tool that its schema does not say.

    ``task_name``: a plain name for its task (a reader sees "orders", not "search_orders"). ``why``:
    why it is planned, in words: what the call looks for, each argument it names (``{name}``) as
    its value reads (an amount in pounds; a looked-up value as what it is: "the customer",
    "ORD-10023's customer"); ``{topic}`` is the topic words of its search text ("refund"); an
    argument it does not name follows as ``ARGUMENT_PHRASES`` say ("support tickets of the customer,
    open ones"). ``looks_up``: the kinds of mention it is the lookup for. ``gives``: what its
    record gives later tasks (kind -> the record's field). ``why_looked_up``: the why of a call
    whose argument (the key) comes from a lookup, where that reads better than the value's name.
    Its arguments are its published input schema's (``tool_arguments``).
    """

    key: str  # "source.tool"
    task_name: str
    why: str
    looks_up: tuple[str, ...] = ()
    gives: dict[str, str] = field(default_factory=dict)
    why_looked_up: dict[str, str] = field(default_factory=dict)

    @property
    def arguments(self) -> dict[str, Argument]:
        return tool_arguments()[self.key]


# The demo tools that write (a refund moves money): no card plans them from what a question names. The
# planner plans one only where the question asks for it (``coordinator.planning.writes``), after the
# check it needs.
ASKED_ONLY = frozenset({"billing.issue_refund"})
# One card per other tool of the demo sources (``sources/tools.json``; a test holds them together).
CARDS = {
    card.key: card
    for card in (
        ToolCard(
            "customers.customer_lookup", "customer", "who {identifier} is",
            looks_up=("email", "customer_id"), gives={"customer_id": "id"},
        ),
        ToolCard("customers.find_customers", "customer", "customers named {name}", looks_up=("name",),
                 gives={"customer_id": "id"}),
        ToolCard("orders.search_orders", "orders", "the orders of {customer_id}"),
        ToolCard(
            "orders.get_order", "order", "order {order_id}", looks_up=("order_id",),
            gives={"customer_id": "customer_id", "amount": "total"},
        ),
        ToolCard("billing.list_invoices", "invoices", "the invoices of {customer_id}"),
        ToolCard(
            "billing.refund_eligibility", "refund", "whether {amount} may be refunded on {order_id}",
            # a refund of an order's own total is a refund in full
            why_looked_up={"amount": "whether {order_id} may be refunded in full"},
        ),
        ToolCard("tickets.search_tickets", "tickets", "support tickets"),
        ToolCard("kb.search_policies", "policies", "{topic} policies"),
        ToolCard("kb.related_policies", "related", "policies linked to {article_id}", looks_up=("article_id",)),
    )
}  # fmt: skip

# The cards' facts as the planner reads them: the lookup a named thing gets, by kind of mention; what
# a looked-up record gives; each tool's task name and why; the why of an argument that was looked up.
LOOKUPS = {kind: card.key for card in CARDS.values() for kind in card.looks_up}
GIVES = {card.key: card.gives for card in CARDS.values() if card.gives}
TASK_NAMES = {card.key: card.task_name for card in CARDS.values()}
WHY = {card.key: card.why for card in CARDS.values()}
WHY_LOOKED_UP = {(card.key, name): why for card in CARDS.values() for name, why in card.why_looked_up.items()}
# An argument a why does not name, by its kind ({} is its value): those that say what is looked for
# follow the words at once ("support tickets on ORD-10023"), the others after a comma ("..., open
# ones"). Dates and links are said by the planner (a pair of dates is one range); a registered
# source's kind is "for" its value, and an argument of no kind its name and value.
ARGUMENT_PHRASES = {
    "customer_id": "of {}",
    "customer": "of {}",
    "order_id": "on {}",
    "article_id": "linked to {}",
    "name": "named {}",
    "text": 'matching "{}"',
    "choice": "{} ones",
    "sku": "with {}",
    "amount": "of {}",
}
# The words every search for a topic holds ("refund" for "money back"): a why puts them first.
TOPIC_WORDS = frozenset(intent.default_topic for intent in INTENTS if intent.default_topic)


@functools.cache
def intents_taking(kind: str) -> frozenset[str]:
    """The intents one of whose demo tools takes an argument of ``kind``: "text" (tickets, policies,
    a refund's policy: they search by words), "date" (orders, everything: the orders search)."""
    arguments = tool_arguments()
    return frozenset(
        intent.name
        for intent in INTENTS
        for entry in intent.tools
        for tool in entry.split("|")
        if any(argument.kind == kind for argument in arguments.get(tool.strip(), {}).values())
    )


@dataclass(frozen=True)
class Argument:
    kind: str  # a key of SUBJECT_KINDS, or sku, date, amount, choice, other
    required: bool
    choices: tuple[str, ...] = ()


@functools.cache
def tool_arguments() -> dict[str, dict[str, Argument]]:
    """Every tool's arguments ("source.tool" -> name -> kind), read from the published input schemas."""
    return {
        f"{source}.{tool}": _schema_arguments(schema)
        for source, schemas in input_schemas().items()
        for tool, schema in schemas.items()
    }


def _schema_arguments(schema: dict[str, Any]) -> dict[str, Argument]:
    """An input schema's arguments (name -> kind), each as its format says."""
    required = set(schema.get("required", []))
    return {
        name: _argument(prop, schema.get("$defs", {}), name in required)
        for name, prop in schema.get("properties", {}).items()
    }


def _argument(prop: Any, defs: dict[str, Any], required: bool) -> Argument:
    if not isinstance(prop, dict):  # a schema may be true or false (anything, or nothing): no kind
        return Argument("other", required)
    for found in [prop, *prop.get("anyOf", [])]:
        if not isinstance(found, dict):
            continue
        referred = defs.get(str(found.get("$ref", "")).rsplit("/", 1)[-1], {})
        variant = {**found, **(referred if isinstance(referred, dict) else {})}
        if variant.get("pattern") in _KIND_OF_PATTERN:
            return Argument(_KIND_OF_PATTERN[variant["pattern"]], required)
        # A choice that defaults to nothing filters (a ticket's status); one with a default is a mode
        # of the tool (customer_lookup's simulated outcomes), which a query never sets.
        if "enum" in variant and prop.get("default") is None:
            return Argument("choice", required, tuple(variant["enum"]))
    if AMOUNT_DESCRIPTION in prop.get("description", ""):
        return Argument("amount", required)
    if LINKS_DESCRIPTION in prop.get("description", ""):
        return Argument("links", required)
    return Argument("other", required)


# --- the tools in effect: the demo sources' and the registered sources' ------------------------------

# The kinds a path a question names may be taken as (a registered tool's argument says which).
PATH_KINDS = frozenset({"path", "file", "folder"})


@dataclass(frozen=True)
class Catalog:
    """Every tool the planner may plan, and what the other tools lack.

    ``tools`` holds each plannable tool's arguments; ``offered`` every tool of every source (a plan may
    name no other); ``entities`` the kinds of thing registered sources define (kind -> pattern);
    ``registered`` which plannable tools are a registered source's (planned by what they take);
    ``not_usable`` why a tool (or a whole source) cannot be planned, in words.
    """

    tools: dict[str, dict[str, Argument]]
    offered: dict[str, frozenset[str]]
    entities: dict[str, str] = field(default_factory=dict)
    registered: frozenset[str] = frozenset()
    not_usable: dict[str, str] = field(default_factory=dict)
    # Kinds a registered source's entry says its tools take, though it could not be listed: still read
    # in a question, so what it names is reported as not researched (and why) rather than lost in words.
    unserved: frozenset[str] = frozenset()
    # The plannable registered tools that do not say they only read: planned only where the question
    # asks for that very tool (``coordinator.planning.writes``), never for what else it names.
    writes: frozenset[str] = frozenset()

    @property
    def plannable(self) -> dict[str, frozenset[str]]:
        """Each source's tools a plan may name: a registered source's read-only or named ones alone."""
        return {
            source: frozenset(name for name in names if f"{source}.{name}" in self.tools)
            for source, names in self.offered.items()
        }

    def describe(self) -> str:
        """Every source's tools in a line each, a registered tool with what it takes: for a model to plan."""
        lines = []
        for source, names in self.offered.items():
            shown = [
                f"{name}({', '.join(self.tools[f'{source}.{name}'])})"
                if f"{source}.{name}" in self.registered
                else name
                for name in sorted(names)
                if f"{source}.{name}" in self.tools
            ]
            lines.append(f"{source}: {', '.join(shown)}")
        return "; ".join(lines)

    @property
    def reads_paths(self) -> bool:
        """Whether a registered tool takes a path, so paths in a question are worth reading."""
        return bool(self.unserved & PATH_KINDS) or any(
            argument.kind in PATH_KINDS for tool in self.registered for argument in self.tools[tool].values()
        )

    def without(self, source: str, why: str, hints: Any) -> Catalog:
        """This catalog, with a registered source that cannot be used: why, and what its entry says it takes."""
        kinds = {kind for arguments in hints.plan.values() for kind in arguments.values()}
        return Catalog(
            self.tools, self.offered, {**self.entities, **hints.entities}, self.registered,
            {**self.not_usable, source: why}, self.unserved | kinds, self.writes,
        )  # fmt: skip


@functools.cache
def demo_catalog() -> Catalog:
    return Catalog(tool_arguments(), dict(TOOLS))


def with_registered(catalog: Catalog, source: str, listed: list[Any], hints: Any) -> Catalog:
    """``catalog`` with a registered source's tools (``ListedTool``s) planned by its entry's hints.

    ``hints`` is the source's ``SourceEntry``: ``plan`` says which argument takes which kind,
    ``entities`` defines kinds of its own. A tool is plannable when it says it only reads (its
    ``readOnlyHint``) or the entry names it under ``plan``, its schema is valid, and every argument it
    requires takes a kind; what is not says why.
    """
    tools, not_usable, registered = dict(catalog.tools), dict(catalog.not_usable), set(catalog.registered)
    writes = set(catalog.writes)
    for tool in listed:
        key = f"{source}.{tool.name}"
        arguments, why = _registered_arguments(tool, hints.plan.get(tool.name))
        if why:
            not_usable[key] = why
            continue
        tools[key] = arguments
        registered.add(key)
        if not tool.read_only:
            writes.add(key)
    return Catalog(
        tools,
        {**catalog.offered, source: frozenset(tool.name for tool in listed)},
        {**catalog.entities, **hints.entities},
        frozenset(registered),
        not_usable,
        writes=frozenset(writes),
    )


def _registered_arguments(tool: Any, kinds: dict[str, str] | None) -> tuple[dict[str, Argument], str]:
    """A registered tool's arguments as the planner takes them, or why it cannot plan the tool."""
    schema = tool.input_schema
    try:
        jsonschema.validators.validator_for(schema).check_schema(schema)  # its own $schema's draft
    except jsonschema.SchemaError as exc:
        return {}, f"its input schema is invalid: {exc.message}"
    if not tool.read_only and kinds is None:
        return {}, "not read-only (no readOnlyHint): research calls it only if plan names it"
    arguments = _schema_arguments(schema)
    for name, kind in (kinds or {}).items():
        if name not in arguments:
            return (
                {},
                f"plan names argument {name!r}, which it does not take ({', '.join(arguments) or 'none'})",
            )
        arguments[name] = Argument(kind, arguments[name].required)
    unnamed = sorted(
        name for name, argument in arguments.items() if argument.required and argument.kind == "other"
    )
    if unnamed:
        return {}, f"nothing says what {unnamed[0]!r} takes (--plan {tool.name}:{unnamed[0]}=KIND)"
    if not any(argument.kind not in ("other", "choice") for argument in arguments.values()):
        return {}, "takes nothing a question names"
    return arguments, ""
