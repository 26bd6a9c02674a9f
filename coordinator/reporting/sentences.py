"""Records as sentences: what a finding, an answer line or a gap's kept results say of a record.

Each demo tool's record has its one-line sentence ("placed 2026-09-14, delivered, £64.50: 3 x Coffee
beans..."); a record of any other shape (a registered source's, a demo record missing a field) is
read out generically, its fields as "name value" in the order they came, nested ones in parentheses,
never as JSON. A record that is one text (``{"text": ...}``: a file's content, a server's words) is
that text on one line, or, when that text is itself JSON, the generic reading of what it holds.

Light on purpose: rendering a report imports it, and a report is rendered without the MCP SDK.
"""

from __future__ import annotations

import json
import re
from collections.abc import Callable
from typing import Any

from sources.domain import pounds

__all__ = ["describe", "plain", "record_id"]

# At most this many characters of a generic reading (a pasted document read whole is the exception:
# a text record is as long as the post-call ``TrimResults`` lets it be, and it says so).
_MOST = 300
# At most this many items of a list read out, then "and N more".
_MOST_ITEMS = 5
# A text that starts as JSON does (an object's first key, a list's first item): read as data.
_JSON_LIKE = re.compile(r'\s*(\{\s*("|\}|$)|\[\s*(["{\[\]]|-?\d|true|false|null|$))')


def _customer(record: dict[str, Any]) -> str:
    return (
        f"{record['name']} <{record['email']}>, {record['tier']} tier, customer since {record['created_on']}"
    )


def _items(record: dict[str, Any]) -> str:
    items = "; ".join(
        f"{item['quantity']} x {item['description']} ({item['sku']})" for item in record["items"]
    )
    return items or "no items"


def _order(record: dict[str, Any]) -> str:
    return f"placed {record['placed_on']}, {_words(record['status'])}, {pounds(record['total'])}: {_items(record)}"


def _one_order(record: dict[str, Any]) -> str:
    """An order looked up on its own: whose it is and when it arrived, as well as what it holds."""
    delivered = f" on {record['delivered_on']}" if record.get("delivered_on") else ""
    return (
        f"placed {record['placed_on']} by {record['customer_id']}, {_words(record['status'])}{delivered}, "
        f"{pounds(record['total'])}: {_items(record)}"
    )


def _ticket(record: dict[str, Any]) -> str:
    about = f" about {record['order_id']}" if record.get("order_id") else ""
    return f"{record['status']} {record['priority']}-priority ticket{about}, opened {record['opened_on']}: {record['subject']}"


def _invoice(record: dict[str, Any]) -> str:
    return (
        f"invoice for {record['order_id']}, {record['status']}, {pounds(record['amount'])}, "
        f"refunded {pounds(record['refunded'])}"
    )


def _assessment(record: dict[str, Any]) -> str:
    verdict = "may be refunded" if record["eligible"] else "may not be refunded automatically"
    return f"{pounds(record['requested'])} {verdict}: {record['reason']}"


def _policy(record: dict[str, Any]) -> str:
    return f"{record['title']}: {record['summary']}"


def _related(record: dict[str, Any]) -> str:
    """A linked article, how far and by what kind of link: "(1 link away: refund rules)", "(2 links
    away via KB-DAMAGED: early fault)"."""
    distance = int(record["distance"])
    via = f" via {', '.join(record['path'][1:-1])}" if distance > 1 and record.get("path") else ""
    away = f"{distance} link{'' if distance == 1 else 's'} away{via}"
    return f"{record['title']}: {record['summary']} ({away}: {_words(record['relation'])})"


def _refund(record: dict[str, Any]) -> str:
    return f"refund of {pounds(record['amount'])} on {record['order_id']} issued{' (replayed)' if record['replayed'] else ''}"


_Describer = Callable[[dict[str, Any]], str]
# Each demo tool's sentence for its records.
_DESCRIBE: dict[str, _Describer] = {
    "customer_lookup": _customer,
    "find_customers": _customer,
    "search_orders": _order,
    "get_order": _one_order,
    "search_tickets": _ticket,
    "list_invoices": _invoice,
    "refund_eligibility": _assessment,
    "search_policies": _policy,
    "related_policies": _related,
    "issue_refund": _refund,
}
# Every sentence, the most particular shape first (a linked article is a policy, and more).
_DESCRIBERS: tuple[_Describer, ...] = (
    _related, _one_order, _customer, _ticket, _invoice, _assessment, _refund, _policy,
)  # fmt: skip


