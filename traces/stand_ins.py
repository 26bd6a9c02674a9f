"""Stand-ins for the personal values of a record that must still work when read back.

A run's recording, which a replay runs again, cannot take ``traces.redact``'s blanks: a name blanked
in an argument no longer matches the answer that names it. ``pseudonymous`` replaces each personal
value ``redact`` would find (every kind ``traces.personal`` finds: emails, phone and card numbers,
addresses, names; and the values of personal fields, identifiers included), wherever it appears (an
argument, an answer, a sentence), by one stand-in of the same shape. Equal values (ignoring case and surrounding blanks) get letters alike,
each keeps its case, digits and punctuation, so what the code compares, normalises or repairs in it
behaves as it did; the stand-ins come from a key drawn for the record and thrown away, so nothing
maps them back. Credentials are taken out, as everywhere.
"""

from __future__ import annotations

import hashlib
import hmac
import json
import re
import secrets
import string
from collections.abc import Callable, Iterable, Mapping
from typing import Any

from traces import personal
from traces import redact as redaction  # its walk, its detectors, its switch: one notion of personal
from traces.redact import _PERSONAL_KEYS, _no_credential, _walk

__all__ = ["pseudonymous"]


def pseudonymous(value: Any, *, keep: Iterable[str] = ()) -> Any:
    """``value`` with credentials out and each personal value replaced by its stand-in everywhere
    (unless full payloads are switched on: then credentials alone are taken out).

    ``keep``: words the record is built of (its sources', tools' and tasks' names), never personal
    even where a personal key holds one; what is under an MCP ``_meta`` (a server's name) is not either.
    """
    personal: set[str] = set()
    if not redaction._full_payloads:
        _collect(value, "", personal)
    kept = {word.casefold() for word in keep}
    personal = {each for each in personal if each.casefold() not in kept}
    if not personal:
        return _walk(value, "", _in_json(_no_credential))
    # Longest first, so an address is replaced whole before a name inside it; never inside a word.
    alternatives = "|".join(re.escape(each) for each in sorted(personal, key=len, reverse=True))
    found = re.compile(rf"(?<![A-Za-z0-9])(?:{alternatives})(?![A-Za-z0-9])", re.IGNORECASE)
    key, drawn = secrets.token_bytes(32), {}

    def stand_in(match: re.Match[str]) -> str:
        text = match.group(0)
        if text not in drawn:
            drawn[text] = _stand_in(text, key)
        return drawn[text]

    return _walk(value, "", _in_json(lambda text, _: found.sub(stand_in, _no_credential(text))))


def _json_in(text: str) -> Any:
    """What ``text`` holds when it is a JSON object or array (an MCP answer's text block), else None."""
    if text[:1] not in ("{", "["):
        return None
    try:
        return json.loads(text)
    except (ValueError, RecursionError):  # json's decoder recurses per level: text nested too deep stays text
        return None


def _in_json(text: Callable[[str, str], str]) -> Callable[[str, str], str]:
    """``text``, applied to a JSON text block's values rather than to its characters: a secret key in
    it is taken out, and a value after an escape (``"Hello\\nJane"``) is found, as it is elsewhere."""

    def each(value: str, key: str) -> str:
        held = _json_in(value)
        if held is None:
            return text(value, key)
        return json.dumps(_walk(held, key, each), ensure_ascii=False)

    return each


def _collect(value: Any, key: str, into: set[str], depth: int = 0) -> None:
    if isinstance(value, str):
        if (held := _json_in(value)) is not None:  # a text block's JSON: its personal fields count too
            _collect(held, key, into, depth + 1)
        if key in _PERSONAL_KEYS and value.strip():  # an identifier too: a replay needs none as it was
            into.add(value.strip())
        into.update(value[found.start : found.end] for found in personal.found_in(value))
    elif depth >= redaction.MAX_DEPTH:  # deeper than the walk goes: it becomes a placeholder anyway
        return
    elif isinstance(value, Mapping):
        for name, item in value.items():
            if name != "_meta":
                _collect(item, str(name), into, depth + 1)
    elif isinstance(value, list | tuple):
        for item in value:
            _collect(item, key, into, depth + 1)


def _stand_in(text: str, key: bytes) -> str:
    """``text``'s stand-in: its letters and digits drawn from the key and the text (ignoring case and
    blanks), each in its place and case; everything else kept."""
    seed = hmac.new(key, text.strip().casefold().encode(), hashlib.sha256).digest()
    stream = hashlib.shake_256(seed).digest(max(len(text), 1))
    drawn = []
    for byte, char in zip(stream, text, strict=False):
        if char.isalpha():
            letter = string.ascii_lowercase[byte % 26]
            drawn.append(letter.upper() if char.isupper() else letter)
        elif char.isdigit():
            drawn.append(string.digits[byte % 10])
        else:
            drawn.append(char)
    return "".join(drawn)
