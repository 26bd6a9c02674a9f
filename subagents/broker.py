"""The credential broker: grants elevated scopes by policy, denies by default.

A subagent that meets a permission error asks the broker for the one scope the source named
(``requiredScope``), for the task's purpose. The broker grants only what a configured ``Grant``
allows, and issues a short-lived credential holding the base scopes plus that one.

The broker holds the coordinator's private key (``SourceSettings.signing_key``); each credential it
issues names the one source the call goes to as its audience, so a credential granted for billing is
worth nothing at customers.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass, field

from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey

from sources.security.auth import CREDENTIAL_META_KEY, MAX_CREDENTIAL_LIFETIME_S, issue_credential

__all__ = ["CredentialBroker", "Elevation", "Grant"]


@dataclass(frozen=True)
class Grant:
    """``scope`` may be granted for tasks whose purpose is ``purpose`` (or any purpose when None), for
    calls to ``source`` (or to any source when None: a registered source's scopes are its own)."""

    scope: str
    purpose: str | None = None
    source: str | None = None


@dataclass(frozen=True)
class Elevation:
    granted: bool
    reason: str
    credential: str | None = None

    def meta(self) -> dict[str, str] | None:
        return {CREDENTIAL_META_KEY: self.credential} if self.credential else None


@dataclass
class CredentialBroker:
    key: Ed25519PrivateKey
    subject: str = "research-agent"
    base_scopes: frozenset[str] = field(default_factory=frozenset)
    grants: tuple[Grant, ...] = ()
    ttl_seconds: int = MAX_CREDENTIAL_LIFETIME_S

    def base_meta(self, source: str) -> dict[str, str] | None:
        """The ``_meta`` of an ordinary call to ``source``: the base credential, or none without base scopes."""
        if not self.base_scopes:
            return None
        return {CREDENTIAL_META_KEY: self._credential(self.base_scopes, source)}

    def elevate(self, scope: str | None, purpose: str, held: Iterable[str] = (), *, source: str) -> Elevation:
        """A credential for calls to ``source`` holding ``scope`` too, if a grant allows it for ``purpose``."""
        if scope is None:
            return Elevation(False, "the source did not say which scope would allow the call")
        if not any(
            grant.scope == scope and grant.purpose in (None, purpose) and grant.source in (None, source)
            for grant in self.grants
        ):
            return Elevation(
                False, f"no grant allows '{scope}' for {purpose or 'this purpose'} (deny by default)"
            )
        credential = self._credential({*self.base_scopes, *held, scope}, source)
        return Elevation(True, f"'{scope}' granted for {purpose}", credential)

    def _credential(self, scopes: Iterable[str], source: str) -> str:
        return issue_credential(self.key, self.subject, scopes, source=source, ttl_seconds=self.ttl_seconds)