def record_id(record: Any) -> str:
    """The id a finding of ``record`` cites: its ``id``, else "-"."""
    return str(record.get("id", "-")) if isinstance(record, dict) else "-"


def describe(tool: str, record: Any) -> str:
    """``record``, a result of ``tool``, as one line: its tool's sentence, else its generic reading."""
    if isinstance(record, dict):
        text = _text_only(tool, record)
        if text is not None:  # a server outside the contract answered in words (a file read, a listing)
            return text
        # Its tool's sentence; else the first that fits its shape (the refund assessment kept by a
        # gap whose last call was issue_refund; a registered tool's customer record); else generic.
        own = [_DESCRIBE[tool]] if tool in _DESCRIBE else []
        for describer in dict.fromkeys([*own, *_DESCRIBERS]):
            try:
                return describer(record)
            except (KeyError, TypeError, ValueError, AttributeError, IndexError):  # another shape
                continue
        record = {name: value for name, value in record.items() if name != "id"}  # the id is cited
    return _cut(plain(record)) or "an empty record"


def _text_only(tool: str, record: dict[str, Any]) -> str | None:
    """A record that is one text and nothing else (``{"content": ...}``, ``{"text": ...}``), as that text
    on one line (how long it may be is the post-call ``TrimResults``'s to say, and it says so); a text
    that is JSON (a server that answers its data as text) as the generic reading of that data."""
    if len(record) != 1:
        return None
    text = next(iter(record.values()))
    if not isinstance(text, str):
        return None
    if _JSON_LIKE.match(text):
        try:
            data = json.loads(text)
        except ValueError:  # cut short (trimmed), or not JSON after all: its words without the syntax
            return _cut(_unquoted(text))
        return _data(tool, data)
    return " ".join(text.split())


def _data(tool: str, data: Any) -> str:
    """What a text of JSON held, read as a record of ``tool`` (or, a list, as its first few)."""
    if isinstance(data, list):
        shown = "; ".join(describe(tool, item) for item in data[:_MOST_ITEMS])
        more = len(data) - _MOST_ITEMS
        return _cut(shown + (f"; and {more} more" if more > 0 else "")) or "nothing"
    return describe(tool, data)


def _unquoted(text: str) -> str:
    """JSON-looking text that does not parse, read as words: ``{"a": 1, "b": [2]`` "a 1, b 2"."""
    text = re.sub(r'"([^"\\]*)"\s*:\s*', r"\1 ", text)
    return " ".join(re.sub(r'[{}\[\]"]', " ", text).split()).replace(" ,", ",")


def plain(value: Any, *, nested: bool = False) -> str:
    """Any value as words: a mapping's fields as "name value", comma-separated (in parentheses when it
    sits inside another), a list's items by semicolons (the first few, then how many more), yes and no
    for booleans; never brackets or braces."""
    if isinstance(value, dict):
        fields = [
            f"{_words(str(name))} {plain(item, nested=True)}"
            for name, item in value.items()
            if item not in (None, "", [], {})
        ]
        text = ", ".join(fields)
        return f"({text})" if nested and len(fields) > 1 else text
    if isinstance(value, list | tuple):
        shown = [plain(item, nested=True) for item in value[:_MOST_ITEMS]]
        more = len(value) - _MOST_ITEMS
        text = "; ".join(shown) + (f"; and {more} more" if more > 0 else "")
        return f"({text})" if nested and len(value) > 1 else text
    if isinstance(value, bool):
        return "yes" if value else "no"
    if value is None:
        return "none"
    return " ".join(str(value).split())


def _words(name: str) -> str:
    """A field or code name as words: ``delivered_damaged`` "delivered damaged", ``isDst`` "is dst"."""
    return re.sub(r"(?<=[a-z0-9])(?=[A-Z])", " ", name).replace("_", " ").lower()


def _cut(text: str) -> str:
    return text if len(text) <= _MOST else text[: _MOST - 1].rstrip() + "…"
