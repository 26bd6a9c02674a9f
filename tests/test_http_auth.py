"""Standard MCP authorization on a source's HTTP endpoint (``sources.security.http_auth``), from outside, as real
HTTP requests: bearer tokens, the 401 and its ``WWW-Authenticate``, RFC 9728 metadata, and session
room kept for clients with a token whatever anonymous clients open.

The official TypeScript client's view of the same is in ``test_interop.py``.
"""

from __future__ import annotations

import ast
import json
import time
from collections.abc import Callable, Iterator
from concurrent.futures import ThreadPoolExecutor
from typing import Any

import anyio
import httpx2
import pytest
from mcp import Client
from mcp.client.streamable_http import streamable_http_client
from mcp.shared.exceptions import MCPError

from sources.security.auth import SCOPES_BY_SOURCE, issue_credential
from tests.conftest import CALL_TIMEOUT, MODULES, PROJECT_ROOT, TEST_KEY, HttpSource, call, wire
from tests.test_credentials import ATTACKS

pytestmark = pytest.mark.subprocess

INITIALIZE = {
    "jsonrpc": "2.0", "id": 1, "method": "initialize",
    "params": {"protocolVersion": "2025-06-18", "capabilities": {}, "clientInfo": {"name": "t", "version": "1"}},
}  # fmt: skip
HEADERS = {"Accept": "application/json, text/event-stream", "Content-Type": "application/json"}
ELIGIBILITY = {"order_id": "ORD-10031", "amount": 45}


def bearer(token: str) -> dict[str, str]:
    return {**HEADERS, "Authorization": f"Bearer {token}"}


def billing_token(*scopes: str, subject: str = "a-host") -> str:
    return issue_credential(TEST_KEY, subject, scopes, source="billing")


def metadata_url(running: HttpSource) -> str:
    return running.url.removesuffix("/mcp") + "/.well-known/oauth-protected-resource/mcp"


@pytest.fixture(scope="module")
def sources(settings: Any) -> Iterator[dict[str, HttpSource]]:
    """billing, customers and orders over HTTP, started once for the module (tests that fill the
    session pool start their own)."""
    started = {name: HttpSource(settings, name, wait=False) for name in ("billing", "customers", "orders")}
    try:
        yield {name: running.ready() for name, running in started.items()}
    finally:
        for running in started.values():
            running.stop()


@pytest.mark.parametrize("source", ["billing", "customers", "orders"])
@pytest.mark.parametrize("suffix", ["/mcp", ""])
def test_protected_resource_metadata_is_served(
    sources: dict[str, HttpSource], source: str, suffix: str
) -> None:
    """RFC 9728 at the MCP endpoint's path-suffixed well-known URL (what hosts try first) and at the
    root one: the resource, the scopes this source enforces, header-only bearer tokens, and no
    authorization server (the coordinator signs the tokens; no OAuth server issues them)."""
    running = sources[source]
    origin = running.url.removesuffix("/mcp")
    answer = httpx2.get(f"{origin}/.well-known/oauth-protected-resource{suffix}", timeout=10)
    assert answer.status_code == 200, answer.text
    assert answer.json() == {
        "resource": running.url,
        "scopes_supported": list(SCOPES_BY_SOURCE.get(source, ())),
        "bearer_methods_supported": ["header"],
        "resource_name": f"research source {source}",
    }


def test_the_metadata_refuses_a_foreign_host(sources: dict[str, HttpSource]) -> None:
    """Like every route beside the endpoint: a page on a rebound DNS name is not answered."""
    answer = httpx2.get(metadata_url(sources["billing"]), headers={"Host": "evil.example:80"}, timeout=10)
    assert answer.status_code >= 400 and "resource" not in answer.text


def test_the_scopes_listed_are_those_the_sources_enforce() -> None:
    """``SCOPES_BY_SOURCE`` (the metadata's ``scopes_supported``) is every ``require_scope`` of each source."""
    for name, module in MODULES.items():
        tree = ast.parse((PROJECT_ROOT / "sources" / f"{name}.py").read_text(encoding="utf-8"))
        required = {
            node.args[0].value
            for node in ast.walk(tree)
            if isinstance(node, ast.Call)
            and getattr(node.func, "id", None) == "require_scope"
            and isinstance(node.args[0], ast.Constant)
        }
        assert set(SCOPES_BY_SOURCE.get(name, ())) == required, module.__name__


