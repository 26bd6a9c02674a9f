"""Principals, scopes and signed credentials.

A credential is a short-lived JWT (HS256) naming a subject and its scopes, signed with the key every
source and the coordinator share (``SourceSettings.key``). It travels **per call**, in the request's
``_meta`` under ``CREDENTIAL_META_KEY``, over stdio and HTTP alike: a subagent that is granted an
elevated credential sends it on its next call, and no server restarts or session reopens. A call
without a credential runs as the anonymous principal, which holds no scope.

Scopes the sources enforce:

| scope                  | needed for                                      |
|------------------------|-------------------------------------------------|
| `customers:restricted` | restricted (VIP) customer records               |
| `billing:read`         | invoices and refund eligibility                 |
| `billing:refund`       | issuing a refund                                |

A credential never appears in a log line, an error description or a result: errors name the scope
that is missing and the subject, never the token.
"""

from __future__ import annotations

import time
from collections.abc import Iterable
from contextvars import ContextVar
from dataclasses import dataclass
from typing import Any

import jwt
from mcp.server.context import CallNext, HandlerResult, ServerRequestContext

from sources.contract import ErrorCategory, ToolError, ToolFailure, to_call_tool_result

__all__ = [
    "ANONYMOUS",
    "CREDENTIAL_META_KEY",
    "CredentialCheck",
    "CredentialRejected",
    "Principal",
    "current_principal",
    "issue_credential",
    "require_scope",
    "verify_credential",
]

CREDENTIAL_META_KEY = "research-coordinator/credential"
_AUDIENCE = "research-sources"
_ALGORITHM = "HS256"


@dataclass(frozen=True)
class Principal:
    subject: str
    scopes: frozenset[str]


ANONYMOUS = Principal(subject="anonymous", scopes=frozenset())

_current: ContextVar[Principal] = ContextVar("principal", default=ANONYMOUS)


class CredentialRejected(Exception):
    """The credential could not be verified; ``reason`` is safe to show (it never quotes the token)."""

    def __init__(self, reason: str) -> None:
        super().__init__(reason)
        self.reason = reason


def issue_credential(
    key: str, subject: str, scopes: Iterable[str], *, ttl_seconds: int = 900, now: float | None = None
) -> str:
    issued = int(time.time() if now is None else now)
    claims = {
        "sub": subject,
        "scope": " ".join(sorted(set(scopes))),
        "aud": _AUDIENCE,
        "iat": issued,
        "exp": issued + ttl_seconds,
    }
    return jwt.encode(claims, key, algorithm=_ALGORITHM)


def verify_credential(key: str, token: Any) -> Principal:
    if not isinstance(token, str) or not token:
        raise CredentialRejected("the credential is not a token string")
    try:
        claims = jwt.decode(
            token, key, algorithms=[_ALGORITHM], audience=_AUDIENCE, options={"require": ["exp", "sub"]}
        )
    except jwt.ExpiredSignatureError:
        raise CredentialRejected("the credential has expired") from None
    except jwt.InvalidSignatureError:
        raise CredentialRejected("the credential's signature is not valid") from None
    except jwt.InvalidTokenError:
        raise CredentialRejected("the credential is malformed or not meant for these sources") from None
    scopes = claims.get("scope", "")
    if not isinstance(scopes, str):
        raise CredentialRejected("the credential's scope claim is not a string")
    return Principal(subject=str(claims["sub"]), scopes=frozenset(scopes.split()))


def current_principal() -> Principal:
    """The principal of the call being served."""
    return _current.get()


def require_scope(scope: str, needed_for: str) -> None:
    """End the call with a permission error unless the caller holds ``scope``."""
    principal = current_principal()
    if scope in principal.scopes:
        return
    raise ToolFailure(
        ToolError.of(
            ErrorCategory.PERMISSION,
            f"Access to {needed_for} needs scope '{scope}', which principal '{principal.subject}' does not hold. "
            f"Request elevation to '{scope}' or escalate to a senior agent.",
            required_scope=scope,
        )
    )


class CredentialCheck:
    """Server middleware: verifies the call's credential and makes its principal current for the call."""

    def __init__(self, key: str) -> None:
        self._key = key

    async def __call__(self, ctx: ServerRequestContext[Any, Any], call_next: CallNext) -> HandlerResult:
        if ctx.method != "tools/call":
            return await call_next(ctx)
        token = (ctx.meta or {}).get(CREDENTIAL_META_KEY)
        if token is None:
            principal = ANONYMOUS
        else:
            try:
                principal = verify_credential(self._key, token)
            except CredentialRejected as rejected:
                return to_call_tool_result(
                    ToolError.of(
                        ErrorCategory.PERMISSION,
                        f"The credential presented was rejected: {rejected.reason}. "
                        "Obtain a new credential and call again.",
                    )
                )
        reset = _current.set(principal)
        try:
            return await call_next(ctx)
        finally:
            _current.reset(reset)
