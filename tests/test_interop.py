"""Every outcome of every tool, through the official TypeScript MCP client, over stdio and over HTTP.

The TypeScript SDK (pinned in ``tests/interop/package.json``; `make test` installs it) is the client
inside MCP Inspector and most desktop hosts. It validates a result's ``structuredContent`` against
the tool's ``outputSchema``, errors included: a contract error sent there would reach such hosts as
an opaque protocol error. Each outcome must come back as data: a success with its structured copy,
an error as its JSON in the text block, with the contract's fields.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from collections.abc import Callable
from typing import Any

import pytest

from sources.catalogue import TOOLS
from sources.settings import SourceSettings
from tests.conftest import MODULES, PROJECT_ROOT, HttpSource, child_environment, credential
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
def test_every_outcome_over_http(
    settings: SourceSettings, source: str, http_source: Callable[..., HttpSource]
) -> None:
    running = http_source(source, **PROCESS_ENVIRONMENT.get(source, {}))
    check_outcomes(source, typescript_client(settings, source, ["http", running.url]))


@pytest.mark.parametrize("amount", ["NaN", "Infinity", "-Infinity", "1e999"])
def test_a_nan_amount_is_a_contract_validation_error(settings: SourceSettings, amount: str) -> None:
    """JSON has no NaN, and 1e999 is too large for a float: a raw client can still send them; each gets
    a validation error naming the field."""
    messages = [
        json.dumps({"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": {
            "protocolVersion": "2025-06-18", "capabilities": {}, "clientInfo": {"name": "raw", "version": "1"}}}),
        json.dumps({"jsonrpc": "2.0", "method": "notifications/initialized"}),
        '{"jsonrpc": "2.0", "id": 2, "method": "tools/call", "params": {"name": "refund_eligibility", '
        '"arguments": {"order_id": "ORD-10031", "amount": ' + amount + "}}}",
    ]  # fmt: skip
    # stdin stays open until the answer is read: at end of input the source stops, answered or not.
    source = subprocess.Popen(
        [sys.executable, "-m", "sources.billing"], env={**os.environ, **child_environment(settings)},
        cwd=PROJECT_ROOT, stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True,
    )  # fmt: skip
    assert source.stdin is not None and source.stdout is not None
    try:
        source.stdin.write("\n".join(messages) + "\n")
        source.stdin.flush()
        # readline returns each answer as the source writes it; the test's timeout bounds the wait.
        answer = next(
            json.loads(line) for line in iter(source.stdout.readline, "") if '"id":2' in line.replace(" ", "")
        )
    finally:
        source.kill()
        source.wait(timeout=10)
        source.stdin.close()
        source.stdout.close()
    result = answer["result"]
    payload = json.loads(result["content"][0]["text"])
    assert result["isError"] is True and payload["errorCategory"] == "validation"
    assert "Argument 'amount' must be a finite number" in payload["description"]
