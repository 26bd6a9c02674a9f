"""The coordinator's credential as ``Authorization: Bearer``, on every HTTP request to a demo source.

A source on loopback also serves anonymous requests; a source on any other address (a fleet a cluster
reaches) answers 401 to a request without a valid bearer token (``sources.security.http_auth``). So a
coordinator that dials a source over HTTP sends one always: a credential for that source alone,
holding no scope (the scopes a call needs still travel in its ``_meta``, which wins), signed with the
coordinator's key. An ``httpx2.Auth`` (the SDK's HTTP client's own hook for this) rather than a fixed
header: a credential lives at most five minutes, and a worker's session lives for a whole batch.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Generator

import httpx2
from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey

from sources.security.auth import MAX_CREDENTIAL_LIFETIME_S, issue_credential

__all__ = ["BearerCredential"]

SUBJECT = "research-agent"  # the broker's subject: a call's principal is the same either way


class BearerCredential(httpx2.Auth):
    """A credential for ``source``, signed once and signed again when half its life is gone (so one
    verified by the source is known to it, and a request never carries one about to expire)."""

    def __init__(
        self, key: Ed25519PrivateKey, source: str, *, clock: Callable[[], float] = time.time
    ) -> None:
        self._key = key
        self._source = source
        self._clock = clock
        self._token = ""
        self._renew_at = 0.0

    def token(self) -> str:
        now = self._clock()
        if now >= self._renew_at:
            self._token = issue_credential(self._key, SUBJECT, (), source=self._source, now=now)
            self._renew_at = now + MAX_CREDENTIAL_LIFETIME_S / 2
        return self._token

    def auth_flow(self, request: httpx2.Request) -> Generator[httpx2.Request, httpx2.Response, None]:
        request.headers["Authorization"] = f"Bearer {self.token()}"
        yield request
