"""Each source answers tools/list with input and output schemas, and every outcome, in memory,
over a real stdio subprocess and over real streamable HTTP, to the mcp Client."""

from __future__ import annotations

import dataclasses
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import anyio
import pytest
from jsonschema import Draft202012Validator
from mcp import Client

from sources import contract
from sources.catalogue import TOOLS
from sources.security.keys import private_pem
from sources.settings import SourceSettings
from tests.conftest import MODULES, TEST_KEY, HttpSource, credential, http_sources, stdio_parameters, wire
from tests.outcomes import OUTCOMES, PROCESS_ENVIRONMENT, VALID_CALLS

pytestmark = pytest.mark.anyio


@pytest.fixture(scope="module")
def over_http(settings: SourceSettings) -> Iterator[dict[str, HttpSource]]:
    """Every source over HTTP, as its process is started for these tests, started once for the module.
    Each test opens a session of its own; tickets (whose small burst its outcomes spend) serves one test."""
    with http_sources(settings, sorted(MODULES), PROCESS_ENVIRONMENT) as running:
        yield running


def settings_for(settings: SourceSettings, source: str) -> SourceSettings:
    """The settings a process of this source would read from its environment."""
    environment = {**settings.child_environment(), **PROCESS_ENVIRONMENT.get(source, {})}
    return SourceSettings.from_environment(environment)


async def check_source(client: Client, source: str) -> None:
    with anyio.fail_after(30):
        listed = (await client.list_tools()).tools
        assert {tool.name for tool in listed} == TOOLS[source]
        for tool in listed:
            assert (
                tool.description is not None and "error" in tool.description.lower()
            )  # each documents its errors
            assert tool.input_schema["type"] == "object" and tool.input_schema["properties"]
            assert tool.name in VALID_CALLS
            Draft202012Validator(tool.input_schema).validate(VALID_CALLS[tool.name])
            assert tool.output_schema is not None
            output = Draft202012Validator(tool.output_schema)
            output.validate(contract.EmptyResult(message="nothing").to_wire())  # the empty shape fits too
            assert set(tool.output_schema["required"]) == {"resultCount", "results"}

        for tool, arguments, scopes, expected in OUTCOMES[source]:
            meta = credential(*scopes, source=source) if scopes else None
            result = await client.call_tool(tool, arguments, read_timeout_seconds=10, meta=meta)
            payload = wire(result)
            where = f"{tool}({arguments}) with {scopes}"
            if expected in ("ok", "empty"):
                assert result.is_error is False, f"{where}: {payload}"
                assert (payload["resultCount"] == 0) is (expected == "empty"), where
                assert (
                    isinstance(payload["results"], list) and len(payload["results"]) == payload["resultCount"]
                )
            else:
                assert result.is_error is True, f"{where}: {payload}"
                assert payload["errorCategory"] == expected, f"{where}: {payload}"
                assert payload["isRetryable"] is (expected == "transient")
                assert isinstance(payload["description"], str) and payload["description"]
                if arguments.get("mode", "success") == "success":
                    assert payload["attempted_query"]["tool"] == tool, where


@pytest.mark.parametrize("source", sorted(MODULES))
async def test_in_memory(settings: SourceSettings, source: str) -> None:
    server = MODULES[source].create_server(settings_for(settings, source))
    async with Client(server, read_timeout_seconds=10) as client:
        await check_source(client, source)


@pytest.mark.subprocess
@pytest.mark.parametrize("source", sorted(MODULES))
async def test_over_stdio(settings: SourceSettings, source: str) -> None:
    parameters = stdio_parameters(settings, source, **PROCESS_ENVIRONMENT.get(source, {}))
    async with Client(parameters, read_timeout_seconds=10) as client:
        await check_source(client, source)


@pytest.mark.subprocess
@pytest.mark.parametrize("source", sorted(MODULES))
async def test_over_http(source: str, over_http: dict[str, HttpSource]) -> None:
    running = over_http[source]
    assert running.url.startswith("http://127.0.0.1:") and running.url.endswith("/mcp")
    async with Client(running.url, read_timeout_seconds=10) as client:
        await check_source(client, source)


@pytest.mark.subprocess
async def test_kb_warm_up_over_stdio(settings: SourceSettings, tmp_path: Path) -> None:
    fresh = dataclasses.replace(settings, data_dir=tmp_path)  # a world whose kb index is not built yet
    parameters = stdio_parameters(fresh, "kb", RESEARCH_KB_WARMUP_MS="600000")
    async with Client(parameters, read_timeout_seconds=10) as client:
        result = await client.call_tool("search_policies", {"query": "refunds"}, read_timeout_seconds=10)
    payload = wire(result)
    assert payload["errorCategory"] == "transient" and 0 < payload["retryAfterMs"] <= 600000


@pytest.mark.subprocess
async def test_an_elevated_credential_needs_no_restart(over_http: dict[str, HttpSource]) -> None:
    """One HTTP session: refused without the scope, served with it on the very next call."""
    running = over_http["billing"]
    async with Client(running.url, read_timeout_seconds=10) as client:
        arguments: dict[str, Any] = {"customer_id": "CUST-00042"}
        refused = await client.call_tool("list_invoices", arguments, read_timeout_seconds=10)
        assert wire(refused)["errorCategory"] == "permission"
        served = await client.call_tool(
            "list_invoices",
            arguments,
            read_timeout_seconds=10,
            meta=credential("billing:read", source="billing"),
        )
        assert served.is_error is False and wire(served)["resultCount"] == 3
    assert private_pem(TEST_KEY) not in str(wire(served)) and "PRIVATE KEY" not in str(wire(served))
