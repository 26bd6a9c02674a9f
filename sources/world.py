"""The demo world: generated from a fixed seed into one SQLite file per source, plus the story records.

Same seed, same data, on every machine: Faker is pinned and seeded per instance, every other choice
comes from one ``random.Random(seed)`` (delivery dates from a second one, so that adding them left
every other row as it was), and the calendar is fixed (``TODAY``), never the clock.

Every order delivered (``delivered``, ``delivered_damaged``, and ``returned``, which was delivered
first) has a delivery date, ``delivered_on``, in the orders source and on its invoice in billing (a
billing system learns of deliveries from fulfilment; the sources share no database). Orders not
delivered (``processing``, ``shipped``, ``cancelled``) have none. The story orders are delivered
within the refund window of ``TODAY``, except the one whose story is being outside it.

The story records have fixed identifiers that docs, examples and checks rely on:

| story                                               | identifiers                                        |
|-----------------------------------------------------|----------------------------------------------------|
| damaged order, £750 refund requested, open ticket   | jane.doe@example.com = CUST-00042, ORD-10023, SKU-4417-BLK |
| a small refund within the automatic refund limit    | CUST-00042, ORD-10031, £45                         |
| too late: delivered 101 days ago, past the window   | old.order@example.com = CUST-00460, ORD-12460, £129 |
| erased on request (GDPR)                            | CUST-00013 / erased.user@example.com               |
| restricted VIP, needs customers:restricted          | CUST-00001 / vip@example.com                       |
| no orders, no tickets, no invoices                  | CUST-00077 / new.customer@example.com              |
| linked policies                                     | KB-REFUNDS, KB-DAMAGED, KB-ESCALATION, KB-GDPR     |

The world is written to ``<data dir>/world-v<N>-seed<S>/`` at first start. Several sources starting
at once may each build it; each writes a private folder and renames it into place, and the first
rename wins, so nobody ever reads a half-written file. The folder is 0700 and its files 0600 (created
so, before SQLite writes a byte; SQLite gives a database's journal, WAL and shared-memory files the
database's own mode): the world holds customers' names and emails. A world, or a data folder, made
before with wider modes is made so when next used (``traces.private_files.private_folder``).
"""

from __future__ import annotations

import contextlib
import hashlib
import itertools
import json
import os
import random
import re
import shutil
import sqlite3
from collections.abc import Iterator
from dataclasses import dataclass, field
from datetime import date, timedelta
from pathlib import Path
from typing import TYPE_CHECKING, Any

from sources.catalogue import SOURCES
from sources.deferred import deferred
from sources.domain import AUTOMATIC_REFUND_LIMIT, REFUND_WINDOW_DAYS, TODAY, pounds
from sources.formats import CustomerTier, InvoiceStatus, OrderStatus, TicketPriority
from sources.identifiers import CUSTOMER_ID, ORDER_ID, SKU
from sources.products import PRODUCTS
from traces.private_files import open_private_file, private_folder

if TYPE_CHECKING:
    import faker
    from faker import Faker
else:
    # Every source imports this module to find its world at start-up; only generating one needs
    # Faker (a seventh of a source's start).
    faker = deferred("faker")

__all__ = ["CHANGING", "SOURCES", "TODAY", "World", "build_world", "ensure_world", "world_path"]

# 2: delivery dates (orders.delivered_on, invoices.delivered_on), CUST-00460;
# 3: tickets indexed by customer and by order (a customer's tickets were a scan of every ticket)
WORLD_VERSION = 3

# The sources whose data file changes once the world is built: billing's, by issue_refund. The
# others' files are never written again (a world is renamed into place finished), so their stores
# read them as immutable (``sources.store.Store``).
CHANGING = frozenset({"billing"})

_CUSTOMERS = 400
_TICKETS = 600
_LONG_TICKET_EVERY = 25  # one ticket in 25 has a very long body, the kind a hook must trim

Row = dict[str, Any]  # one row of a table, by column
Order = tuple[Row, list[Row]]  # an order's row and its items' rows

