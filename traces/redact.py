"""Nothing secret, nothing personal in what leaves for traces.

``redact`` replaces credentials (by key, or anything shaped like a JWT) wherever they are, and
personal data (emails anywhere; the values of ``email``, ``name`` and ``identifier`` fields).
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

__all__ = ["MAX_DEPTH", "for_trace", "redact", "set_full_payloads"]

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
