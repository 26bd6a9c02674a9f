"""The one fault layer: parsed settings, seeded replay, and each fault through the real protocol."""

from __future__ import annotations

import dataclasses
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path

import anyio
import httpx2
import pytest
from mcp import Client
from mcp.server import MCPServer
from mcp.shared.exceptions import MCPError
from mcp.types import CallToolResult

from sources.contract import EmptyResult
from sources.faults import FaultLayer, FaultSettings, rolls
from sources.security.fleet_secret import FLEET_SECRET_HEADER
from sources.settings import SourceSettings
from sources.tool_failure import to_call_tool_result
from subagents.classify import classify_exception
from tests.conftest import MODULES, PROJECT_ROOT, HttpSource, call, child_environment, stdio_parameters, wire
from traces.files import load_traces

pytestmark = pytest.mark.anyio


def test_settings_read_and_write_the_same_spec() -> None:
    settings = FaultSettings.parse(
        "latency=1.5s, jitter=20ms,transient=0.25,hang=0.1,crash=0.01,garbage=0.5,seed=7"
    )
    assert settings == FaultSettings(
        latency_ms=1500, jitter_ms=20, transient=0.25, hang=0.1, crash=0.01, garbage=0.5, seed=7
    )
    assert FaultSettings.parse(settings.spec()) == settings
    assert FaultSettings.parse("") == FaultSettings() and not FaultSettings().active


def test_a_fault_merged_in_adds_to_those_in_force() -> None:
    slow = FaultSettings.parse("latency=300ms,jitter=50ms,seed=7")
    flaky = slow.merged(FaultSettings(transient=0.3))
    assert flaky == FaultSettings(latency_ms=300, jitter_ms=50, transient=0.3, seed=7)
    assert flaky.spec() == "latency=300ms,jitter=50ms,transient=0.3,seed=7"
    # A change says which fields it sets, zeros included, and reads back as the same change.
    change = FaultSettings(latency_ms=100, jitter_ms=0)
    assert change.spec(as_change=True) == "latency=100ms,jitter=0ms"
    assert flaky.merged(FaultSettings.parse(change.spec(as_change=True))) == FaultSettings(
        latency_ms=100, transient=0.3, seed=7
    )
    assert flaky.merged(FaultSettings(transient=0)) == slow  # one fault cleared, the others stay
    assert flaky.merged(FaultSettings()) == flaky  # no change
    assert slow.merged(flaky).merged(FaultSettings()).merged(FaultSettings(hang=1)).hang == 1
    assert FaultSettings().merged(slow) == slow  # settings given in full replace every field


@pytest.mark.parametrize(
    ("spec", "fragment"),
    [
        ("flaky=0.3", "name=value"),
        ("transient=1.5", "transient"),
        ("latency=fast", "duration"),
        ("seed", "name=value"),
    ],
)
def test_a_bad_spec_says_what_is_wrong(spec: str, fragment: str) -> None:
    with pytest.raises(ValueError, match=fragment):
        FaultSettings.parse(spec)


@pytest.mark.parametrize("source", sorted(MODULES))
async def test_every_source_runs_behind_the_same_layer(settings: SourceSettings, source: str) -> None:
    from tests.outcomes import VALID_CALLS

    server = MODULES[source].create_server(settings.with_faults(FaultSettings(transient=1)))
    offered = {tool.name for tool in await server.list_tools()}
    tool = next(name for name in VALID_CALLS if name in offered)
    payload = wire(await call(server, tool, VALID_CALLS[tool]))
    assert payload == {
        "errorCategory": "transient",
        "isRetryable": True,
        "description": f"The {source} source is temporarily unavailable (injected fault); "
        "the request did not execute and should succeed on retry.",
    }


async def outcomes(server: MCPServer, calls: int) -> list[bool]:
    async with Client(server, read_timeout_seconds=10) as client:
        with anyio.fail_after(30):
            return [
                (await client.call_tool("customer_lookup", {"identifier": "CUST-00042"})).is_error
                for _ in range(calls)
            ]