_SCHEMA: dict[str, str] = {
    "customers": """
        CREATE TABLE customers (
            id TEXT PRIMARY KEY, email TEXT NOT NULL UNIQUE, name TEXT NOT NULL, tier TEXT NOT NULL,
            country TEXT NOT NULL, created_on TEXT NOT NULL,
            restricted INTEGER NOT NULL DEFAULT 0, erased_on TEXT);
    """,
    "orders": """
        CREATE TABLE orders (
            id TEXT PRIMARY KEY, customer_id TEXT NOT NULL, placed_on TEXT NOT NULL, status TEXT NOT NULL,
            delivered_on TEXT, total REAL NOT NULL, currency TEXT NOT NULL);
        CREATE INDEX orders_by_customer ON orders (customer_id, placed_on);
        CREATE TABLE order_items (
            order_id TEXT NOT NULL, sku TEXT NOT NULL, description TEXT NOT NULL,
            quantity INTEGER NOT NULL, unit_price REAL NOT NULL);
        CREATE INDEX items_by_order ON order_items (order_id);
    """,
    "billing": """
        CREATE TABLE invoices (
            id TEXT PRIMARY KEY, customer_id TEXT NOT NULL, order_id TEXT NOT NULL UNIQUE,
            issued_on TEXT NOT NULL, amount REAL NOT NULL, currency TEXT NOT NULL, status TEXT NOT NULL,
            delivered_on TEXT);
        CREATE INDEX invoices_by_customer ON invoices (customer_id);
        CREATE TABLE refunds (
            id TEXT PRIMARY KEY, order_id TEXT NOT NULL, amount REAL NOT NULL,
            idempotency_key TEXT NOT NULL UNIQUE, issued_by TEXT NOT NULL, issued_on TEXT NOT NULL);
    """,
    "tickets": """
        CREATE TABLE tickets (
            id TEXT PRIMARY KEY, customer_id TEXT NOT NULL, order_id TEXT, subject TEXT NOT NULL,
            body TEXT NOT NULL, status TEXT NOT NULL, priority TEXT NOT NULL, opened_on TEXT NOT NULL);
        CREATE INDEX tickets_by_customer ON tickets (customer_id, opened_on);
        CREATE INDEX tickets_by_order ON tickets (order_id);
        CREATE VIRTUAL TABLE tickets_text USING fts5(subject, body, content='tickets', content_rowid='rowid');
    """,
    "kb": """
        CREATE TABLE policies (
            id TEXT PRIMARY KEY, title TEXT NOT NULL, summary TEXT NOT NULL, body TEXT NOT NULL,
            updated_on TEXT NOT NULL);
        CREATE VIRTUAL TABLE policies_text USING fts5(title, summary, body, content='policies', content_rowid='rowid');
        CREATE TABLE links (source TEXT NOT NULL, target TEXT NOT NULL, relation TEXT NOT NULL);
    """,
}

_FTS_REBUILD = {
    "tickets": "INSERT INTO tickets_text (tickets_text) VALUES ('rebuild')",
    "kb": "INSERT INTO policies_text (policies_text) VALUES ('rebuild')",
}


@dataclass
class World:
    """Every table's rows, by source and table, in insertion order."""

    tables: dict[str, dict[str, list[Row]]] = field(
        default_factory=lambda: {source: {} for source in SOURCES}
    )

    def add(self, source: str, table: str, row: Row) -> None:
        self.tables[source].setdefault(table, []).append(row)

    def fingerprint(self) -> str:
        """A digest of every row: equal worlds, equal fingerprints, on any machine."""
        canonical = json.dumps(self.tables, sort_keys=True, ensure_ascii=True, separators=(",", ":"))
        return hashlib.sha256(canonical.encode()).hexdigest()


# --- the story -------------------------------------------------------------------------------

