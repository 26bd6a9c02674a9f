"""Nothing secret, nothing personal in what leaves for traces.

``redact`` replaces credentials (by key, or anything shaped like a JWT) wherever they are, and
personal data (emails anywhere; the values of ``email``, ``name`` and ``identifier`` fields).
Recording full payloads, for local debugging only, is an explicit switch (``full_payloads``);
even then, credentials stay out.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from typing import Any

__all__ = ["for_trace", "redact", "set_full_payloads"]

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


def _clean(value: Any, key: str, personal: bool) -> Any:
    if key and _SECRET_KEYS.search(key):
        return "[redacted credential]"
    if isinstance(value, str):
        if personal and key in _PERSONAL_KEYS:
            return "[redacted]"
        value = _JWT.sub("[redacted credential]", value)
        return _EMAIL.sub("[redacted email]", value) if personal else value
    if isinstance(value, Mapping):
        return {name: _clean(item, str(name), personal) for name, item in value.items()}
    if isinstance(value, list | tuple):
        return [_clean(item, key, personal) for item in value]
    return value


def redact(value: Any) -> Any:
    """Credentials and personal data out of ``value``, always."""
    return _clean(value, "", personal=True)


def for_trace(value: Any) -> Any:
    """``value`` as it may be recorded on a span: redacted, unless full payloads are switched on."""
    return _clean(value, "", personal=not _full_payloads)
