"""The fleet with real processes: up, status, kill one, ask, heal, ask, down, nothing left behind."""

from __future__ import annotations

import asyncio
import json
import socket
import stat
import time
from collections.abc import Callable, Iterator
from pathlib import Path

import httpx2
import psutil
import pytest

from sources.catalogue import SOURCES
from sources.processes import serve
from sources.processes.fleet import Fleet
from sources.settings import SourceSettings
from tests.conftest import (
    DEFAULT_FLEET_PORTS,
    DefaultPortsHeld,
    HttpSource,
    default_ports_held,
    free_ports,
    private_settings,
)
from tests.test_cli import research
from tests.test_shutdown import hung_http_call, open_session, open_stream

pytestmark = pytest.mark.subprocess

QUERY = (
    "Investigate CUST-00042: recent orders, open tickets, and whether a £45 refund on ORD-10031 is allowed"
)


FLEET = (*SOURCES, "coordinator")  # the sources and the coordinator service


@pytest.fixture
def settings(settings: SourceSettings, tmp_path: Path) -> SourceSettings:
    """The session's settings with a data folder of this test's own: its fleet's state, secret and logs."""
    return private_settings(settings, tmp_path / "data")


@pytest.fixture
def fleet(settings: SourceSettings) -> Iterator[list[str]]:
    """`--port` options putting every member of a fleet on a free port; the fleet is stopped after."""
    ports = [f"--port={name}={port}" for name, port in zip(FLEET, free_ports(len(FLEET)), strict=True)]
    yield ports
    Fleet(settings).down()


@pytest.fixture
def held() -> Iterator[DefaultPortsHeld]:
    """The default ports (8100-8105) held by someone else the whole test."""
    with default_ports_held() as holding:
        yield holding


def ask(settings: SourceSettings) -> dict:
    done = research(settings, "ask", QUERY, "--transport", "http", "--json", "--deadline", "20")
    assert done.returncode in (0, 3), done.stderr
    return json.loads(done.stdout)


@pytest.mark.usefixtures("testing_environment")  # a killed source's task spends every retry
def test_the_fleet_lifecycle_with_a_kill_and_a_heal(settings: SourceSettings, fleet: list[str]) -> None:
    up = research(settings, "sources", "up", "--chaos", *fleet)
    assert up.returncode == 0, up.stderr
    members = Fleet(settings).members()
    assert set(members) == set(FLEET) and all(member.alive() for member in members.values())
    assert stat.S_IMODE(Fleet(settings).secret_file.stat().st_mode) == 0o600  # the fleet's secret: owner only
    status = research(settings, "sources", "status")
    assert status.returncode == 0 and status.stdout.count(" ok ") == 6

    before = ask(settings)
    assert before["status"] == "complete" and {task["state"] for task in before["tasks"]} == {"ok"}

    for victim in ("tickets", "customers"):
        killed = research(settings, "chaos", "kill", victim)
        assert killed.returncode == 0 and "killed" in killed.stdout
        report = ask(settings)
        gap, *blocked = report["gaps"]  # the killed source's gap first, in plan order
        assert (
            gap["source"] == victim
            and gap["errorCategory"] == "transient"
            and gap["next_step"] == "retry later"
        )
        assert gap["attempted_query"]["tool"] in {"search_tickets", "customer_lookup"}
        if victim == "tickets":  # four sources' findings plus one annotated gap
            assert blocked == [] and {f["source"] for f in report["findings"]} == set(SOURCES) - {victim}
        else:  # the tasks about the customer wait for its lookup: blocked by it, each gap naming it
            assert {g["task"] for g in blocked} == {"orders", "tickets"}
            assert all(g["state"] == "blocked" and g["blocked_by"] == "customer" for g in blocked)
            assert {f["source"] for f in report["findings"]} == {"billing", "kb"}
        healed = research(settings, "chaos", "heal", victim)
        assert healed.returncode == 0 and "healthy" in healed.stdout
        again = ask(settings)  # the healed source is used again without restarting anything
        assert again["status"] == "complete"

    # Chaos commands compose: each adds its fault to those in force, and says what is in force now.
    assert research(settings, "chaos", "slow", "orders", "--ms", "300").returncode == 0
    flaky = research(settings, "chaos", "flaky", "orders", "--rate", "0.3")
    assert flaky.returncode == 0 and "orders: faults now latency=300ms,transient=0.3" in flaky.stdout
    assert chaos_status(settings)["orders"]["faults"] == "latency=300ms,transient=0.3"
    table = research(settings, "chaos", "status")
    assert table.returncode == 0 and "latency=300ms,transient=0.3" in table.stdout
    assert research(settings, "chaos", "heal", "orders").returncode == 0
    assert chaos_status(settings)["orders"]["faults"] == ""  # heal clears them all

    # `heal --all`: the dead restarted where they were, the live ones' faults cleared, a line each.
    assert research(settings, "chaos", "slow", "kb", "--ms", "50").returncode == 0
    before = Fleet(settings).members()
    for victim in ("tickets", "coordinator"):
        assert research(settings, "chaos", "kill", victim).returncode == 0
    assert {name for name, row in chaos_status(settings).items() if not row["alive"]} == {
        "tickets",
        "coordinator",
    }
    healed = research(settings, "chaos", "heal", "--all")
    assert healed.returncode == 0, healed.stderr
    lines = healed.stdout.splitlines()
    assert [line.split(":")[0] for line in lines] == list(before)
    assert {line.split(":")[0] for line in lines if "restarted" in line} == {"tickets", "coordinator"}
    after = Fleet(settings).members()
    assert all(member.alive() for member in after.values())
    assert {name for name in after if after[name].pid != before[name].pid} == {"tickets", "coordinator"}
    status = chaos_status(settings)
    assert all(row["alive"] and row["faults"] in ("", None) for row in status.values())
    assert status["kb"]["faults"] == "" and status["coordinator"]["faults"] is None
    assert ask(settings)["status"] == "complete"  # the restarted service answers again

    slowed = research(settings, "chaos", "hang", "kb")
    assert slowed.returncode == 0 and "hang=1" in slowed.stdout
    hung = research(settings, "ask", QUERY, "--transport", "http", "--json", "--deadline", "3", "--seed", "1")
    report = json.loads(hung.stdout)
    (gap,) = report["gaps"]
    assert gap["source"] == "kb" and gap["state"] in ("deadline", "escalated")
    assert research(settings, "chaos", "heal", "kb").returncode == 0

    # `down` with a call hung in kb and a client's SSE stream open: still nothing left behind.
    assert research(settings, "chaos", "hang", "kb").returncode == 0
    kb = Fleet(settings).members()["kb"]
    session = open_session(kb.url)
    call = {"name": "search_policies", "arguments": {"query": "refunds"}}
    pids = [member.pid for member in Fleet(settings).members().values()]
    with hung_http_call(kb.port, session, call), open_stream(kb.port, session):
        down = research(settings, "sources", "down")
    assert down.returncode == 0 and all(name in down.stdout for name in FLEET)
    assert not any(
        psutil.pid_exists(pid) and psutil.Process(pid).status() != psutil.STATUS_ZOMBIE for pid in pids
    )
    assert not Fleet(settings).state_file.exists()


