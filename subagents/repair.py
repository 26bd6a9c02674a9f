"""Validation repairs: rebuild arguments a source refused into the form it expects.

Each rule normalizes one kind of value and leaves everything else alone: trimming and lower-casing
an email, padding a customer or order id, upper-casing a SKU or an article id, turning a common date
spelling into ISO form, and swapping date bounds given the wrong way round. A repair never invents
a value and never touches money: an amount with too many decimals is escalated, not rounded.

``repair`` returns the new arguments, or ``None`` when no rule changes anything, which is the
subagent's signal to escalate instead of calling again with the same arguments.
"""

from __future__ import annotations

import re
from collections.abc import Callable
from datetime import date, datetime
from typing import Any

__all__ = ["repair"]

_CUSTOMER_ID = re.compile(r"^\s*cust[-_ ]?0*(\d{1,5})\s*$", re.I)
_ORDER_ID = re.compile(r"^\s*ord[-_ ]?0*(\d{1,5})\s*$", re.I)
_SKU = re.compile(r"^\s*sku[-_ ]?(\d{4})[-_ ]?([a-z]{3})\s*$", re.I)
_ARTICLE = re.compile(r"^\s*kb[-_ ]?([a-z0-9]+(?:[-_][a-z0-9]+)*)\s*$", re.I)
_EMAIL = re.compile(r"^\s*[^@\s]+@[^@\s]+\.[^@\s]+\s*$")
_DATE_SPELLINGS = (
    "%Y-%m-%d",
    "%Y/%m/%d",
    "%d/%m/%Y",
    "%d-%m-%Y",
    "%d.%m.%Y",
    "%Y%m%d",
    "%d %B %Y",
    "%d %b %Y",
)


def _iso_date(value: str) -> str | None:
    text = value.strip()
    for spelling in _DATE_SPELLINGS:
        try:
            return datetime.strptime(text, spelling).date().isoformat()
        except ValueError:
            continue
    return None


def _pattern_rule(pattern: re.Pattern[str], build: Callable[[re.Match[str]], str]) -> Callable[[str], str]:
    def rule(value: str) -> str:
        match = pattern.match(value)
        return build(match) if match else value.strip()

    return rule


_customer_id = _pattern_rule(_CUSTOMER_ID, lambda m: f"CUST-{int(m[1]):05d}")
_order_id = _pattern_rule(_ORDER_ID, lambda m: f"ORD-{int(m[1]):05d}")
_sku = _pattern_rule(_SKU, lambda m: f"SKU-{m[1]}-{m[2].upper()}")
_article_id = _pattern_rule(_ARTICLE, lambda m: f"KB-{m[1].upper().replace('_', '-')}")


def _identifier(value: str) -> str:
    return value.strip().lower() if _EMAIL.match(value) else _customer_id(value)


def _date_value(value: str) -> str:
    return _iso_date(value) or value.strip()


# Which rule reads which argument; any other string is only trimmed. Keyed by name so that search
# text such as "kb refunds" is never mistaken for an article id.
_BY_ARGUMENT: dict[str, Callable[[str], str]] = {
    "identifier": _identifier,
    "customer_id": _customer_id,
    "order_id": _order_id,
    "sku": _sku,
    "article_id": _article_id,
    "placed_after": _date_value,
    "placed_before": _date_value,
}


def _normalize_strings(arguments: dict[str, Any]) -> dict[str, Any]:
    return {
        name: _BY_ARGUMENT.get(name, str.strip)(value) if isinstance(value, str) else value
        for name, value in arguments.items()
    }


def _swap_date_bounds(arguments: dict[str, Any]) -> dict[str, Any]:
    after, before = arguments.get("placed_after"), arguments.get("placed_before")
    if isinstance(after, str) and isinstance(before, str):
        try:
            if date.fromisoformat(after) > date.fromisoformat(before):
                return {**arguments, "placed_after": before, "placed_before": after}
        except ValueError:
            pass
    return arguments


_RULES: list[Callable[[dict[str, Any]], dict[str, Any]]] = [_normalize_strings, _swap_date_bounds]


def repair(arguments: dict[str, Any]) -> dict[str, Any] | None:
    """The arguments in the form the sources expect, or None when no rule applies."""
    repaired = arguments
    for rule in _RULES:
        repaired = rule(repaired)
    return repaired if repaired != arguments else None
