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

from sources.identifiers import ARTICLE_ID, CUSTOMER_ID, EMAIL, ORDER_ID, SKU, Spelled

__all__ = ["repair"]

# The tolerant spellings of each identifier, and its canonical form, are the sources' own.
_EMAIL_LIKE = re.compile(rf"^\s*{EMAIL.like}\s*$")
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


def _date_value(value: str) -> str:
    """A date in one of the common spellings, in ISO form; anything else only trimmed."""
    text = value.strip()
    for spelling in _DATE_SPELLINGS:
        try:
            return datetime.strptime(text, spelling).date().isoformat()
        except ValueError:
            continue
    return text


def _spelling_rule(identifier: Spelled) -> Callable[[str], str]:
    """Rebuild a value typed in one of ``identifier``'s tolerant spellings; else only trim it."""
    pattern = re.compile(rf"^\s*{identifier.spelled}\s*$", re.I)

    def rule(value: str) -> str:
        match = pattern.match(value)
        return identifier.from_match(match) if match else value.strip()

    return rule


_customer_id = _spelling_rule(CUSTOMER_ID)  # an identifier that is no email is read as one


def _identifier(value: str) -> str:
    return EMAIL.canonical(value) if _EMAIL_LIKE.match(value) else _customer_id(value)


# Which rule reads which argument; any other string is only trimmed. Keyed by name so that search
# text such as "kb refunds" is never mistaken for an article id.
_BY_ARGUMENT: dict[str, Callable[[str], str]] = {
    "identifier": _identifier,
    "customer_id": _customer_id,
    "order_id": _spelling_rule(ORDER_ID),
    "sku": _spelling_rule(SKU),
    "article_id": _spelling_rule(ARTICLE_ID),
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


def repair(arguments: dict[str, Any]) -> dict[str, Any] | None:
    """The arguments in the form the sources expect, or None when no rule applies."""
    repaired = _swap_date_bounds(_normalize_strings(arguments))  # the bounds compared once normalized
    return repaired if repaired != arguments else None
