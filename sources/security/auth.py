"""Principals, scopes and signed credentials.

A credential is a short-lived JWT naming a subject, its scopes and the one source it is for. The
coordinator signs it with its Ed25519 private key (``SourceSettings.signing_key``, made once in the
data folder, see ``sources.security.keys``); a source holds only the public key (``SourceSettings.verification_key``)
and so can verify credentials but never mint one, not even for itself.

A credential travels **per call**, in the request's ``_meta`` under ``CREDENTIAL_META_KEY``, over
stdio and HTTP alike: a subagent that is granted an elevated credential sends it on its next call,
and no server restarts or session reopens. A call without a credential runs as the anonymous
principal, which holds no scope.

Over HTTP the same token may instead come as ``Authorization: Bearer <token>``, as any MCP host
sends it (``sources.security.http_auth``): the HTTP layer refuses an invalid one with 401 before the call is
read, and a call that carried a valid one is checked here exactly as if the token were in its
``_meta``. When a call has both, **the ``_meta`` credential wins**: it is the one verified and the
one whose principal the call runs as (the bearer token, already verified, then only names who
opened the session). A ``_meta`` credential that fails is refused even beside a valid bearer token:
a caller never silently gets a principal other than the one it asked for.

What verification guarantees, whoever signed the token:

- the algorithm is ``EdDSA`` and nothing else: ``alg: none`` and a token HMAC-signed with the public
  key's bytes as the secret (algorithm confusion) are refused;
- the audience is this source (``research-source:<name>``, exactly one): a credential issued for
  billing is refused by customers;
- it carries ``iat`` and ``exp``, is not expired nor issued in the future, and lives at most
  ``MAX_CREDENTIAL_LIFETIME_S`` (``exp - iat``): a correctly signed hundred-year token is refused.

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

import functools
import logging
import time
from collections.abc import Callable, Iterable
from contextvars import ContextVar
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey, Ed25519PublicKey
from mcp.server.auth.middleware.bearer_auth import AuthenticatedUser
from mcp.server.context import CallNext, HandlerResult, ServerRequestContext

from sources.contract import ErrorCategory, ToolError, ToolFailure
from sources.deferred import deferred
from sources.tool_failure import to_call_tool_result

# PyJWT brings cryptography's X.509 along (25 to 30 ms to import): loaded when a credential is first
# issued or verified, not by a coordinator whose run asks for none. The fork server preloads it for
# its sources (``sources.processes.forked``).
if TYPE_CHECKING:
    import jwt
else:
    jwt = deferred("jwt")

__all__ = [
    "ANONYMOUS",
    "CREDENTIAL_META_KEY",
    "MAX_CREDENTIAL_LIFETIME_S",
    "SCOPES_BY_SOURCE",
    "CredentialCheck",
    "CredentialRejected",
    "Principal",
    "audience_of",
    "current_principal",
    "issue_credential",
    "require_scope",
    "verify_credential",
]

CREDENTIAL_META_KEY = "research-coordinator/credential"
# The longest a credential may live, from issue to expiry; enforced when verifying, so a leaked or
# over-long token is worth minutes at most. A subagent's call, retries included, fits well within.
MAX_CREDENTIAL_LIFETIME_S = 300
_ALGORITHM = "EdDSA"
_EXPIRED = "the credential has expired"
_KNOWN_CREDENTIALS = 256  # credentials a source remembers as verified, the most recently used
# The scopes each source enforces (the table above), as its protected-resource metadata lists them.
SCOPES_BY_SOURCE: dict[str, tuple[str, ...]] = {
    "customers": ("customers:restricted",),
    "billing": ("billing:read", "billing:refund"),
}

_log = logging.getLogger(__name__)


def audience_of(source: str) -> str:
    """The audience of credentials for ``source``: each source accepts its own and no other's."""
    return f"research-source:{source}"


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
    key: Ed25519PrivateKey,
    subject: str,
    scopes: Iterable[str],
    *,
    source: str,
    ttl_seconds: int = MAX_CREDENTIAL_LIFETIME_S,
    now: float | None = None,
) -> str:
    """A credential for calls to ``source`` only, signed with the coordinator's private key."""
    if not 0 < ttl_seconds <= MAX_CREDENTIAL_LIFETIME_S:
        raise ValueError(
            f"a credential lives between 1 and {MAX_CREDENTIAL_LIFETIME_S} seconds; got {ttl_seconds}"
        )
    issued = int(time.time() if now is None else now)
    claims = {
        "sub": subject,
        "scope": " ".join(sorted(set(scopes))),
        "aud": audience_of(source),
        "iat": issued,
        "exp": issued + ttl_seconds,
    }
    return jwt.encode(claims, key, algorithm=_ALGORITHM)


def verify_credential(key: Ed25519PublicKey, token: Any, *, source: str) -> Principal:
    """The principal ``token`` names, if it is a credential for ``source`` signed by ``key``'s pair."""
    return _verified(key, token, source=source)[0]