# The story's customers and orders as tables: a record a line, its columns named once.
_CUSTOMER_COLUMNS = ("id", "email", "name", "tier", "country", "created_on", "restricted", "erased_on")
_STORY_CUSTOMER_ROWS = (
    ("CUST-00001", "vip@example.com", "Victoria Ives", "vip", "GB", "2019-03-14", 1, None),
    ("CUST-00013", "erased.user@example.com", "[erased]", "standard", "GB", "2021-06-02", 0, "2026-02-10"),
    ("CUST-00042", "jane.doe@example.com", "Jane Doe", "gold", "GB", "2022-09-21", 0, None),
    ("CUST-00077", "new.customer@example.com", "Noah Newman", "standard", "GB", "2026-10-28", 0, None),
    # above the generated customers' numbers (1 to _CUSTOMERS): adding it changed none of theirs
    ("CUST-00460", "old.order@example.com", "Olive Oldham", "standard", "GB", "2024-04-08", 0, None),
)
_STORY_CUSTOMERS: list[Row] = [dict(zip(_CUSTOMER_COLUMNS, row, strict=True)) for row in _STORY_CUSTOMER_ROWS]
# Each story order with its one item.
_ORDER_COLUMNS = ("id", "customer_id", "placed_on", "status", "delivered_on", "total", "currency")
_ITEM_COLUMNS = ("sku", "description", "quantity", "unit_price")
_STORY_ORDER_ROWS = (
    (  # delivered 18 days before TODAY
        ("ORD-10023", "CUST-00042", "2026-10-12", "delivered_damaged", "2026-10-14", 750.0, "GBP"),
        ("SKU-4417-BLK", "Barista Pro espresso machine, black", 1, 750.0),
    ),
    (  # delivered 10 days before TODAY
        ("ORD-10031", "CUST-00042", "2026-10-20", "delivered", "2026-10-22", 45.0, "GBP"),
        ("SKU-2210-WHT", "Milk frothing jug, white", 1, 45.0),
    ),
    (  # delivered 45 days before TODAY: small refunds on it are issued
        ("ORD-10008", "CUST-00042", "2026-09-14", "delivered", "2026-09-17", 64.5, "GBP"),
        ("SKU-1032-BRN", "Coffee beans, house blend 1kg", 3, 21.5),
    ),
    (  # numbered above the generated orders: adding it shifted none of their numbers; delivered 101
        # days before TODAY: outside the refund window
        ("ORD-12460", "CUST-00460", "2026-07-20", "delivered", "2026-07-23", 129.0, "GBP"),
        ("SKU-1311-SLV", "Burr coffee grinder, silver", 1, 129.0),
    ),
)
_STORY_ORDERS: list[Order] = [
    (dict(zip(_ORDER_COLUMNS, order, strict=True)), [dict(zip(_ITEM_COLUMNS, item, strict=True))])
    for order, item in _STORY_ORDER_ROWS
]
_STORY_TICKETS: list[Row] = [
    {
        "id": "TCK-20042",
        "customer_id": "CUST-00042",
        "order_id": "ORD-10023",
        "subject": "Espresso machine arrived damaged - refund of £750 requested",
        "body": (
            "The Barista Pro espresso machine (SKU-4417-BLK) from order ORD-10023 arrived with a cracked "
            "water tank and a dented casing; photos attached. The customer asks for a full refund of £750 "
            "rather than a replacement."
        ),
        "status": "open",
        "priority": "high",
        "opened_on": "2026-10-15",
    },
    {
        "id": "TCK-20051",
        "customer_id": "CUST-00042",
        "order_id": "ORD-10031",
        "subject": "Frothing jug - refund of £45 for a duplicate order",
        "body": "Customer ordered the milk frothing jug twice by mistake and asks for £45 back for ORD-10031.",
        "status": "pending",
        "priority": "low",
        "opened_on": "2026-10-22",
    },
    {
        "id": "TCK-20060",
        "customer_id": "CUST-00460",
        "order_id": "ORD-12460",
        "subject": "Burr grinder too noisy - refund of £129 requested",
        "body": (
            "The burr coffee grinder (SKU-1311-SLV) from order ORD-12460, delivered on 2026-07-23, is "
            "louder than the customer expected. The customer asks for a full refund of £129."
        ),
        "status": "open",
        "priority": "normal",
        "opened_on": "2026-10-28",
    },
]
_LIMIT = pounds(
    AUTOMATIC_REFUND_LIMIT, short=True
)  # as the policies write it; a new limit is a new WORLD_VERSION
_POLICIES = [
    (
        "KB-REFUNDS",
        "Refunds",
        f"Refunds up to {_LIMIT} are issued automatically; larger refunds need a manager.",
        f"A refund may be issued for an order within {REFUND_WINDOW_DAYS} days of delivery, up to the amount "
        f"paid less earlier refunds. Refunds up to {_LIMIT} are issued automatically by support agents. A "
        f"refund above the {_LIMIT} automatic limit must be approved by a manager: see KB-ESCALATION.",
    ),
    (
        "KB-DAMAGED",
        "Damaged items",
        "Items that arrive damaged qualify for a full refund or a replacement.",
        "When an item arrives damaged, the customer may choose a full refund or a replacement. Ask for photos "
        "of the damage and record them on the ticket. The refund itself follows KB-REFUNDS, including its "
        f"{_LIMIT} automatic limit.",
    ),
    (
        "KB-ESCALATION",
        "Escalation to a manager",
        "How to escalate a case that exceeds an agent's authority.",
        f"Escalate to a duty manager when a refund exceeds the {_LIMIT} automatic limit, when a customer is "
        "restricted, or when a business rule blocks an action. Attach the attempted action, the evidence "
        "gathered so far and the customer's request.",
    ),
    (
        "KB-GDPR",
        "Data protection and erasure",
        "Erased customers' records are never shown or processed.",
        "When a customer exercises the right to erasure, their personal data is removed and their record is "
        "kept only as a tombstone. Lookups of an erased customer are refused; do not try to reconstruct the "
        "record from other systems.",
    ),
    (
        "KB-VIP",
        "Restricted (VIP) accounts",
        "Restricted accounts need scope customers:restricted.",
        "Some accounts are restricted: only agents holding the customers:restricted scope may see them. "
        "Request access through the credential broker or escalate per KB-ESCALATION.",
    ),
    (
        "KB-SHIPPING",
        "Shipping and delivery",
        "Standard delivery takes 3 to 5 working days.",
        "Standard delivery takes 3 to 5 working days within the UK. Damage in transit is handled under "
        "KB-DAMAGED.",
    ),
    (
        "KB-RETURNS",
        "Returns",
        "Unused items may be returned within 30 days.",
        "Unused items in their original packaging may be returned within 30 days of delivery. Once the return "
        "is received, the refund follows KB-REFUNDS.",
    ),
    (
        "KB-WARRANTY",
        "Warranty",
        "Appliances carry a two-year manufacturer's warranty.",
        "Appliances carry a two-year warranty covering faults but not accidental damage. A fault within 30 "
        "days of delivery may be treated as damage on arrival under KB-DAMAGED.",
    ),
]
_LINKS = [
    ("KB-DAMAGED", "KB-REFUNDS", "refund_rules"),
    ("KB-REFUNDS", "KB-ESCALATION", "above_limit"),
    ("KB-DAMAGED", "KB-ESCALATION", "above_limit"),
    ("KB-GDPR", "KB-ESCALATION", "blocked_action"),
    ("KB-VIP", "KB-ESCALATION", "no_access"),
    ("KB-SHIPPING", "KB-DAMAGED", "damage_in_transit"),
    ("KB-RETURNS", "KB-REFUNDS", "refund_rules"),
    ("KB-WARRANTY", "KB-DAMAGED", "early_fault"),
]
_RESERVED_ORDERS = {order["id"] for order, _ in _STORY_ORDERS}
_STORY_CUSTOMER_IDS = {customer["id"] for customer in _STORY_CUSTOMERS}