@pytest.mark.usefixtures("testing_environment")
def test_a_moved_fleet_is_dialled_where_it_moved_while_others_hold_the_default_ports(
    settings: SourceSettings, fleet: list[str], held: DefaultPortsHeld
) -> None:
    """`sources up --port ...` with 8100-8105 taken: the coordinator service researches on the fleet's
    own sources, so a source killed is the one gap, and nothing ever dials a default port (where a
    fleet of someone else's would answer, a source killed here looked alive and billing refused this
    fleet's credentials)."""
    up = research(settings, "sources", "up", "--chaos", *fleet)
    assert up.returncode == 0, up.stderr
    moved = {member.port for member in Fleet(settings).members().values()}
    assert len(moved) == len(FLEET) and not moved & set(DEFAULT_FLEET_PORTS)

    def asked() -> dict:
        done = research(
            settings, "ask", QUERY, "--transport", "http", "--json", "--deadline", "20",
        )  # fmt: skip
        assert done.returncode in (0, 3), done.stderr
        assert "researching in this process" not in done.stderr, done.stderr  # the service answered
        return json.loads(done.stdout)

    before = asked()
    assert before["status"] == "complete", before["gaps"]
    assert {task["state"] for task in before["tasks"]} == {"ok"}, before["tasks"]

    killed = research(settings, "chaos", "kill", "tickets")
    assert killed.returncode == 0, killed.stderr
    after = asked()
    states = {task["id"]: task["state"] for task in after["tasks"]}
    assert states.pop("tickets") != "ok" and set(states.values()) == {"ok"}, after["tasks"]
    (gap,) = after["gaps"]
    assert gap["source"] == "tickets" and gap["errorCategory"] == "transient", gap
    assert {finding["source"] for finding in after["findings"]} == set(SOURCES) - {"tickets"}
    assert "signature" not in json.dumps(after), after["gaps"]  # no other fleet's billing refused us
    # The service opened each session where the fleet has the source, and nothing of this fleet's
    # dialled a default port (the ones this test holds; another process may hold the others).
    service = Fleet(settings).members()["coordinator"]
    dialled = httpx2.get(f"{service.base}/health", timeout=5).json()["dialled"]
    assert dialled == {source: [url] for source, url in Fleet(settings).urls().items()}
    assert held.dialled_from(settings.data_dir) == []