def _assert_401(answer: httpx2.Response, running: HttpSource, token: str) -> None:
    assert answer.status_code == 401, answer.text
    challenge = answer.headers["www-authenticate"]
    assert challenge.startswith("Bearer ") and 'error="invalid_token"' in challenge, challenge
    assert f'resource_metadata="{metadata_url(running)}"' in challenge, challenge
    assert answer.json()["error"] == "invalid_token"
    assert "mcp-session-id" not in answer.headers
    if token:
        assert token not in answer.text and token not in challenge  # never quoted back


@pytest.mark.parametrize("attack", sorted(ATTACKS))
def test_every_forged_or_bad_credential_is_401_as_a_bearer_token(
    sources: dict[str, HttpSource], attack: str
) -> None:
    """The attacks ``_meta`` credentials are tested with (test_credentials.py, against customers),
    now as bearer tokens: each is answered 401 with the challenge, before any session opens."""
    running = sources["customers"]
    forge, _ = ATTACKS[attack]
    token = forge()
    _assert_401(httpx2.post(running.url, json=INITIALIZE, headers=bearer(token), timeout=10), running, token)


@pytest.mark.parametrize(
    "authorization", ["Bearer", "Bearer not-a-token", "Basic YTpi", "bearer-ish"], ids=repr
)
def test_an_authorization_header_without_a_valid_bearer_token_is_401(
    sources: dict[str, HttpSource], authorization: str
) -> None:
    """A client that sent credentials is told they failed, never served as anonymous instead."""
    running = sources["billing"]
    answer = httpx2.post(
        running.url, json=INITIALIZE, headers={**HEADERS, "Authorization": authorization}, timeout=10
    )
    _assert_401(answer, running, "")


def test_a_token_for_another_source_is_401(sources: dict[str, HttpSource]) -> None:
    running = sources["billing"]
    token = issue_credential(TEST_KEY, "a-host", ["billing:read"], source="customers")
    _assert_401(httpx2.post(running.url, json=INITIALIZE, headers=bearer(token), timeout=10), running, token)


def _open(url: str, headers: dict[str, str], client: httpx2.Client | None = None) -> httpx2.Response:
    """Open a session of the stateful protocol and abandon it."""
    return (client or httpx2).post(url, json=INITIALIZE, headers=headers, timeout=10)


def test_a_session_belongs_to_the_credential_that_opened_it(sources: dict[str, HttpSource]) -> None:
    """One opened with a token is not found without it, nor with another subject's token; one opened
    anonymously is not found with a token. Each answers 404, as a session that does not exist."""
    url = sources["billing"].url
    token = billing_token("billing:read")
    ping = {"jsonrpc": "2.0", "id": 2, "method": "ping"}

    def ping_in(session: str, headers: dict[str, str]) -> int:
        headers = {**headers, "mcp-session-id": session, "mcp-protocol-version": "2025-06-18"}
        return httpx2.post(url, json=ping, headers=headers, timeout=10).status_code

    with_token = _open(url, bearer(token)).headers["mcp-session-id"]
    assert ping_in(with_token, bearer(token)) == 200
    assert ping_in(with_token, bearer(billing_token("billing:read"))) == 200  # a fresh token, same subject
    assert ping_in(with_token, HEADERS) == 404
    assert ping_in(with_token, bearer(billing_token("billing:read", subject="someone-else"))) == 404
    anonymous = _open(url, HEADERS).headers["mcp-session-id"]
    assert ping_in(anonymous, HEADERS) == 200
    assert ping_in(anonymous, bearer(token)) == 404


async def _eligibility_with(url: str, token: str | None) -> dict[str, Any]:
    """refund_eligibility through the mcp SDK's own client, with ``token`` as its bearer token."""
    headers = {"Authorization": f"Bearer {token}"} if token else {}
    async with (
        httpx2.AsyncClient(headers=headers, timeout=CALL_TIMEOUT) as http,
        Client(streamable_http_client(url, http_client=http), read_timeout_seconds=CALL_TIMEOUT) as client,
    ):
        result = await call(client, "refund_eligibility", ELIGIBILITY)
    payload = wire(result)
    return {"is_error": result.is_error, **payload}