def _verified(key: Ed25519PublicKey, token: Any, *, source: str) -> tuple[Principal, int]:
    """The principal ``token`` names and when it expires (``exp``), or ``CredentialRejected``."""
    if not isinstance(token, str) or not token:
        raise CredentialRejected("the credential is not a token string")
    try:
        claims = jwt.decode(
            token,
            key,
            algorithms=[_ALGORITHM],  # one algorithm: never "none", never an HMAC keyed with the public key
            audience=audience_of(source),
            options={"require": ["exp", "iat", "sub", "aud"], "strict_aud": True},
        )
    except jwt.ExpiredSignatureError:
        raise CredentialRejected(_EXPIRED) from None
    except jwt.ImmatureSignatureError:
        raise CredentialRejected("the credential was issued in the future") from None
    except jwt.InvalidAlgorithmError:
        raise CredentialRejected(
            f"the credential is not signed with {_ALGORITHM}, the only algorithm accepted"
        ) from None
    except jwt.InvalidSignatureError:
        raise CredentialRejected("the credential's signature is not valid") from None
    except jwt.InvalidAudienceError:
        raise CredentialRejected(f"the credential is not meant for {source}") from None
    except jwt.MissingRequiredClaimError as missing:
        raise CredentialRejected(f"the credential has no '{missing.claim}' claim") from None
    except jwt.InvalidTokenError:
        raise CredentialRejected("the credential is malformed") from None
    lifetime = int(claims["exp"]) - int(claims["iat"])  # both checked to be integers by decode
    if lifetime > MAX_CREDENTIAL_LIFETIME_S:
        raise CredentialRejected(
            f"the credential lives {lifetime} seconds, more than the {MAX_CREDENTIAL_LIFETIME_S} allowed"
        )
    scopes = claims.get("scope", "")
    if not isinstance(scopes, str):
        raise CredentialRejected("the credential's scope claim is not a string")
    return Principal(subject=str(claims["sub"]), scopes=frozenset(scopes.split())), int(claims["exp"])


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
    """Server middleware: verifies the call's credential and makes its principal current for the call.

    ``public_key`` loads the source's verification key; it is asked at start, so a bad configuration
    fails then, and, while it answers None (no key pair made yet), again at each credentialed call.
    """

    def __init__(
        self,
        source: str,
        public_key: Callable[[], Ed25519PublicKey | None],
        *,
        clock: Callable[[], float] = time.time,
    ) -> None:
        self.source = source
        self._clock = clock
        self._load = public_key
        self._key = public_key()
        # A credential is verified once (its Ed25519 signature takes 0.14 ms, as long as a whole call
        # of some tools) and then known by its exact text until it expires: a subagent sends the same
        # one on every call of its task. Only what verified is kept; a refusal is checked afresh.
        self._known = functools.lru_cache(maxsize=_KNOWN_CREDENTIALS)(self._verify_signature)

    def verify(self, token: Any) -> Principal:
        """The principal of a credential for this source, however it travelled (``_meta`` or a bearer
        token): one verification, one set of rules."""
        if not isinstance(token, str):
            return verify_credential(self._public_key(), token, source=self.source)  # refused, saying why
        principal, expires = self._known(token)
        if self._clock() >= expires:  # as the first verification decides: valid while before ``exp``
            raise CredentialRejected(_EXPIRED)
        return principal

    def _verify_signature(self, token: str) -> tuple[Principal, int]:
        return _verified(self._public_key(), token, source=self.source)

    def _public_key(self) -> Ed25519PublicKey:
        if self._key is None:
            try:
                self._key = self._load()
            except ValueError as exc:  # say why in the log; the caller learns only that it failed
                _log.warning("%s cannot load its public key: %s", self.source, exc)
                raise CredentialRejected(f"{self.source} cannot load its public key") from None
        if self._key is None:
            raise CredentialRejected(f"{self.source} has no public key yet to verify credentials with")
        return self._key

    async def __call__(self, ctx: ServerRequestContext[Any, Any], call_next: CallNext) -> HandlerResult:
        if ctx.method != "tools/call":
            return await call_next(ctx)
        token = (ctx.meta or {}).get(CREDENTIAL_META_KEY)  # the per-call credential wins (see above)
        if token is None:
            token = _bearer_token(ctx)
        if token is None:
            principal = ANONYMOUS
        else:
            try:
                principal = self.verify(token)
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


def _bearer_token(ctx: ServerRequestContext[Any, Any]) -> str | None:
    """The bearer token the HTTP request carrying this call was authenticated with, if any.

    The SDK's ``BearerAuthBackend`` (``sources.security.http_auth``) puts the user it authenticated in the
    HTTP request's scope; the SDK hands a call its HTTP request (``ctx.request``), none over stdio.
    The token is verified again here, with the ``_meta`` credential's rules, so that whatever the
    HTTP layer did, a call runs only as a principal this check itself accepted.
    """
    user = getattr(ctx.request, "scope", {}).get("user")
    return user.access_token.token if isinstance(user, AuthenticatedUser) else None