def chaos_status(settings: SourceSettings) -> dict[str, dict]:
    """`research chaos status --json`, by member."""
    done = research(settings, "chaos", "status", "--json")
    assert done.returncode == 0, done.stderr
    return {row["name"]: row for row in json.loads(done.stdout)}


def test_chaos_without_a_fleet_or_a_target_says_what_to_do(settings: SourceSettings) -> None:
    status = research(settings, "chaos", "status")
    assert (
        status.returncode == 1
        and status.stderr.strip() == "no fleet: `research sources up --chaos` starts one"
    )
    heal = research(settings, "chaos", "heal")
    assert heal.returncode == 2 and heal.stderr.strip().splitlines() == [
        "error: name a source to heal, or pass --all to heal the whole fleet"
    ]
    healed = research(settings, "chaos", "heal", "--all")
    assert healed.returncode == 1 and len(healed.stderr.strip().splitlines()) == 1
    assert "Traceback" not in healed.stderr + heal.stderr + status.stderr


def test_a_taken_port_is_reported(settings: SourceSettings, fleet: list[str]) -> None:
    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        port = taken.getsockname()[1]
        ports = [*(option for option in fleet if not option.startswith("--port=kb=")), f"--port=kb={port}"]
        up = research(settings, "sources", "up", *ports)
    assert up.returncode == 1 and f"port {port} on 127.0.0.1 is already in use" in up.stderr
    assert Fleet(settings).members() == {}  # the sources already started were stopped again


def test_run_time_faults_need_chaos_control(settings: SourceSettings, fleet: list[str]) -> None:
    assert research(settings, "sources", "up", *fleet).returncode == 0
    refused = research(settings, "chaos", "hang", "kb")
    assert refused.returncode == 1 and "chaos control" in refused.stderr


def test_every_connection_a_source_accepts_sends_at_once() -> None:
    """Nagle's algorithm is off on each accepted connection: a response is two writes (headers, body),
    and with it on the body waited ~40 ms for the client's delayed ACK. uvicorn serves our listening
    socket through asyncio's ``create_server(sock=...)``, which turns Nagle off only on sockets whose
    proto is TCP, so the test drives that very call (asyncio here is the mechanism under test)."""
    listener = serve.bind_loopback(0)

    async def accept_one() -> int:
        accepted: asyncio.Future[int] = asyncio.get_running_loop().create_future()

        class Accepted(asyncio.Protocol):
            def connection_made(self, transport: asyncio.BaseTransport) -> None:
                sock = transport.get_extra_info("socket")
                accepted.set_result(sock.getsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY))
                transport.close()

        server = await asyncio.get_running_loop().create_server(Accepted, sock=listener)
        async with server:
            _, writer = await asyncio.wait_for(asyncio.open_connection(*listener.getsockname()), 5)
            nodelay = await asyncio.wait_for(accepted, 5)
            writer.close()
        return nodelay

    assert asyncio.run(accept_one()) == 1


def _open_session(url: str) -> httpx2.Response:
    """Open a session of the stateful protocol (as the TypeScript SDK does) and abandon it."""
    initialize = {
        "jsonrpc": "2.0", "id": 1, "method": "initialize",
        "params": {"protocolVersion": "2025-06-18", "capabilities": {}, "clientInfo": {"name": "t", "version": "1"}},
    }  # fmt: skip
    headers = {"Accept": "application/json, text/event-stream", "Content-Type": "application/json"}
    return httpx2.post(url, json=initialize, headers=headers, timeout=10)


@pytest.mark.subprocess
def test_sessions_are_capped_and_idle_ones_end(http_source: Callable[..., HttpSource]) -> None:
    running = http_source("orders", RESEARCH_HTTP_MAX_SESSIONS="2", RESEARCH_HTTP_SESSION_IDLE_S="1")
    assert [_open_session(running.url).status_code for _ in range(2)] == [200, 200]
    refused = _open_session(running.url)
    assert refused.status_code == 503 and refused.json()["error"]["message"] == "Too many open sessions"
    # The SDK ends idle sessions on the server's own clock: poll, bounded, until the room is back.
    deadline = time.monotonic() + 15
    while (admitted := _open_session(running.url)).status_code == 503 and time.monotonic() < deadline:
        time.sleep(0.2)
    assert admitted.status_code == 200 and admitted.headers["mcp-session-id"]


@pytest.mark.parametrize(
    ("variable", "value"), [("RESEARCH_HTTP_MAX_SESSIONS", "0"), ("RESEARCH_HTTP_SESSION_IDLE_S", "-5")]
)
def test_session_bounds_must_be_positive(variable: str, value: str) -> None:
    with pytest.raises(ValueError, match=variable):
        SourceSettings.from_environment({variable: value})