_COLOURS = ["BLK", "WHT", "RED", "GRN", "BLU", "SLV", "BRN"]
_ORDER_STATUSES = [
    OrderStatus.DELIVERED.value, OrderStatus.DELIVERED.value, OrderStatus.DELIVERED.value, OrderStatus.SHIPPED.value,
    OrderStatus.PROCESSING.value, OrderStatus.RETURNED.value, OrderStatus.CANCELLED.value,
]  # fmt: skip
# Statuses of orders that reached the customer, and so have a delivery date ("returned": delivered,
# then sent back). Processing, shipped and cancelled orders have none.
_DELIVERED = {"delivered", "delivered_damaged", "returned"}
_DELIVERY_DAYS = (2, 7)  # KB-SHIPPING: 3 to 5 working days, in calendar days
_TICKET_TOPICS = [
    ("Late delivery", "has not arrived yet; tracking shows no movement for several days"),
    ("Wrong colour received", "arrived in the wrong colour and the customer wants an exchange"),
    ("Refund status", "was returned last week and the customer asks when the refund will arrive"),
    ("Item damaged in transit", "arrived with a damaged box and a scratched surface"),
    ("Missing part", "arrived without the drip tray; the customer asks for the missing part"),
    ("Invoice copy", "needs a VAT invoice copy for the customer's employer"),
    ("Change of address", "should be delivered to a new address"),
]


def _slug(text: str) -> str:
    return re.sub(r"[^a-z]", "", text.lower())


def _sku(rng: random.Random, product_index: int) -> str:
    return SKU.numbered(1000 + product_index * 311 % 9000, rng.choice(_COLOURS))


