"""Sources stop quickly and quietly: at the end of their input over stdio, on SIGTERM over HTTP, and
when a client hangs up mid-call (the source's log gets one line, never a traceback).

Each source here is a real process spoken to in raw JSON-RPC or raw HTTP, so that the test controls
exactly which end of which stream closes, and when.
"""

from __future__ import annotations

import json
import os
import re
import select
import signal
import socket
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx2
import pytest

from sources.processes.serve import READY_PREFIX
from sources.settings import SourceSettings
from tests.conftest import PROJECT_ROOT, child_environment

pytestmark = pytest.mark.subprocess

EXIT_BOUND_S = 10.0  # a loose bound on every wait for a process; the benchmark has the figures
START_BOUND_S = 30.0  # a source starting on a busy machine
HUNG_CALL = {"name": "customer_lookup", "arguments": {"identifier": "CUST-00042"}}
INITIALIZE = {
    "protocolVersion": "2025-06-18",
    "capabilities": {},
    "clientInfo": {"name": "test-shutdown", "version": "1"},
}


def _request(request_id: int, method: str, params: dict[str, Any] | None = None) -> dict[str, Any]:
    return {"jsonrpc": "2.0", "id": request_id, "method": method, **({"params": params} if params else {})}


class _Lines:
    """JSON-RPC messages read one line at a time from a raw descriptor, each read bounded."""

    def __init__(self, fd: int) -> None:
        self.fd = fd
        self.buffer = b""

    def reply(self, request_id: int, within: float = EXIT_BOUND_S) -> dict[str, Any]:
        deadline = time.monotonic() + within
        while True:
            while b"\n" not in self.buffer:
                ready, _, _ = select.select([self.fd], [], [], max(0.0, deadline - time.monotonic()))
                assert ready, f"no answer to request {request_id} within {within} s"
                chunk = os.read(self.fd, 65536)
                assert chunk, f"the source closed its output before answering request {request_id}"
                self.buffer += chunk
            line, _, self.buffer = self.buffer.partition(b"\n")
            message = json.loads(line)
            if message.get("id") == request_id:
                return message


class HungStdioSource:
    """A stdio source with every call hung, over pipes (as the SDK spawns it) or a socket pair."""

    def __init__(self, settings: SourceSettings, wire: str) -> None:
        env = {**os.environ, **child_environment(settings, RESEARCH_FAULTS="hang=1")}
        command = [sys.executable, "-m", "sources.customers"]
        self.wire = wire
        if wire == "pipe":
            self.process = subprocess.Popen(
                command, env=env, cwd=PROJECT_ROOT, stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                stderr=subprocess.PIPE,
            )  # fmt: skip
            assert self.process.stdout is not None
            self.lines = _Lines(self.process.stdout.fileno())
        else:
            ours, theirs = socket.socketpair()
            with theirs:
                self.process = subprocess.Popen(
                    command, env=env, cwd=PROJECT_ROOT, stdin=theirs, stdout=theirs, stderr=subprocess.PIPE
                )  # fmt: skip
            self.socket = ours
            self.lines = _Lines(ours.fileno())

    def send(self, message: dict[str, Any]) -> None:
        data = json.dumps(message).encode() + b"\n"
        if self.wire == "pipe":
            assert self.process.stdin is not None
            self.process.stdin.write(data)
            self.process.stdin.flush()
        else:
            self.socket.sendall(data)

    def handshake(self) -> None:
        self.send(_request(1, "initialize", INITIALIZE))
        assert "result" in self.lines.reply(1, within=START_BOUND_S)
        self.send({"jsonrpc": "2.0", "method": "notifications/initialized"})

    def hang_a_call(self) -> None:
        """Handshake, then a call that hangs; a ping answered after it shows the call is in flight."""
        self.handshake()
        self.send(_request(2, "tools/call", HUNG_CALL))
        self.send(_request(3, "ping"))
        assert self.lines.reply(3)["result"] == {}

    def close_input(self) -> None:
        """What a client does to end the session: close the source's stdin, keep reading."""
        if self.wire == "pipe":
            assert self.process.stdin is not None
            self.process.stdin.close()
        else:
            self.socket.shutdown(socket.SHUT_WR)

    def hang_up(self) -> None:
        """What a client that dies does: both ends close, the source's next write has no reader."""
        if self.wire == "pipe":
            assert self.process.stdin is not None and self.process.stdout is not None
            self.process.stdin.close()
            self.process.stdout.close()
        else:
            self.socket.close()

    def wait(self) -> tuple[int, str]:
        try:
            status = self.process.wait(timeout=EXIT_BOUND_S)
        except subprocess.TimeoutExpired:
            self.process.kill()
            self.process.wait(timeout=EXIT_BOUND_S)
            pytest.fail(f"the source did not exit within {EXIT_BOUND_S} s of its client hanging up")
        assert self.process.stderr is not None
        return status, self.process.stderr.read().decode(errors="replace")

    def stop(self) -> None:
        if self.process.poll() is None:
            self.process.kill()
            self.process.wait(timeout=EXIT_BOUND_S)
        for stream in (self.process.stdin, self.process.stdout, self.process.stderr):
            if stream is not None:
                stream.close()
        if self.wire == "socket":
            self.socket.close()


