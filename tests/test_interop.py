"""Every outcome of every tool, through the official TypeScript MCP client, over stdio and over HTTP.

The TypeScript SDK (pinned in ``tests/interop/package.json``; `make test` installs it) is the client
inside MCP Inspector and most desktop hosts. It validates a result's ``structuredContent`` against
the tool's ``outputSchema``, errors included: a contract error sent there would reach such hosts as
an opaque protocol error. Each outcome must come back as data: a success with its structured copy,
an error as its JSON in the text block, with the contract's fields.

The same client lists every tool with the annotations a host reads to tell a read from a payment
(``readOnlyHint``, ``destructiveHint``, ...), as ``sources/annotations.json`` records them.

Over HTTP the same client also authenticates as hosts do, with the coordinator's credential sent as
``Authorization: Bearer`` (``sources.security.http_auth``), and reads the 401 and the metadata it is refused with.
"""

from __future__ import annotations

import itertools
import json
import os
import shutil
import subprocess
import sys
import time
from collections.abc import Callable, Iterator
from typing import Any

import pytest
from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey

from sources.catalogue import TOOLS, tool_annotations
from sources.security.auth import CREDENTIAL_META_KEY, issue_credential
from sources.settings import SourceSettings
from tests.conftest import (
    MODULES,
    PROJECT_ROOT,
    TEST_KEY,
    HttpSource,
    child_environment,
    credential,
    http_sources,
)
from tests.outcomes import OUTCOMES, PROCESS_ENVIRONMENT

pytestmark = pytest.mark.subprocess

NODE = shutil.which("node")
INTEROP = PROJECT_ROOT / "tests" / "interop"
if NODE is None:
    pytest.skip(
        "node is not installed on this machine: the TypeScript SDK interop test needs it",
        allow_module_level=True,
    )


def typescript_client(settings: SourceSettings, source: str, transport: list[str]) -> list[dict[str, Any]]:
    """Play the source's outcomes through the TypeScript client; one answer per call, in order."""
    assert (INTEROP / "node_modules" / "@modelcontextprotocol" / "sdk").is_dir(), (
        "the TypeScript SDK is not installed: run `make test` (it runs `npm ci --prefix tests/interop`)"
    )
    calls = [
        {"name": tool, "arguments": arguments, "meta": credential(*scopes, source=source) if scopes else None}
        for tool, arguments, scopes, _ in OUTCOMES[source]
    ]
    environment = {**os.environ, **child_environment(settings, **PROCESS_ENVIRONMENT.get(source, {}))}
    done = subprocess.run(
        [NODE, str(INTEROP / "call.mjs"), *transport],
        input=json.dumps(calls), env=environment, cwd=PROJECT_ROOT, capture_output=True, text=True, timeout=120,
    )  # fmt: skip
    assert done.returncode == 0, done.stderr
    listed, *answers = [json.loads(line) for line in done.stdout.splitlines()]
    assert set(listed["tools"]) == TOOLS[source]
    assert len(answers) == len(calls)
    return answers


def check_outcomes(source: str, answers: list[dict[str, Any]]) -> None:
    for (tool, arguments, scopes, expected), answer in zip(OUTCOMES[source], answers, strict=True):
        where = f"{source}.{tool}({arguments}) with {scopes}"
        assert "error" not in answer, f"{where}: the client refused the result: {answer['error']}"
        result = answer["result"]
        (block,) = result["content"]
        payload = json.loads(block["text"])
        if expected in ("ok", "empty"):
            assert result.get("isError", False) is False, f"{where}: {payload}"
            assert result["structuredContent"] == payload, where
            assert (payload["resultCount"] == 0) is (expected == "empty"), where
            assert len(payload["results"]) == payload["resultCount"], where
        else:
            assert result["isError"] is True and "structuredContent" not in result, f"{where}: {result}"
            assert payload["errorCategory"] == expected and payload["isRetryable"] is (
                expected == "transient"
            )
            assert payload["description"], where
            if arguments.get("mode", "success") != "success":  # the reference exercise's exact three fields
                assert set(payload) == {"errorCategory", "isRetryable", "description"}, where
            else:
                assert payload["attempted_query"]["tool"] == tool, where


@pytest.mark.parametrize("source", sorted(MODULES))
def test_every_outcome_over_stdio(settings: SourceSettings, source: str) -> None:
    answers = typescript_client(settings, source, ["stdio", sys.executable, "-m", f"sources.{source}"])
    check_outcomes(source, answers)


