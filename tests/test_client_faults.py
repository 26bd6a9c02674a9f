"""Client-side faults: each effect through the real protocol, on the server-side layer's dice."""

from __future__ import annotations

import itertools
import os
import sys
import textwrap

import anyio
import pytest
from mcp import Client, StdioServerParameters
from mcp.server import MCPServer
from mcp.shared.exceptions import MCPError
from mcp.types import CallToolResult, TextContent
from mcp_types import CONNECTION_CLOSED, PARSE_ERROR, REQUEST_TIMEOUT

from sources.faults import OVERSIZE_BYTES, FaultLayer, FaultSettings, rolls
from subagents.classify import classify_exception, classify_result
from subagents.hooks import ToolCall
from subagents.sessions.client_faults import with_client_faults
from subagents.sessions.connection import Connections, Target

pytestmark = pytest.mark.anyio

SHORT_TIMEOUT_S = 0.2  # a call the faults leave unanswered fails after this
BOUND_S = 3.0  # no test step may take longer, whatever goes wrong


class Probe:
    """A one-tool server that counts the calls that reached it."""

    def __init__(self, name: str = "probe") -> None:
        self.calls = 0
        self.reached = anyio.Event()
        self.server = MCPServer(name)

        @self.server.tool()
        def echo(text: str) -> str:
            self.calls += 1
            self.reached.set()
            return text

    def target(self, faults: FaultSettings, **options: str) -> Target:
        return with_client_faults(lambda: self.server, faults, **options)


def opened(target: Target, mode: str = "auto") -> Client:
    """A client on the target; its read timeout bounds the handshake too."""
    return Client(target(), read_timeout_seconds=BOUND_S, mode=mode)


async def echo(client: Client, text: str = "hello", timeout_s: float = BOUND_S) -> CallToolResult:
    with anyio.fail_after(BOUND_S + 1):
        return await client.call_tool("echo", {"text": text}, read_timeout_seconds=timeout_s)


async def failure_of(client: Client, timeout_s: float = BOUND_S) -> MCPError:
    with pytest.raises(MCPError) as caught:
        await echo(client, timeout_s=timeout_s)
    return caught.value


def text_of(result: CallToolResult) -> str:
    assert isinstance(result.content[0], TextContent)
    return result.content[0].text


async def test_without_faults_calls_pass() -> None:
    probe = Probe()
    async with opened(probe.target(FaultSettings())) as client:
        assert {tool.name for tool in (await client.list_tools()).tools} == {"echo"}
        results = [await echo(client, f"call {n}") for n in range(3)]
    assert [text_of(result) for result in results] == ["call 0", "call 1", "call 2"]
    assert probe.calls == 3


@pytest.mark.parametrize("mode", ["auto", "legacy"])
async def test_transient_answers_as_the_server_side_layer_does(mode: str) -> None:
    """The same contract error, naming the server as its handshake did; the call never reaches it."""
    probe = Probe()
    async with opened(probe.target(FaultSettings(transient=1)), mode=mode) as client:
        client_side = await echo(client)
    faulty = Probe()
    faulty.server.middleware.append(FaultLayer(FaultSettings(transient=1), source="probe"))
    async with Client(faulty.server, read_timeout_seconds=BOUND_S, mode=mode) as client:
        server_side = await echo(client)
    assert client_side == server_side
    outcome = classify_result(client_side)
    assert outcome.error is not None and outcome.error.is_retryable
    assert "The probe source is temporarily unavailable" in outcome.error.description
    assert probe.calls == 0


async def test_the_transient_message_can_name_the_source() -> None:
    async with opened(Probe().target(FaultSettings(transient=1), source="files")) as client:
        assert "The files source is temporarily unavailable" in text_of(await echo(client))


async def test_hang_leaves_the_call_to_its_read_timeout() -> None:
    probe = Probe()
    async with opened(probe.target(FaultSettings(hang=1))) as client:
        failure = await failure_of(client, timeout_s=SHORT_TIMEOUT_S)
        assert failure.error.code == REQUEST_TIMEOUT
        assert classify_exception(failure).error_type == "timeout"
        with anyio.fail_after(BOUND_S):
            await client.list_tools()  # the session stays usable; only the call was swallowed
    assert probe.calls == 0


async def test_lose_runs_the_call_and_drops_its_answer() -> None:
    probe = Probe()
    async with opened(probe.target(FaultSettings(lose=1))) as client:
        failure = await failure_of(client, timeout_s=SHORT_TIMEOUT_S)
        with anyio.fail_after(BOUND_S):
            await probe.reached.wait()
    assert failure.error.code == REQUEST_TIMEOUT
    assert probe.calls == 1


async def test_garbage_fails_the_call_as_garbage_on_the_wire() -> None:
    probe = Probe()
    async with opened(probe.target(FaultSettings(garbage=1))) as client:
        failure = await failure_of(client)
        with anyio.fail_after(BOUND_S):
            await client.list_tools()  # as over HTTP: one answer was unreadable, not the session
    assert failure.error.code == PARSE_ERROR
    outcome = classify_exception(failure)
    assert (outcome.error_type, outcome.reopen) == ("garbage", True)
    assert outcome.error is not None and outcome.error.is_retryable
    assert probe.calls == 1  # the call ran; its answer was what could not be read