# Pipes, as the Python SDK spawns a source; a socket pair, as Node (the TypeScript SDK) does.
@pytest.fixture(params=["pipe", "socket"])
def hung_stdio_source(request: pytest.FixtureRequest, settings: SourceSettings) -> Iterator[HungStdioSource]:
    source = HungStdioSource(settings, request.param)
    yield source
    source.stop()


def test_a_hung_stdio_source_exits_at_the_end_of_its_input(hung_stdio_source: HungStdioSource) -> None:
    hung_stdio_source.hang_a_call()
    hung_stdio_source.close_input()
    status, stderr = hung_stdio_source.wait()
    assert status == 0 and "Traceback" not in stderr and len(stderr.splitlines()) <= 1, stderr


def test_a_hung_stdio_source_whose_client_died_exits_quietly(hung_stdio_source: HungStdioSource) -> None:
    hung_stdio_source.hang_a_call()
    hung_stdio_source.hang_up()
    status, stderr = hung_stdio_source.wait()
    assert status == 0 and "Traceback" not in stderr and len(stderr.splitlines()) <= 1, stderr


# --- HTTP -------------------------------------------------------------------------------------------

_LOG_RECORD = re.compile(r"^\d{4}-\d\d-\d\d \d\d:\d\d:\d\d,\d+ [A-Z]+ customers ")


class HungHttpSource:
    """An HTTP source with every call hung, its log in a file the test reads."""

    def __init__(self, settings: SourceSettings, log: Path) -> None:
        self.log = log
        env = {**os.environ, **child_environment(settings, RESEARCH_FAULTS="hang=1")}
        with log.open("w") as handle:
            self.process = subprocess.Popen(
                [sys.executable, "-m", "sources.customers", "--http", "--port", "0"],
                env=env, cwd=PROJECT_ROOT, stdout=subprocess.DEVNULL, stderr=handle,
            )  # fmt: skip
        deadline = time.monotonic() + START_BOUND_S
        while READY_PREFIX not in (text := log.read_text()):
            assert self.process.poll() is None, text
            assert time.monotonic() < deadline, f"not ready within {START_BOUND_S} s:\n{text}"
            time.sleep(0.05)  # a bounded wait for a process this test started
        self.url = json.loads(text.split(READY_PREFIX, 1)[1].splitlines()[0])["url"]
        self.port = int(self.url.rsplit(":", 1)[1].split("/")[0])

    def records(self) -> list[str]:
        """The log after the ready line."""
        return self.log.read_text().split("\n", 1)[1].splitlines()

    def stop(self) -> None:
        if self.process.poll() is None:
            self.process.kill()
            self.process.wait(timeout=EXIT_BOUND_S)


@pytest.fixture
def hung_http_source(settings: SourceSettings, tmp_path: Path) -> Iterator[HungHttpSource]:
    source = HungHttpSource(settings, tmp_path / "customers.log")
    yield source
    source.stop()


