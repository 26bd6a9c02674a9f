"""Nothing secret, nothing personal in what leaves for traces.

``redact`` replaces credentials (by key, or anything shaped like a JWT) wherever they are, and
personal data: what ``traces.personal`` finds in any text (emails, phone and card numbers, postal
addresses, people's names), and the values of ``email`` and ``name`` fields whole. An ``identifier``
field keeps an ordinary record id (``CUST-00042``: a trace that names no record is no use) and is
blanked otherwise (an email, a name, or something malformed that might hold either).
Recording full payloads, for local debugging only, is an explicit switch (``full_payloads``);
even then, credentials stay out.
A record that must still work when read back (a run's recording) takes stand-ins instead of these
blanks: ``traces.stand_ins``, which walks values as this module does.
"""

from __future__ import annotations

import functools
import re
from collections.abc import Callable, Mapping
from typing import Any

from traces import personal

__all__ = ["MAX_DEPTH", "for_trace", "redact", "set_full_payloads"]

_JWT = re.compile(r"eyJ[A-Za-z0-9_-]+\.[A-Za-z0-9_-]+\.[A-Za-z0-9_-]+")
_SECRET_KEYS = re.compile(r"credential|token|secret|password|authorization|api[_-]?key|signing", re.I)
_PERSONAL_KEYS = frozenset({"email", "name", "identifier"})
# Letters, a dash, digits: how every record of the world (and most systems') is numbered.
_RECORD_ID = re.compile(r"[A-Z]{2,10}-\d{2,10}")

_full_payloads = False


def set_full_payloads(enabled: bool) -> None:
    """Record payloads unredacted (credentials excepted): for local debugging only."""
    global _full_payloads
    _full_payloads = enabled


_CREDENTIAL = "[redacted credential]"


# How deep a walk goes before what lies deeper becomes one placeholder. A span holds what a person
# reads; nothing legitimate nests this deep, and a bound keeps the walk (and the JSON encoding of what
# it returns) far from the interpreter's recursion limit, whatever a caller or a source sends.
MAX_DEPTH = 64
_TOO_DEEP = f"[nested deeper than {MAX_DEPTH} levels]"


def _walk(value: Any, key: str, text: Callable[[str, str], str], depth: int = 0) -> Any:
    """``value`` with what a secret key holds taken out, and each string (under ``key``) as ``text``
    makes it: the one walk of a span's redaction and a recording's stand-ins."""
    if _secret(key):
        return _CREDENTIAL
    if isinstance(value, str):
        return text(value, key)
    if depth >= MAX_DEPTH and isinstance(value, Mapping | list | tuple):
        return _TOO_DEEP
    if isinstance(value, Mapping):
        return {name: _walk(item, str(name), text, depth + 1) for name, item in value.items()}
    if isinstance(value, list | tuple):
        return [_walk(item, key, text, depth + 1) for item in value]
    return value


@functools.lru_cache(maxsize=1024)  # bounded: a payload's keys may be anything (ids, say)
def _secret(key: str) -> bool:
    return bool(key) and _SECRET_KEYS.search(key) is not None


def _no_credential(text: str, key: str = "") -> str:
    return _JWT.sub(_CREDENTIAL, text) if "eyJ" in text else text


def personal_value(text: str, key: str) -> bool:
    """Whether ``key`` makes ``text`` personal whole (an email or name field; an identifier that is
    not a record id)."""
    return key in _PERSONAL_KEYS and not (key == "identifier" and _RECORD_ID.fullmatch(text.strip()))


def _anonymous(text: str, key: str) -> str:
    if personal_value(text, key):
        return "[redacted]"
    return personal.redacted(_no_credential(text))


def redact(value: Any) -> Any:
    """Credentials and personal data out of ``value``, always."""
    return _walk(value, "", _anonymous)


def for_trace(value: Any) -> Any:
    """``value`` as it may be recorded on a span: redacted, unless full payloads are switched on."""
    return _walk(value, "", _no_credential if _full_payloads else _anonymous)