async def test_a_seed_replays_the_same_faults(settings: SourceSettings) -> None:
    from sources import customers

    def server(seed: int) -> MCPServer:
        return customers.create_server(settings.with_faults(FaultSettings(transient=0.5, seed=seed)))

    first, again, other = (
        await outcomes(server(7), 20),
        await outcomes(server(7), 20),
        await outcomes(server(8), 20),
    )
    assert first == again
    assert first != other
    assert 0 < sum(first) < 20


async def test_latency_with_jitter_goes_through_the_injected_sleep() -> None:
    slept: list[float] = []

    async def record(seconds: float) -> None:
        slept.append(seconds)

    server = MCPServer("probe")
    server.middleware.append(
        FaultLayer(FaultSettings(latency_ms=200, jitter_ms=50, seed=3), source="probe", sleep=record)
    )

    @server.tool()
    def ping() -> CallToolResult:
        return to_call_tool_result(EmptyResult(message="pong"))

    async with Client(server, read_timeout_seconds=10) as client:
        for _ in range(10):
            assert (await client.call_tool("ping", {})).is_error is False
    assert len(slept) == 10 and len(set(slept)) == 10
    assert all(0.150 <= seconds <= 0.250 for seconds in slept)


async def test_garbage_needs_a_wire() -> None:
    with pytest.raises(ValueError, match="needs a wire to corrupt"):
        FaultLayer(FaultSettings(garbage=1), source="kb")


@pytest.mark.subprocess
async def test_crash_kills_the_process_mid_call(settings: SourceSettings) -> None:
    parameters = stdio_parameters(settings, "orders", "--faults", "crash=1")
    async with Client(parameters, read_timeout_seconds=10) as client:
        with pytest.raises(MCPError) as caught:
            await client.call_tool("search_orders", {"customer_id": "CUST-00042"}, read_timeout_seconds=10)
    assert "Connection closed" in caught.value.error.message


@pytest.mark.subprocess
async def test_hang_leaves_the_caller_waiting_until_its_timeout(settings: SourceSettings) -> None:
    parameters = stdio_parameters(settings, "kb", "--faults", "hang=1")
    async with Client(parameters, read_timeout_seconds=10) as client:
        with pytest.raises(MCPError) as caught:
            await client.call_tool("search_policies", {"query": "refunds"}, read_timeout_seconds=1)
        assert caught.value.error.code == -32001  # request timeout; the session stays usable
        listed = await client.list_tools()
    assert {tool.name for tool in listed.tools} == {"search_policies", "related_policies"}


@pytest.mark.subprocess
async def test_garbage_corrupts_the_wire_instead_of_answering(settings: SourceSettings) -> None:
    """The answer never comes, and the bytes on the wire (not UTF-8) break the client's reader."""
    parameters = stdio_parameters(settings, "kb", "--faults", "garbage=1")
    with pytest.RaisesGroup(UnicodeDecodeError, flatten_subgroups=True):
        async with Client(parameters, read_timeout_seconds=10) as client:
            with pytest.raises(MCPError) as caught:
                await client.call_tool("search_policies", {"query": "refunds"}, read_timeout_seconds=1)
            assert caught.value.error.code == -32001


@pytest.mark.subprocess
async def test_faults_from_the_environment_over_http(http_source: Callable[..., HttpSource]) -> None:
    running = http_source("tickets", RESEARCH_FAULTS="transient=1")
    async with Client(running.url, read_timeout_seconds=10) as client:
        result = await client.call_tool("search_tickets", {"query": "refund"}, read_timeout_seconds=10)
    assert wire(result)["errorCategory"] == "transient"