def open_session(url: str) -> str:
    headers = {"Accept": "application/json, text/event-stream", "Content-Type": "application/json"}
    opened = httpx2.post(url, json=_request(1, "initialize", INITIALIZE), headers=headers, timeout=10)
    session = opened.headers["mcp-session-id"]
    initialized = {"jsonrpc": "2.0", "method": "notifications/initialized"}
    headers = {**headers, "mcp-session-id": session, "mcp-protocol-version": "2025-06-18"}
    assert httpx2.post(url, json=initialized, headers=headers, timeout=10).status_code == 202
    return session


def raw_http(port: int, session: str | None, body: bytes, *, length: int | None = None) -> socket.socket:
    """A POST to /mcp on a raw socket, left open; ``length`` larger than the body leaves it unfinished."""
    head = (
        f"POST /mcp HTTP/1.1\r\nHost: 127.0.0.1:{port}\r\nContent-Type: application/json\r\n"
        f"Accept: application/json, text/event-stream\r\nmcp-protocol-version: 2025-06-18\r\n"
        f"Content-Length: {len(body) if length is None else length}\r\n"
    )
    if session is not None:
        head += f"mcp-session-id: {session}\r\n"
    connection = socket.create_connection(("127.0.0.1", port), timeout=EXIT_BOUND_S)
    connection.sendall(head.encode() + b"\r\n" + body)
    return connection


def hung_http_call(port: int, session: str, call: dict[str, Any] = HUNG_CALL) -> socket.socket:
    """A tools/call that hangs, its response under way (the SSE headers have come), the socket open."""
    connection = raw_http(port, session, json.dumps(_request(2, "tools/call", call)).encode())
    assert connection.recv(4096).startswith(b"HTTP/1.1 200")
    return connection


def open_stream(port: int, session: str) -> socket.socket:
    """The session's standalone SSE stream (GET /mcp), which never ends on its own."""
    connection = socket.create_connection(("127.0.0.1", port), timeout=EXIT_BOUND_S)
    connection.sendall(
        f"GET /mcp HTTP/1.1\r\nHost: 127.0.0.1:{port}\r\nAccept: text/event-stream\r\n"
        f"mcp-session-id: {session}\r\nmcp-protocol-version: 2025-06-18\r\n\r\n".encode()
    )
    assert connection.recv(4096).startswith(b"HTTP/1.1 200")
    return connection


def test_a_client_that_hangs_up_mid_request_is_one_log_line(hung_http_source: HungHttpSource) -> None:
    session = open_session(hung_http_source.url)
    body = json.dumps(_request(2, "tools/call", HUNG_CALL)).encode()
    raw_http(hung_http_source.port, session, body[:20], length=len(body)).close()  # gone before its body
    hung_http_call(hung_http_source.port, session).close()  # gone while its call hangs
    deadline = time.monotonic() + EXIT_BOUND_S
    while not hung_http_source.records() and time.monotonic() < deadline:
        time.sleep(0.05)  # the log line is written as the server notices; a bounded wait for it
    assert open_session(hung_http_source.url)  # still serving
    hung_http_source.process.send_signal(signal.SIGTERM)
    hung_http_source.process.wait(timeout=EXIT_BOUND_S)
    records = hung_http_source.records()
    assert "Traceback" not in hung_http_source.log.read_text(), hung_http_source.log.read_text()[-3000:]
    assert all(_LOG_RECORD.match(line) for line in records), records  # one line per record
    (hung_up,) = [line for line in records if "ClientDisconnect" in line]
    assert "WARNING" in hung_up and "the client hung up" in hung_up


def test_sigterm_stops_a_source_with_a_hung_call_and_an_open_stream(hung_http_source: HungHttpSource) -> None:
    session = open_session(hung_http_source.url)
    with hung_http_call(hung_http_source.port, session), open_stream(hung_http_source.port, session):
        hung_http_source.process.send_signal(signal.SIGTERM)
        try:
            status = hung_http_source.process.wait(timeout=EXIT_BOUND_S)
        except subprocess.TimeoutExpired:
            pytest.fail(f"the source was still serving {EXIT_BOUND_S} s after SIGTERM")
    assert status == -signal.SIGTERM  # it ended on the signal, by itself
    assert "Traceback" not in hung_http_source.log.read_text(), hung_http_source.log.read_text()[-3000:]
    assert all(_LOG_RECORD.match(line) for line in hung_http_source.records()), hung_http_source.records()
