"""Standard MCP authorization on a source's HTTP endpoint: bearer tokens, 401s, protected-resource metadata.

Any MCP host can call a source with the coordinator's credential (``sources.security.auth``: an Ed25519-signed
JWT for one source, at most five minutes long) sent as ``Authorization: Bearer <token>``:

* a request to ``/mcp`` that carries an ``Authorization`` header must carry a valid bearer token for
  this source (signature, audience ``research-source:<name>``, lifetime: ``verify_credential``), or
  it is answered ``401`` with ``WWW-Authenticate: Bearer error="invalid_token", ...,
  resource_metadata="<this source's metadata URL>"`` (RFC 6750 §3, MCP authorization spec), the
  SDK's answer (its description is "Authentication required"; why the token failed goes to the
  source's log, never the token itself). A 401 never opens a session. Scopes are not checked here: a token with too few is accepted and the tool answers its permission error,
  as for a ``_meta`` credential;
* on loopback, a request without the header is anonymous, as it always was: the tools that need a
  scope answer their structured permission error. The MCP authorization spec makes authorization
  optional, and the sources' records that need no scope stay open to a local client that has no
  token. On any other address (a fleet a cluster reaches, ``sources.security.listen``) there is no
  anonymous path: a request without a valid bearer token is answered 401, whatever it asks;
* the OAuth 2.0 Protected Resource Metadata (RFC 9728) is served at
  ``/.well-known/oauth-protected-resource/mcp`` (the path-suffixed form, which hosts try first) and
  at ``/.well-known/oauth-protected-resource``: the resource (``http://127.0.0.1:<port>/mcp``), the
  scopes the source enforces, ``bearer_methods_supported: ["header"]``. It names **no**
  ``authorization_servers``: no OAuth authorization server issues these tokens, the coordinator
  signs them (RFC 9728 makes the field optional); a host is given its token, it cannot fetch one.
  Like ``/health``, it answers only a loopback Host and Origin, or the address the source listens on
  (the SDK's version adds CORS for any origin; a page elsewhere could not call the endpoint anyway).

Sessions: anonymous sessions and sessions opened with a bearer token are held by two of the SDK's
session managers, each bounded by ``RESEARCH_HTTP_MAX_SESSIONS``: any number of anonymous sessions
opened and abandoned never takes the room of a client with a valid token. A session belongs to the
credential that opened it (the SDK's rule): one opened anonymously is not found with a token, one
opened with a token is not found without one, or with another subject's (a fresh token for the same
subject keeps it). Clients of the sessionless 2026 protocol (the mcp SDK's own Python client) hold
no session and are not counted.

From the SDK (``mcp.server.auth``): ``TokenVerifier``/``AccessToken`` (the verifier here wraps
``CredentialCheck.verify``), ``BearerAuthBackend`` under Starlette's ``AuthenticationMiddleware``,
``AuthContextMiddleware``, ``RequireAuthMiddleware`` (the 401 and its ``WWW-Authenticate``) and
``build_resource_metadata_url``. Written here, because the SDK does not offer it:

* the choice between the anonymous and the bearer path: given a token verifier, the SDK's
  ``streamable_http_app`` puts ``RequireAuthMiddleware`` before every request to the endpoint, so a
  request without a token would be refused with 401, and anonymous callers would be locked out;
* the metadata document: the SDK's ``ProtectedResourceMetadata`` (and so its
  ``create_protected_resource_routes``) requires at least one authorization server, which the
  sources do not have; and ``AuthSettings`` requires an ``issuer_url`` for the same reason;
* the second session pool: the SDK's session limit is one number for every session.
"""

from __future__ import annotations

import contextlib
import logging
from collections.abc import AsyncIterator
from typing import Any

from mcp.server import MCPServer
from mcp.server.auth.middleware.auth_context import AuthContextMiddleware
from mcp.server.auth.middleware.bearer_auth import BearerAuthBackend, RequireAuthMiddleware
from mcp.server.auth.provider import AccessToken
from mcp.server.auth.routes import build_resource_metadata_url
from pydantic import AnyHttpUrl
from starlette.applications import Starlette
from starlette.middleware.authentication import AuthenticationMiddleware
from starlette.requests import Request
from starlette.responses import JSONResponse, Response
from starlette.routing import Mount, Route
from starlette.types import ASGIApp, Receive, Scope, Send

from sources.processes.control import refuse_unless_trusted
from sources.security.auth import SCOPES_BY_SOURCE, CredentialCheck, CredentialRejected
from sources.security.listen import LOOPBACK, is_loopback, transport_security

__all__ = [
    "MCP_PATH",
    "METADATA_PATH",
    "CredentialVerifier",
    "authorized_http_app",
    "protected_resource_metadata",
    "resource_metadata_url",
]