@pytest.mark.subprocess
def test_http_refuses_garbage_and_a_taken_port(
    settings: SourceSettings, http_source: Callable[..., HttpSource]
) -> None:
    def start(*args: str) -> subprocess.CompletedProcess[str]:
        return subprocess.run(
            [sys.executable, "-m", "sources.kb", "--http", *args],
            env={**child_environment(settings)}, cwd=PROJECT_ROOT, capture_output=True, text=True, timeout=60,
        )  # fmt: skip

    holder = http_source("kb", wait=False)  # it starts while the next one is refused
    refused = start("--faults", "garbage=1")
    assert refused.returncode != 0 and "needs a wire to corrupt" in refused.stderr

    port = holder.ready().url.split(":")[2].split("/")[0]
    taken = start("--port", port)
    assert taken.returncode != 0 and f"port {port} on 127.0.0.1 is already in use" in taken.stderr


def test_settings_reach_a_child_process(settings: SourceSettings) -> None:
    faulty = dataclasses.replace(settings, faults=FaultSettings(transient=0.5, seed=9))
    # Everything reaches the child but the private key: it gets the public half, to verify and not to sign.
    child = SourceSettings.from_environment(faulty.child_environment())
    assert child == dataclasses.replace(faulty, signing_key_pem=None)


@pytest.mark.subprocess
async def test_a_killed_source_has_exported_what_it_finished(
    settings: SourceSettings, tmp_path: Path
) -> None:
    traced = dataclasses.replace(settings, traces_dir=tmp_path)
    parameters = stdio_parameters(traced, "orders", "--faults", "crash=1")
    async with Client(parameters, read_timeout_seconds=10) as client:
        await client.list_tools()  # finished before the crash
        with pytest.raises(MCPError):
            await client.call_tool("search_orders", {"customer_id": "CUST-00042"}, read_timeout_seconds=10)
    spans = [span for found in load_traces(tmp_path).values() for span in found]
    services = {span["resource"]["attributes"]["service.name"] for span in spans}
    assert services == {"research-source-orders"}
    assert "tools/list" in {span["name"] for span in spans}


async def _calls_over_http(url: str, count: int) -> list[str]:
    """``count`` calls, each in a session of its own (a corrupted answer ends its session): for each,
    "ok" when answered, else how the subagents' classifier names the failure."""
    outcomes = []
    for _ in range(count):
        try:
            with anyio.fail_after(10):
                async with Client(url, read_timeout_seconds=5) as client:
                    result = await client.call_tool(
                        "search_policies", {"query": "refund"}, read_timeout_seconds=5
                    )
            outcomes.append("ok" if wire(result)["resultCount"] > 0 else "empty")
        except Exception as exc:  # what the client raised, whatever it is, is what gets classified
            outcomes.append(classify_exception(exc).error_type)
    return outcomes


CHAOS_SECRET = "a-chaos-secret-for-the-tests"


def _set_faults(url: str, faults: str) -> None:
    control = url.removesuffix("/mcp") + "/chaos"
    headers = {FLEET_SECRET_HEADER: CHAOS_SECRET}
    assert (
        httpx2.post(control, json={"faults": faults}, headers=headers, timeout=10).json()["faults"] == faults
    )


@pytest.mark.subprocess
@pytest.mark.parametrize(("faults", "calls"), [("garbage=1.0", 6), ("garbage=0.5,seed=3", 12)])
async def test_garbage_over_http_corrupts_exactly_the_answers_the_dice_chose(
    http_source: Callable[..., HttpSource], faults: str, calls: int
) -> None:
    running = http_source("kb", "--chaos-control", RESEARCH_FLEET_SECRET=CHAOS_SECRET)
    _set_faults(running.url, faults)
    dice = rolls(FaultSettings.parse(faults))
    chosen = [next(dice).garbage for _ in range(calls)]
    assert await _calls_over_http(running.url, calls) == ["garbage" if struck else "ok" for struck in chosen]
    assert sum(chosen) > 0 and (faults.startswith("garbage=1") or not all(chosen))