@pytest.mark.parametrize("source", sorted(MODULES))
def test_the_typescript_client_lists_every_tool_with_its_annotations(
    settings: SourceSettings, source: str
) -> None:
    """What a standard host shows: issue_refund destructive and not read-only, every other tool
    read-only, none open-world, each with a title; all as the catalogue records them."""
    done = subprocess.run(
        [NODE, str(INTEROP / "call.mjs"), "list", "stdio", sys.executable, "-m", f"sources.{source}"],
        env={**os.environ, **child_environment(settings)}, cwd=PROJECT_ROOT, capture_output=True, text=True,
        timeout=120, stdin=subprocess.DEVNULL,
    )  # fmt: skip
    assert done.returncode == 0, done.stderr
    (listed,) = [json.loads(line) for line in done.stdout.splitlines()]
    tools = {tool["name"]: tool for tool in listed["tools"]}
    assert set(tools) == TOOLS[source]
    assert {name: tool.get("annotations") for name, tool in tools.items()} == tool_annotations()[source]
    for name, tool in tools.items():
        hints = tool["annotations"]
        if (source, name) == (
            "billing",
            "issue_refund",
        ):  # it moves money; its key makes a repeat pay nothing
            assert hints["readOnlyHint"] is False and hints["destructiveHint"] is True, hints
            assert hints["idempotentHint"] is True, hints
        else:
            assert hints["readOnlyHint"] is True, (name, hints)
        assert hints["openWorldHint"] is False, (name, hints)
        assert tool["title"].strip() and hints["title"] == tool["title"], (name, tool)


@pytest.fixture(scope="module")
def over_http(settings: SourceSettings) -> Iterator[dict[str, HttpSource]]:
    """Every source over HTTP, started once for the module; each serves the one test of its source."""
    with http_sources(settings, sorted(MODULES), PROCESS_ENVIRONMENT) as running:
        yield running


@pytest.mark.parametrize("source", sorted(MODULES))
def test_every_outcome_over_http(
    settings: SourceSettings, source: str, over_http: dict[str, HttpSource]
) -> None:
    running = over_http[source]
    check_outcomes(source, typescript_client(settings, source, ["http", running.url]))


@pytest.fixture(scope="module")
def raw_billing(settings: SourceSettings) -> Iterator[Callable[[str], dict[str, Any]]]:
    """A billing source over stdio, past its handshake, taking raw JSON-RPC lines: one process for the
    module's raw calls, each a request of its own, answered by its id."""
    # stdin stays open until the end of the module: at end of input the source stops, answered or not.
    source = subprocess.Popen(
        [sys.executable, "-m", "sources.billing"], env={**os.environ, **child_environment(settings)},
        cwd=PROJECT_ROOT, stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True,
    )  # fmt: skip
    assert source.stdin is not None and source.stdout is not None
    stdin, stdout = source.stdin, source.stdout
    ids = itertools.count(2)

    def send(*lines: str) -> None:
        stdin.write("\n".join(lines) + "\n")
        stdin.flush()

    def call(raw_arguments: str) -> dict[str, Any]:
        request_id = next(ids)
        send(
            f'{{"jsonrpc": "2.0", "id": {request_id}, "method": "tools/call", '
            f'"params": {{"name": "refund_eligibility", "arguments": {raw_arguments}}}}}'
        )
        # readline returns each answer as the source writes it; the test's timeout bounds the wait.
        return next(
            answer
            for line in iter(stdout.readline, "")
            if (answer := json.loads(line)).get("id") == request_id
        )

    try:
        send(
            json.dumps({"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": {
                "protocolVersion": "2025-06-18", "capabilities": {}, "clientInfo": {"name": "raw", "version": "1"}}}),
            json.dumps({"jsonrpc": "2.0", "method": "notifications/initialized"}),
        )  # fmt: skip
        yield call
    finally:
        source.kill()
        source.wait(timeout=10)
        stdin.close()
        stdout.close()


@pytest.mark.parametrize("amount", ["NaN", "Infinity", "-Infinity", "1e999"])
def test_a_nan_amount_is_a_contract_validation_error(
    raw_billing: Callable[[str], dict[str, Any]], amount: str
) -> None:
    """JSON has no NaN, and 1e999 is too large for a float: a raw client can still send them; each gets
    a validation error naming the field."""
    answer = raw_billing('{"order_id": "ORD-10031", "amount": ' + amount + "}")
    result = answer["result"]
    payload = json.loads(result["content"][0]["text"])
    assert result["isError"] is True and payload["errorCategory"] == "validation"
    assert "Argument 'amount' must be a finite number" in payload["description"]


ELIGIBILITY = {
    "name": "refund_eligibility",
    "arguments": {"order_id": "ORD-10031", "amount": 45},
    "meta": None,
}


def typescript_bearer(url: str, calls: list[dict[str, Any]], token: str | None) -> list[dict[str, Any]]:
    """The TypeScript client over HTTP sending ``token`` as ``Authorization: Bearer`` (none: no header);
    its output lines: the tools listed and one answer per call, or the one ``refused`` line."""
    environment = {key: value for key, value in os.environ.items() if key != "INTEROP_BEARER_TOKEN"}
    if token is not None:
        environment["INTEROP_BEARER_TOKEN"] = token
    done = subprocess.run(
        [NODE, str(INTEROP / "call.mjs"), "http", url],
        input=json.dumps(calls), env=environment, cwd=PROJECT_ROOT, capture_output=True, text=True, timeout=120,
    )  # fmt: skip
    assert done.returncode == 0, done.stderr
    return [json.loads(line) for line in done.stdout.splitlines()]