def build_world(seed: int) -> World:
    """Every row of the demo world for this seed, story records included."""

    rng = random.Random(seed)  # noqa: S311  (demo data, not cryptography)
    # Delivery dates from a generator of their own: drawing them from ``rng`` would have changed every
    # row generated after the first order (names, tickets), which tests and docs quote.
    deliveries = random.Random(f"{seed}:deliveries")  # noqa: S311
    fake = faker.Faker("en_GB")
    fake.seed_instance(seed)
    # The draws happen in this order, customers, orders, tickets, and must stay in it: each step's
    # draws move every later one, and the same seed must give the same world.
    customers = _customers(rng, fake)
    orders = _orders(customers, rng, deliveries)
    tickets = _tickets(orders, rng, fake)

    world = World()
    for customer in customers:
        world.add("customers", "customers", customer)
    for order, items in orders:
        world.add("orders", "orders", order)
        for item in items:
            world.add("orders", "order_items", {"order_id": order["id"], **item})
        world.add("billing", "invoices", _invoice(order))
    for ticket in tickets:
        world.add("tickets", "tickets", ticket)
    _add_knowledge_base(world)
    return world


# --- customers -------------------------------------------------------------------------------


def _customers(rng: random.Random, fake: Faker) -> list[Row]:
    """The story's customers and the generated ones, numbered 1 to ``_CUSTOMERS``, in id order."""
    customers = list(_STORY_CUSTOMERS)
    emails = {customer["email"] for customer in customers}
    for number in range(1, _CUSTOMERS + 1):
        customer_id = CUSTOMER_ID.canonical(number)
        if customer_id not in _STORY_CUSTOMER_IDS:
            customers.append(_generated_customer(customer_id, emails, rng, fake))
    customers.sort(key=lambda customer: customer["id"])
    return customers


def _generated_customer(customer_id: str, emails: set[str], rng: random.Random, fake: Faker) -> Row:
    """A made-up customer; its email is added to ``emails``, which it is unique in."""
    first, last = fake.first_name(), fake.last_name()
    email = _unique_email(f"{_slug(first)}.{_slug(last)}", emails, rng)
    emails.add(email)
    created = TODAY - timedelta(days=rng.randint(30, 2500))
    return {
        "id": customer_id,
        "email": email,
        "name": f"{first} {last}",
        "tier": rng.choice([CustomerTier.STANDARD.value] * 3 + [CustomerTier.GOLD.value]),
        "country": "GB",
        "created_on": created.isoformat(),
        "restricted": 0,
        "erased_on": None,
    }


def _unique_email(user: str, emails: set[str], rng: random.Random) -> str:
    """``user`` at a random example domain, numbered until no email in ``emails`` is the same."""
    email = f"{user}@{rng.choice(['example.com', 'example.org', 'example.net'])}"
    while email in emails:
        email = email.replace("@", f"{rng.randint(1, 99)}@", 1)
    return email


# --- orders and their invoices ---------------------------------------------------------------


def _orders(customers: list[Row], rng: random.Random, deliveries: random.Random) -> list[Order]:
    """The story's orders, then generated ones for every customer outside the story, in id order."""
    orders = list(_STORY_ORDERS)
    order_ids = _order_ids()
    for customer in customers:
        if customer["id"] in _STORY_CUSTOMER_IDS:
            continue
        for _ in range(rng.randint(0, 6)):
            orders.append(_generated_order(next(order_ids), customer["id"], rng, deliveries))
    orders.sort(key=lambda pair: pair[0]["id"])
    return orders


def _order_ids() -> Iterator[str]:
    """Order ids from ORD-10001 up, skipping the story's."""
    for number in itertools.count(10001):
        order_id = ORDER_ID.canonical(number)
        if order_id not in _RESERVED_ORDERS:
            yield order_id


def _generated_order(order_id: str, customer_id: str, rng: random.Random, deliveries: random.Random) -> Order:
    """A made-up order of one to three products; delivered ones have a delivery date."""
    items = [_generated_item(rng) for _ in range(rng.randint(1, 3))]
    placed = TODAY - timedelta(days=rng.randint(1, 720))
    total = round(sum(item["quantity"] * item["unit_price"] for item in items), 2)
    status = rng.choice(_ORDER_STATUSES)
    delivered = None
    if status in _DELIVERED:  # never after the world's today
        delivered = min(placed + timedelta(days=deliveries.randint(*_DELIVERY_DAYS)), TODAY)
    order = {
        "id": order_id,
        "customer_id": customer_id,
        "placed_on": placed.isoformat(),
        "status": status,
        "delivered_on": delivered.isoformat() if delivered else None,
        "total": total,
        "currency": "GBP",
    }
    return order, items


def _generated_item(rng: random.Random) -> Row:
    index = rng.randrange(len(PRODUCTS))
    name, price = PRODUCTS[index]
    return {"sku": _sku(rng, index), "description": name, "quantity": rng.randint(1, 2), "unit_price": price}


