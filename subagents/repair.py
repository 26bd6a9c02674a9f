"""Validation repairs: rebuild arguments a source refused into the form it expects.

The sources say which argument takes which form (``sources.formats.ARGUMENT_FORMS``, ``DATE_RANGES``);
the rules here apply them: an identifier typed in one of its tolerant spellings is rebuilt in its
canonical form (``sources.identifiers``), a common date spelling is turned into ISO form, date
bounds given the wrong way round are swapped, and any other string is trimmed. A repair never
invents a value and never touches money: an amount with too many decimals is escalated, not rounded.

``repair`` returns the new arguments, or ``None`` when no rule changes anything, which is the
subagent's signal to escalate instead of calling again with the same arguments.
"""

from __future__ import annotations

import re
from collections.abc import Callable
from datetime import date, datetime
from typing import Any

from sources.formats import ARGUMENT_FORMS, DATE_RANGES, ISO_DATE, Format
from sources.identifiers import Spelled

__all__ = ["repair"]

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


def _rule(forms: Format | tuple[Spelled, ...]) -> Callable[[str], str]:
    """Rebuild a value typed in a tolerant spelling of the first of ``forms`` it matches; else only
    trim it. A format is read as the one a repair knows: an ISO date."""
    if isinstance(forms, Format):
        return _date_value if forms == ISO_DATE else str.strip
    patterns = [(re.compile(rf"^\s*{form.spelled}\s*$", re.I), form) for form in forms]

    def rule(value: str) -> str:
        for pattern, form in patterns:
            if match := pattern.match(value):
                return form.from_match(match)
        return value.strip()

    return rule


_BY_ARGUMENT = {name: _rule(forms) for name, forms in ARGUMENT_FORMS.items()}


def _swap_date_bounds(arguments: dict[str, Any]) -> dict[str, Any]:
    for low, high in DATE_RANGES:
        after, before = arguments.get(low), arguments.get(high)
        if isinstance(after, str) and isinstance(before, str):
            try:
                if date.fromisoformat(after) > date.fromisoformat(before):
                    arguments = {**arguments, low: before, high: after}
            except ValueError:
                pass
    return arguments


def repair(arguments: dict[str, Any]) -> dict[str, Any] | None:
    """The arguments in the form the sources expect, or None when no rule applies."""
    normalized = {
        name: _BY_ARGUMENT.get(name, str.strip)(value) if isinstance(value, str) else value
        for name, value in arguments.items()
    }
    repaired = _swap_date_bounds(normalized)  # the bounds compared once normalized
    return repaired if repaired != arguments else None
