"""Nothing secret, nothing personal in what leaves for traces.

``redact`` replaces credentials (by key, or anything shaped like a JWT) wherever they are, and
personal data (emails anywhere; the values of ``email``, ``name`` and ``identifier`` fields).
Recording full payloads, for local debugging only, is an explicit switch (``full_payloads``);
even then, credentials stay out.

``pseudonymous`` is for a record that must still work when read back (a run's recording, which a
replay runs again): each personal value ``redact`` would find is replaced, wherever it appears (an
argument, an answer, a sentence), by one stand-in of the same shape. Equal values (ignoring case and
surrounding blanks) get letters alike, each keeps its case, digits and punctuation, so what the code
compares, normalises or repairs in it behaves as it did; the stand-ins come from a key drawn for
the record and thrown away, so nothing maps them back.
"""

from __future__ import annotations

import functools
import hashlib
import hmac
import json
import re
import secrets
import string
from collections.abc import Callable, Iterable, Mapping
from typing import Any

__all__ = ["for_trace", "pseudonymous", "redact", "set_full_payloads"]

_JWT = re.compile(r"eyJ[A-Za-z0-9_-]+\.[A-Za-z0-9_-]+\.[A-Za-z0-9_-]+")
# Deliberately not the customers tool's email format (``sources.identifiers.EMAIL``), and not only
# because traces imports no other package: a redaction detector must catch any email-shaped text,
# including addresses that format refuses (upper case, "jane@mail..example.com"). Narrowed to the
# tool's format, it would leak the personal data in every query and argument the tool would reject.
_EMAIL = re.compile(r"[A-Za-z0-9._%+-]+@[A-Za-z0-9.-]+\.[A-Za-z]{2,}")
_SECRET_KEYS = re.compile(r"credential|token|secret|password|authorization|api[_-]?key|signing", re.I)
_PERSONAL_KEYS = frozenset({"email", "name", "identifier"})

_full_payloads = False


def set_full_payloads(enabled: bool) -> None:
    """Record payloads unredacted (credentials excepted): for local debugging only."""
    global _full_payloads
    _full_payloads = enabled


_CREDENTIAL = "[redacted credential]"


def _walk(value: Any, key: str, text: Callable[[str, str], str]) -> Any:
    """``value`` with what a secret key holds taken out, and each string (under ``key``) as ``text``
    makes it: the one walk of a span's redaction and a recording's stand-ins."""
    if _secret(key):
        return _CREDENTIAL
    if isinstance(value, str):
        return text(value, key)
    if isinstance(value, Mapping):
        return {name: _walk(item, str(name), text) for name, item in value.items()}
    if isinstance(value, list | tuple):
        return [_walk(item, key, text) for item in value]
    return value


@functools.lru_cache(maxsize=1024)  # bounded: a payload's keys may be anything (ids, say)
def _secret(key: str) -> bool:
    return bool(key) and _SECRET_KEYS.search(key) is not None


def _no_credential(text: str, key: str = "") -> str:
    return _JWT.sub(_CREDENTIAL, text) if "eyJ" in text else text


def _anonymous(text: str, key: str) -> str:
    if key in _PERSONAL_KEYS:
        return "[redacted]"
    text = _no_credential(text)
    return _EMAIL.sub("[redacted email]", text) if "@" in text else text


def redact(value: Any) -> Any:
    """Credentials and personal data out of ``value``, always."""
    return _walk(value, "", _anonymous)


def for_trace(value: Any) -> Any:
    """``value`` as it may be recorded on a span: redacted, unless full payloads are switched on."""
    return _walk(value, "", _no_credential if _full_payloads else _anonymous)


def pseudonymous(value: Any, *, keep: Iterable[str] = ()) -> Any:
    """``value`` with credentials out and each personal value replaced by its stand-in everywhere
    (unless full payloads are switched on: then credentials alone are taken out).

    ``keep``: words the record is built of (its sources', tools' and tasks' names), never personal
    even where a personal key holds one; what is under an MCP ``_meta`` (a server's name) is not either.
    """
    personal: set[str] = set()
    if not _full_payloads:
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
    except ValueError:
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


def _collect(value: Any, key: str, into: set[str]) -> None:
    if isinstance(value, str):
        if (held := _json_in(value)) is not None:  # a text block's JSON: its personal fields count too
            _collect(held, key, into)
        if key in _PERSONAL_KEYS and value.strip():
            into.add(value.strip())
        if "@" in value:
            into.update(_EMAIL.findall(value))
    elif isinstance(value, Mapping):
        for name, item in value.items():
            if name != "_meta":
                _collect(item, str(name), into)
    elif isinstance(value, list | tuple):
        for item in value:
            _collect(item, key, into)


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