CALL_ELIGIBILITY = {
    "jsonrpc": "2.0", "id": 2, "method": "tools/call",
    "params": {"name": "refund_eligibility", "arguments": ELIGIBILITY},
}  # fmt: skip
INITIALIZED = {"jsonrpc": "2.0", "method": "notifications/initialized"}


def _eligibility_in_a_session(url: str, token: str) -> tuple[int, dict[str, Any] | None]:
    """refund_eligibility over the session handshake (as the TypeScript SDK speaks it): initialize,
    initialized, the call in the session, each with the bearer token. The initialize's HTTP status,
    and the call's result when a session opened."""
    with httpx2.Client(headers=bearer(token), timeout=10) as client:
        opened = client.post(url, json=INITIALIZE)
        if opened.status_code != 200:
            return opened.status_code, None
        session = {"mcp-session-id": opened.headers["mcp-session-id"], "mcp-protocol-version": "2025-06-18"}
        client.headers.update(session)
        assert client.post(url, json=INITIALIZED).status_code == 202
        answered = client.post(url, json=CALL_ELIGIBILITY)
    (data,) = [line[len("data: ") :] for line in answered.text.splitlines() if line.startswith("data: ")]
    return opened.status_code, json.loads(data)["result"]


@pytest.mark.timeout(300)
def test_anonymous_sessions_never_crowd_out_a_client_with_a_token(
    http_source: Callable[..., HttpSource],
) -> None:
    """Issue 26: 1,000 anonymous sessions opened and abandoned (the default limit) locked out every
    client using the session handshake. Now the next anonymous one is refused, and a client with a
    valid bearer token still opens a session and is served."""
    running = http_source("billing")
    limit = 1000  # RESEARCH_HTTP_MAX_SESSIONS's default
    with httpx2.Client() as client, ThreadPoolExecutor(8) as pool:
        statuses = list(pool.map(lambda _: _open(running.url, HEADERS, client).status_code, range(limit)))
        assert statuses == [200] * limit
        refused = _open(running.url, HEADERS, client)
    assert refused.status_code == 503 and refused.json()["error"]["message"] == "Too many open sessions"

    status, result = _eligibility_in_a_session(running.url, billing_token("billing:read"))
    assert status == 200 and result is not None and result.get("isError", False) is False, result
    assert result["structuredContent"]["results"][0]["eligible"] is True


def test_sessions_with_tokens_are_bounded_too(http_source: Callable[..., HttpSource]) -> None:
    """Clients with a token have their own room, bounded by the same limit: never unbounded."""
    running = http_source("billing", RESEARCH_HTTP_MAX_SESSIONS="2")
    token = billing_token("billing:read")
    assert [_open(running.url, bearer(token)).status_code for _ in range(2)] == [200, 200]
    assert _open(running.url, bearer(token)).status_code == 503
    assert _open(running.url, HEADERS).status_code == 200  # the anonymous room is its own


def test_a_bearer_token_reaches_the_tool_as_the_principal(sources: dict[str, HttpSource]) -> None:
    """Through the mcp SDK's Python client (which speaks the sessionless 2026 protocol): the token's
    scope opens billing's records; without a token the call is billing's structured permission error;
    an expired token is refused before the call is read."""
    url = sources["billing"].url
    allowed = anyio.run(_eligibility_with, url, billing_token("billing:read"))
    assert allowed["is_error"] is False
    refused = anyio.run(_eligibility_with, url, None)
    assert refused["is_error"] is True and refused["requiredScope"] == "billing:read"
    expired = issue_credential(TEST_KEY, "a-host", ["billing:read"], source="billing", now=time.time() - 900)
    # The SDK's client reports the 401 (tested as it is sent above) as an error of its session.
    with pytest.raises(ExceptionGroup) as raised:
        anyio.run(_eligibility_with, url, expired)
    assert raised.group_contains(MCPError, match="Server returned an error response")