MCP_PATH = "/mcp"
METADATA_PATH = "/.well-known/oauth-protected-resource"

_log = logging.getLogger(__name__)


class CredentialVerifier:
    """The SDK's ``TokenVerifier`` for the coordinator's credentials: the very check a ``_meta``
    credential goes through (``CredentialCheck.verify``), so the same token means the same principal
    whichever way it came."""

    def __init__(self, check: CredentialCheck) -> None:
        self._check = check

    async def verify_token(self, token: str) -> AccessToken | None:
        try:
            principal = self._check.verify(token)
        except CredentialRejected as rejected:  # the reason never quotes the token
            _log.warning("%s refused a bearer token: %s", self._check.source, rejected.reason)
            return None
        # The audience was checked by verify_credential, so the SDK is not asked to compare
        # `resource` with a URL (`AuthSettings.validate_token_resource`); the subject names the
        # principal, and so the session's owner (the SDK compares client_id, issuer and subject).
        return AccessToken(
            token=token,
            client_id=principal.subject,
            subject=principal.subject,
            scopes=sorted(principal.scopes),
        )


def resource_metadata_url(resource_url: str) -> str:
    """Where the metadata of ``resource_url`` is (RFC 9728 §3.1), as ``WWW-Authenticate`` names it."""
    return str(build_resource_metadata_url(AnyHttpUrl(resource_url)))


def protected_resource_metadata(source: str, resource_url: str) -> dict[str, Any]:
    """RFC 9728 §2's document for one source; no authorization server (see the module's docstring)."""
    return {
        "resource": resource_url,
        "scopes_supported": list(SCOPES_BY_SOURCE.get(source, ())),
        "bearer_methods_supported": ["header"],
        "resource_name": f"research source {source}",
    }


def _add_metadata_routes(server: MCPServer, source: str, resource_url: str, host: str) -> None:
    document = protected_resource_metadata(source, resource_url)

    async def metadata(request: Request) -> Response:
        refused = await refuse_unless_trusted(request, secret=None, host=host)
        return refused or JSONResponse(document, headers={"Cache-Control": "public, max-age=3600"})

    suffixed = METADATA_PATH + MCP_PATH  # what resource_metadata_url names
    for path in (suffixed, METADATA_PATH):
        server.custom_route(path, methods=["GET"])(metadata)


class _ByCredential:
    """The MCP endpoint: a request with an ``Authorization`` header takes the bearer path (verified,
    or 401), one without it the anonymous path, if there is one; each path has its own sessions."""

    def __init__(self, anonymous: ASGIApp | None, bearer: ASGIApp) -> None:
        self._anonymous = anonymous
        self._bearer = bearer

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        presented = any(name.lower() == b"authorization" for name, _ in scope.get("headers", ()))
        # No anonymous path: the bearer path's RequireAuthMiddleware answers 401 to a request without a token.
        await (self._bearer if presented or self._anonymous is None else self._anonymous)(
            scope, receive, send
        )


def authorized_http_app(
    server: MCPServer, source: str, resource_url: str, *, host: str = LOOPBACK, **session_options: Any
) -> Starlette:
    """The source's streamable HTTP app with bearer authorization, listening on ``host`` (off loopback
    every request needs a token); ``session_options`` go to the SDK's ``streamable_http_app`` (idle
    timeout, session limit) and apply to each session pool."""
    check = next(layer for layer in server.middleware if isinstance(layer, CredentialCheck))
    _add_metadata_routes(server, source, resource_url, host)
    # The SDK checks Host and Origin by itself only on a loopback host: given, so that on any other
    # address the check is the same, that address allowed too.
    options = {"host": host, "transport_security": transport_security(host), **session_options}
    # Two apps of the same server, as the SDK builds them: each has its own session manager.
    bearer_app = server.streamable_http_app(streamable_http_path=MCP_PATH, **options)
    bearer_sessions = server.session_manager
    anonymous_app = server.streamable_http_app(streamable_http_path=MCP_PATH, **options)
    anonymous_sessions = server.session_manager
    bearer = AuthenticationMiddleware(
        AuthContextMiddleware(
            RequireAuthMiddleware(bearer_app, [], AnyHttpUrl(resource_metadata_url(resource_url)))
        ),
        backend=BearerAuthBackend(CredentialVerifier(check)),
    )

    @contextlib.asynccontextmanager
    async def lifespan(_: Starlette) -> AsyncIterator[None]:
        async with anonymous_sessions.run(), bearer_sessions.run():
            yield

    return Starlette(
        routes=[
            Route(MCP_PATH, endpoint=_ByCredential(anonymous_app if is_loopback(host) else None, bearer)),
            Mount("", app=anonymous_app),  # /health, /chaos, the metadata: the routes beside the endpoint
        ],
        lifespan=lifespan,
    )