def billing_payload(answer: dict[str, Any]) -> tuple[bool, dict[str, Any]]:
    assert "error" not in answer, answer
    result = answer["result"]
    return result.get("isError", False), json.loads(result["content"][0]["text"])


def test_a_bearer_token_is_a_credential_for_the_typescript_client(over_http: dict[str, HttpSource]) -> None:
    """A host that was given a credential sends it as a bearer token: billing's refund_eligibility
    (scope billing:read) answers; without a token the same call is billing's permission error."""
    url = over_http["billing"].url
    token = issue_credential(TEST_KEY, "a-host", ["billing:read"], source="billing")
    listed, answer = typescript_bearer(url, [ELIGIBILITY], token)
    assert "refund_eligibility" in listed["tools"]
    is_error, payload = billing_payload(answer)
    assert is_error is False and answer["result"]["structuredContent"] == payload
    assert payload["results"][0]["eligible"] is True

    _, anonymous = typescript_bearer(url, [ELIGIBILITY], None)
    is_error, payload = billing_payload(anonymous)
    assert is_error is True and "structuredContent" not in anonymous["result"]
    assert payload["errorCategory"] == "permission" and payload["requiredScope"] == "billing:read"
    assert "principal 'anonymous'" in payload["description"]


@pytest.mark.parametrize(
    "bad",
    ["wrong audience", "expired", "another key", "not a token"],
)
def test_a_bad_bearer_token_is_refused_with_401_and_where_the_metadata_is(
    over_http: dict[str, HttpSource], bad: str
) -> None:
    """What the official client sees: HTTP 401, ``WWW-Authenticate: Bearer error="invalid_token"``
    with ``resource_metadata``, which it follows to the source's protected-resource metadata."""
    running = over_http["billing"]
    token = {
        "wrong audience": issue_credential(TEST_KEY, "a-host", ["billing:read"], source="customers"),
        "expired": issue_credential(TEST_KEY, "a-host", ["billing:read"], source="billing", now=time.time() - 900),
        "another key": issue_credential(Ed25519PrivateKey.generate(), "a-host", ["billing:read"], source="billing"),
        "not a token": "not-a-token",
    }[bad]  # fmt: skip
    (line,) = typescript_bearer(running.url, [ELIGIBILITY], token)
    refused = line["refused"]
    assert refused["status"] == 401 and refused["code"] == 401, refused
    assert refused["wwwAuthenticate"].startswith("Bearer ") and refused["error"] == "invalid_token"
    origin = running.url.removesuffix("/mcp")
    assert refused["resourceMetadataUrl"] == f"{origin}/.well-known/oauth-protected-resource/mcp"
    assert refused["metadata"] == {
        "resource": running.url,
        "scopes_supported": ["billing:read", "billing:refund"],
        "bearer_methods_supported": ["header"],
        "resource_name": "research source billing",
    }
    assert token not in json.dumps(refused)  # a refusal never quotes the token


def test_a_meta_credential_wins_over_the_bearer_token(over_http: dict[str, HttpSource]) -> None:
    """Both on one call: the ``_meta`` credential is the one the call runs as. A scopeless bearer
    token plus a ``_meta`` credential with billing:read is allowed; a bearer token with billing:read
    plus a ``_meta`` credential for another source is refused (never a silent fallback)."""
    url = over_http["billing"].url
    scopeless = issue_credential(TEST_KEY, "a-host", [], source="billing")
    elevated = {**ELIGIBILITY, "meta": credential("billing:read", source="billing")}
    _, allowed, bearer_alone = typescript_bearer(url, [elevated, ELIGIBILITY], scopeless)
    assert billing_payload(allowed)[0] is False
    is_error, payload = billing_payload(bearer_alone)  # the bearer token's own principal holds no scope
    assert is_error is True and payload["requiredScope"] == "billing:read"
    assert "principal 'a-host'" in payload["description"]
    reading = issue_credential(TEST_KEY, "a-host", ["billing:read"], source="billing")
    foreign = {
        **ELIGIBILITY,
        "meta": {CREDENTIAL_META_KEY: issue_credential(TEST_KEY, "x", ["billing:read"], source="kb")},
    }
    _, refused, plain = typescript_bearer(url, [foreign, ELIGIBILITY], reading)
    is_error, payload = billing_payload(refused)
    assert is_error is True and payload["errorCategory"] == "permission"
    assert "credential presented was rejected" in payload["description"]
    assert billing_payload(plain)[0] is False  # the bearer token alone still holds billing:read