@pytest.mark.parametrize("fault", ["crash", "exit"])
async def test_crash_ends_the_connection_mid_call(fault: str) -> None:
    probe = Probe()
    async with opened(probe.target(FaultSettings.parse(f"{fault}=1"))) as client:
        failures = [await failure_of(client) for _ in range(2)]
    assert [failure.error.code for failure in failures] == [CONNECTION_CLOSED] * 2  # the session is dead
    outcome = classify_exception(failures[0])
    assert (outcome.error_type, outcome.reopen) == ("connection_closed", True)
    assert probe.calls == 0


_STDIO_PROBE = textwrap.dedent(
    """
    import os
    from mcp.server import MCPServer

    server = MCPServer("stdio-probe")

    @server.tool()
    def pid() -> int:
        return os.getpid()

    server.run()
    """
)


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    return True


@pytest.mark.subprocess
async def test_a_crashed_stdio_child_is_ended_by_the_transport_exit() -> None:
    parameters = StdioServerParameters(command=sys.executable, args=["-c", _STDIO_PROBE])
    # The dice: the first call passes (to learn the child's pid), the second crashes.
    seed = next(seed for seed in itertools.count() if _crashes(FaultSettings(crash=0.5, seed=seed)) == [0, 1])
    with anyio.fail_after(BOUND_S * 3):
        async with opened(
            with_client_faults(lambda: parameters, FaultSettings(crash=0.5, seed=seed))
        ) as client:
            pid = int(text_of(await client.call_tool("pid", {}, read_timeout_seconds=BOUND_S)))
            with pytest.raises(MCPError) as caught:
                await client.call_tool("pid", {}, read_timeout_seconds=BOUND_S)
    assert caught.value.error.code == CONNECTION_CLOSED
    assert not _alive(pid)


def _crashes(faults: FaultSettings, calls: int = 2) -> list[int]:
    return [int(roll.crash) for roll in itertools.islice(rolls(faults), calls)]


async def test_oversize_pads_the_answer() -> None:
    async with opened(Probe().target(FaultSettings(oversize=1))) as client:
        result = await echo(client)
    assert [len(text_of(CallToolResult(content=[block]))) for block in result.content] == [5, OVERSIZE_BYTES]


async def test_latency_holds_the_request_back() -> None:
    async with opened(Probe().target(FaultSettings(latency_ms=100))) as client:
        started = anyio.current_time()
        await echo(client)
    assert anyio.current_time() - started >= 0.1


async def _outcomes(client: Client, calls: int) -> list[str]:
    """For each call in turn, "ok" or the classifier's name of its failure."""
    outcomes = []
    for _ in range(calls):
        try:
            outcomes.append(classify_result(await echo(client)).error_type or "ok")
        except MCPError as exc:
            outcomes.append(classify_exception(exc).error_type)
    return outcomes


def _predicted(faults: FaultSettings, calls: int) -> list[str]:
    """What the dice say of each call: a garbage answer wins over a transient error, as server side."""
    return [
        "garbage" if roll.garbage else "tool_error" if roll.transient else "ok"
        for roll in itertools.islice(rolls(faults), calls)
    ]


async def test_a_seed_replays_the_server_side_layers_dice() -> None:
    faults = FaultSettings(transient=0.3, garbage=0.3, seed=3)
    runs = []
    for _ in range(2):
        async with opened(Probe().target(faults)) as client:
            runs.append(await _outcomes(client, 20))
    assert runs[0] == runs[1] == _predicted(faults, 20)
    assert {"ok", "tool_error", "garbage"} <= set(runs[0])
    # The server-side layer (garbage needs a wire there, so without it) strikes from the same dice.
    transient = FaultSettings(transient=0.3, seed=3)
    faulty = Probe()
    faulty.server.middleware.append(FaultLayer(transient, source="probe"))
    async with Client(faulty.server, read_timeout_seconds=BOUND_S) as client:
        assert await _outcomes(client, 20) == _predicted(transient, 20)


async def test_a_reopened_session_goes_on_with_the_dice() -> None:
    """Through the subagents' connections: a crash, a reopen, and the sequence continues."""
    faults = FaultSettings(crash=0.5, seed=3)
    probe = Probe()
    outcomes = []
    async with Connections.opened({"probe": probe.target(faults)}) as connections:
        connection = connections["probe"]
        for _ in range(4):
            client, generation = await connection.session(timeout_s=BOUND_S)
            try:
                await connection.send(
                    client, ToolCall("probe", "echo", {"text": "hi"}, 1), timeout_s=BOUND_S, meta=None
                )
                outcomes.append(0)
            except MCPError as exc:
                outcomes.append(1)
                assert classify_exception(exc).reopen
                await connection.reopen(generation)
        assert connection.opened == 1 + sum(outcomes[:-1])
    assert outcomes == _crashes(faults, 4)
    assert outcomes != _crashes(faults, 1) * 4  # not every session starting the sequence afresh


@pytest.mark.parametrize("spec", ["truncate=0.1", "unknown_id=1", "die_at=handshake"])
def test_wire_level_faults_are_refused(spec: str) -> None:
    name = spec.partition("=")[0]
    with pytest.raises(ValueError, match=f"the {name} fault cannot be injected client side"):
        with_client_faults(lambda: "http://127.0.0.1:1/mcp", FaultSettings.parse(spec))