def _invoice(order: Row) -> Row:
    """Billing's invoice for an order: issued when it was placed, void when it was cancelled."""
    return {
        "id": f"INV-{30000 + ORDER_ID.number_of(order['id']):05d}",
        "customer_id": order["customer_id"],
        "order_id": order["id"],
        "issued_on": order["placed_on"],
        "amount": order["total"],
        "currency": "GBP",
        "status": InvoiceStatus.VOID.value
        if order["status"] == OrderStatus.CANCELLED
        else InvoiceStatus.PAID.value,
        "delivered_on": order["delivered_on"],
    }


# --- tickets and policies --------------------------------------------------------------------


def _tickets(orders: list[Order], rng: random.Random, fake: Faker) -> list[Row]:
    """The story's tickets, then ``_TICKETS`` generated ones about orders outside the story."""
    ticketed = [order for order, _ in orders if order["customer_id"] not in _STORY_CUSTOMER_IDS]
    return [*_STORY_TICKETS, *(_generated_ticket(number, ticketed, rng, fake) for number in range(_TICKETS))]


def _generated_ticket(number: int, orders: list[Row], rng: random.Random, fake: Faker) -> Row:
    """A made-up ticket about one of ``orders``; every ``_LONG_TICKET_EVERY``-th has a very long body."""
    order = rng.choice(orders)
    subject, problem = rng.choice(_TICKET_TOPICS)
    body = f"Order {order['id']} {problem}. {fake.paragraph(nb_sentences=3)}"
    if number % _LONG_TICKET_EVERY == 0:
        body += " " + " ".join(fake.paragraphs(nb=60))
    opened = date.fromisoformat(order["placed_on"]) + timedelta(days=rng.randint(1, 30))
    return {
        "id": f"TCK-{20100 + number:05d}",
        "customer_id": order["customer_id"],
        "order_id": order["id"],
        "subject": subject,
        "body": body,
        "status": rng.choice(["open", "pending", "closed", "closed"]),
        "priority": rng.choice(
            [
                TicketPriority.LOW.value,
                TicketPriority.NORMAL.value,
                TicketPriority.NORMAL.value,
                TicketPriority.HIGH.value,
            ]
        ),
        "opened_on": min(opened, TODAY).isoformat(),
    }


def _add_knowledge_base(world: World) -> None:
    for article_id, title, summary, body in _POLICIES:
        world.add(
            "kb",
            "policies",
            {"id": article_id, "title": title, "summary": summary, "body": body, "updated_on": "2026-09-01"},
        )
    for source, target, relation in _LINKS:
        world.add("kb", "links", {"source": source, "target": target, "relation": relation})


def world_path(data_dir: Path, seed: int) -> Path:
    return data_dir / f"world-v{WORLD_VERSION}-seed{seed}"


def _write(world: World, folder: Path) -> None:
    private_folder(folder)
    for source in SOURCES:
        database = folder / f"{source}.db"
        open_private_file(database, "w").close()  # 0600 from the start: SQLite keeps an empty file's mode
        with contextlib.closing(sqlite3.connect(database)) as connection:
            connection.executescript(_SCHEMA[source])
            for table, rows in world.tables[source].items():
                columns = list(rows[0])
                connection.executemany(
                    f"INSERT INTO {table} ({', '.join(columns)}) VALUES ({', '.join('?' for _ in columns)})",  # noqa: S608  (names are ours)
                    [tuple(row[column] for column in columns) for row in rows],
                )
            if source in _FTS_REBUILD:
                connection.execute(_FTS_REBUILD[source])
            connection.commit()
    with open_private_file(folder / "fingerprint", "w") as fingerprint:
        fingerprint.write(world.fingerprint())


def ensure_world(data_dir: Path, seed: int) -> Path:
    """The folder holding this seed's world, generated first if it is not there yet."""
    # 0700 whether this makes it or not (what is in it too, if it was open to others): the key pair
    # and the fleet's secret go there too. Another user's is refused.
    private_folder(data_dir, contents=True)
    target = world_path(data_dir, seed)
    if target.is_dir():
        private_folder(target, contents=True)  # a world written before it was made private: made so now
        return target
    draft = data_dir / f".{target.name}.{os.getpid()}.{random.SystemRandom().getrandbits(32):08x}"
    try:
        _write(build_world(seed), draft)
        try:
            draft.rename(target)
        except OSError:
            if not target.is_dir():  # not a lost race: a real failure
                raise
    finally:
        shutil.rmtree(draft, ignore_errors=True)
    return target
