"""Shared fixtures: one generated world per test session, sources served in memory or as processes."""

from __future__ import annotations

import contextlib
import dataclasses
import json
import os
import selectors
import socket
import subprocess
import sys
import threading
from collections.abc import Callable, Iterable, Iterator, Mapping
from pathlib import Path
from typing import Any, cast

import anyio
import psutil
import pytest
from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey
from mcp import Client, StdioServerParameters
from mcp.server import MCPServer
from mcp.types import CallToolResult
from opentelemetry import trace
from opentelemetry.sdk.resources import Resource
from opentelemetry.sdk.trace import TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter

from coordinator.ask_service import DEFAULT_PORT as SERVICE_PORT
from sources import billing, customers, kb, orders, tickets
from sources.catalogue import DEFAULT_PORTS
from sources.processes.serve import READY_PREFIX
from sources.security.auth import CREDENTIAL_META_KEY, issue_credential
from sources.security.keys import private_pem, public_pem
from sources.settings import SourceSettings
from sources.world import ensure_world
from subagents.policy import TESTING_ENV
from tests.fake_messages_api import Conversations, FakeMessagesApi
from traces.client_status import ClientSpanStatus

# The tests' coordinator key: it signs every credential the tests send; sources get its public half.
TEST_KEY = Ed25519PrivateKey.generate()
MODULES = {"customers": customers, "orders": orders, "billing": billing, "tickets": tickets, "kb": kb}
CALL_TIMEOUT = 10.0
PROJECT_ROOT = Path(__file__).resolve().parent.parent

# `research ARGS...` as a process that a test interrupts with SIGINT (Ctrl-C), started with SIGINT at
# its default. A shell that starts the suite as a background job (`make test &` in a script) ignores
# SIGINT in it, and every child inherits that; `research`, like any program, keeps an ignored SIGINT
# ignored (the shell's choice: a background job is not stopped by the terminal's Ctrl-C), so the test
# resets it in the one process it means to interrupt: a launcher that execs the command (the same
# pid), not `preexec_fn`, which is unsafe in a process with threads.
RESEARCH_INTERRUPTIBLE = [
    sys.executable, "-c",
    "import os, signal, sys; signal.signal(signal.SIGINT, signal.SIG_DFL); os.execv(sys.argv[1], sys.argv[1:])",
    sys.executable, "-c", "from coordinator.cli import app; app()",
]  # fmt: skip
# The fleet's default ports: the coordinator service's and the five sources' (8100-8105).
DEFAULT_FLEET_PORTS = (SERVICE_PORT, *DEFAULT_PORTS.values())


# For a run through the CLI in which a task spends every retry on a source that stays down, and which
# asserts what the retries led to, never how long they slept: every back-off 0 s (subagents.policy).
TESTING = {TESTING_ENV: "1"}


@pytest.fixture
def testing_environment(monkeypatch: pytest.MonkeyPatch) -> None:
    """``TESTING`` in this process's environment, so in every process the test starts."""
    for name, value in TESTING.items():
        monkeypatch.setenv(name, value)


@pytest.fixture
def anyio_backend() -> str:
    return "asyncio"


@pytest.fixture(scope="session")
def settings(tmp_path_factory: pytest.TempPathFactory) -> SourceSettings:
    """Settings for a private world: no kb warm-up and a generous rate limit unless a test asks otherwise."""
    data_dir = tmp_path_factory.mktemp("data")
    result = SourceSettings(
        data_dir=data_dir,
        signing_key_pem=private_pem(TEST_KEY),
        public_key_pem=public_pem(TEST_KEY),  # what in-memory sources verify with
        kb_warmup_ms=0,
        tickets_rate_per_second=1000,
        tickets_burst=1000,
    )
    ensure_world(data_dir, result.seed)
    return result


@pytest.fixture
def server_for(settings: SourceSettings) -> Callable[..., MCPServer]:
    """A fresh in-memory server of one source; keyword arguments go to its ``create_server``."""

    def make(source: str, **options: Any) -> MCPServer:
        return MODULES[source].create_server(options.pop("settings", settings), **options)

    return make


def credential(*scopes: str, source: str, subject: str = "research-agent", **options: Any) -> dict[str, str]:
    """The ``_meta`` of a call to ``source`` made with a credential holding these scopes."""
    return {CREDENTIAL_META_KEY: issue_credential(TEST_KEY, subject, scopes, source=source, **options)}


async def call(
    target: MCPServer | Client, tool: str, arguments: dict[str, Any], meta: dict[str, Any] | None = None
) -> CallToolResult:
    """One tool call through the mcp Client, bounded in time."""
    with anyio.fail_after(CALL_TIMEOUT):
        if isinstance(target, Client):
            return await target.call_tool(tool, arguments, read_timeout_seconds=CALL_TIMEOUT, meta=meta)
        async with Client(target, read_timeout_seconds=CALL_TIMEOUT) as client:
            return await client.call_tool(tool, arguments, read_timeout_seconds=CALL_TIMEOUT, meta=meta)


def wire(result: CallToolResult) -> dict[str, Any]:
    """The result's JSON as a text-only client reads it, checked against the structured copy.

    An error has none: it travels as text only, so that clients validating structured content
    against the tool's output schema (a page) receive it as data.
    """
    assert len(result.content) == 1
    payload = json.loads(result.content[0].text)  # type: ignore[union-attr]
    assert result.structured_content == (None if result.is_error else payload)
    return payload


def empty_message(result: CallToolResult) -> str:
    """The message of a valid empty result, once checked to be one: a success with no records."""
    payload = wire(result)
    assert result.is_error is False, payload
    assert payload == {"resultCount": 0, "results": [], "message": payload.get("message")}, payload
    return payload["message"]


def child_environment(settings: SourceSettings, **extra: str) -> dict[str, str]:
    env = {**settings.child_environment(), "PYTHONPATH": str(PROJECT_ROOT), **extra}
    return env


def stdio_parameters(settings: SourceSettings, source: str, *args: str, **env: str) -> StdioServerParameters:
    return StdioServerParameters(
        command=sys.executable,
        args=["-m", f"sources.{source}", *args],
        env=child_environment(settings, **env),
        cwd=str(PROJECT_ROOT),
    )


class HttpSource:
    """A source running as its own process, serving streamable HTTP on a free loopback port.

    ``wait=False`` returns once the process is started; ``ready()`` then waits for it, so that
    several sources started one after the other import side by side.
    """

    def __init__(
        self, settings: SourceSettings, source: str, *args: str, wait: bool = True, **env: str
    ) -> None:
        port = [] if "--port" in args else ["--port", "0"]
        self.process = subprocess.Popen(
            [sys.executable, "-m", f"sources.{source}", "--http", *port, *args],
            env={**os.environ, **child_environment(settings, **env)},
            cwd=PROJECT_ROOT,
            stdout=subprocess.DEVNULL,
            stderr=subprocess.PIPE,
            text=True,
        )
        self.url, self.port = "", 0
        if wait:
            self.ready()

    def ready(self) -> HttpSource:
        """Wait until the source says it serves; its URL and port are known from then on."""
        if not self.url:
            self.url = self._await_ready()
            self.port = int(self.url.split(":")[2].split("/")[0])
        return self

    def _await_ready(self) -> str:
        assert self.process.stderr is not None
        # readline blocks until the ready line or EOF; the surrounding pytest timeout bounds it.
        for line in self.process.stderr:
            if line.startswith(READY_PREFIX):
                # Keep reading its log: a source that logs a lot would stall on a full pipe.
                threading.Thread(target=self.process.stderr.read, daemon=True).start()
                return json.loads(line[len(READY_PREFIX) :])["url"]
        raise AssertionError(f"source exited before it was ready (status {self.process.wait(timeout=5)})")

    def stop(self) -> None:
        self.process.kill()
        self.process.wait(timeout=10)
        if self.process.stderr is not None:
            self.process.stderr.close()


@pytest.fixture
def http_source(settings: SourceSettings) -> Iterator[Callable[..., HttpSource]]:
    started: list[HttpSource] = []

    def start(source: str, *args: str, wait: bool = True, **env: str) -> HttpSource:
        running = HttpSource(settings, source, *args, wait=wait, **env)
        started.append(running)
        return running

    yield start
    for running in started:
        running.stop()


@contextlib.contextmanager
def http_sources(
    settings: SourceSettings, sources: Iterable[str], environments: Mapping[str, Mapping[str, str]]
) -> Iterator[dict[str, HttpSource]]:
    """Several sources over HTTP, started at once (they import side by side), stopped at the end;
    ``environments``: the variables a source is started with, by source."""
    started: dict[str, HttpSource] = {}
    try:
        for source in sources:
            started[source] = HttpSource(settings, source, wait=False, **environments.get(source, {}))
        for running in started.values():
            running.ready()
        yield started
    finally:
        for running in started.values():
            running.stop()


def free_ports(count: int) -> list[int]:
    """``count`` different loopback ports that nothing listens on now, bound by the system (port 0) and
    handed over: for a fleet, whose `--port` takes a number. Never one of the fleet's defaults
    (8100-8105), which another program may hold."""
    with contextlib.ExitStack() as held:  # all bound at once: different ports; closed on the way out
        ports: list[int] = []
        while len(ports) < count:
            probe = held.enter_context(socket.socket())
            probe.bind(("127.0.0.1", 0))
            if (port := int(probe.getsockname()[1])) not in DEFAULT_FLEET_PORTS:
                ports.append(port)
        return ports


def private_settings(settings: SourceSettings, data_dir: Path) -> SourceSettings:
    """``settings`` with a data folder of its own (its world generated there): for a test that starts
    a fleet, whose state, secret and logs live in the data folder."""
    ensure_world(data_dir, settings.seed)
    return dataclasses.replace(settings, data_dir=data_dir)


@dataclasses.dataclass(frozen=True)
class Dial:
    """A connection to a default port: which, and the process that made it with its data folder
    (``RESEARCH_DATA_DIR``), read while it was connected; None where it could not be known."""

    port: int
    pid: int | None
    data_dir: str | None


class DefaultPortsHeld:
    """The fleet's default ports (8100-8105) held as another program on this machine holds them: each
    one this process can bind listens, and each connection to it is recorded (who dialled) and closed
    at once, never answered; one that another process holds already (a fleet of the user's, another
    copy of the suite) stays held by it. A test starting a fleet on ports of its own then shows that
    none of its processes dials a default port (``dialled_from``)."""

    def __init__(self) -> None:
        self.dials: list[Dial] = []
        self.listeners: list[socket.socket] = []
        self._stopped = threading.Event()
        for port in DEFAULT_FLEET_PORTS:
            try:
                listener = socket.create_server(("127.0.0.1", port))
            except OSError:  # in use already: held by another process
                continue
            listener.setblocking(False)
            self.listeners.append(listener)
        self._thread = threading.Thread(target=self._hold, daemon=True)
        self._thread.start()

    def dialled_from(self, data_dir: Path) -> list[Dial]:
        """The dials made by processes of this data folder, or by processes that could not be told."""
        return [dial for dial in self.dials if dial.data_dir in (None, str(data_dir))]

    def _hold(self) -> None:
        with selectors.DefaultSelector() as selector:
            for listener in self.listeners:
                selector.register(listener, selectors.EVENT_READ)
            while not self._stopped.is_set():
                for key, _ in selector.select(timeout=0.05):
                    listener = cast("socket.socket", key.fileobj)
                    with contextlib.suppress(OSError):
                        accepted, peer = listener.accept()
                        with accepted:  # closed once the dialler is known: refused, in effect
                            self.dials.append(_dial(int(listener.getsockname()[1]), peer))

    def close(self) -> None:
        self._stopped.set()
        self._thread.join(timeout=5)
        for listener in self.listeners:
            listener.close()


def _dial(port: int, peer: tuple[str, int]) -> Dial:
    """Who is at the other end of a loopback connection (its local address is ``peer``)."""
    try:
        pid = next(
            (each.pid for each in psutil.net_connections("tcp4") if each.laddr == peer and each.pid), None
        )
        data_dir = psutil.Process(pid).environ().get("RESEARCH_DATA_DIR") if pid else None
    except psutil.Error:
        return Dial(port, None, None)
    return Dial(port, pid, data_dir)


@contextlib.contextmanager
def default_ports_held() -> Iterator[DefaultPortsHeld]:
    held = DefaultPortsHeld()
    try:
        yield held
    finally:
        held.close()


# One tracer provider for the whole test process, exporting to memory: the SDK allows one per
# process, and the code under test only installs its own when none is there.
SPANS = InMemorySpanExporter()


def pytest_configure(config: pytest.Config) -> None:
    provider = TracerProvider(resource=Resource.create({"service.name": "research-coordinator"}))
    provider.add_span_processor(ClientSpanStatus(SimpleSpanProcessor(SPANS)))
    trace.set_tracer_provider(provider)


@pytest.fixture
def spans() -> Iterator[InMemorySpanExporter]:
    """The spans finished during one test."""
    SPANS.clear()
    yield SPANS
    SPANS.clear()


_LOOPBACK = {"127.0.0.1", "localhost", "::1", "", None}


@pytest.fixture(autouse=True)
def no_network_beyond_loopback(monkeypatch: pytest.MonkeyPatch) -> None:
    """No test reaches the real Messages API, or anything off this machine.

    In this process, resolving any host but loopback fails the test; processes the tests start
    inherit an environment whose Anthropic base URL is a dead loopback port and that holds no key.
    """
    resolve = socket.getaddrinfo

    def loopback_only(host: Any, *args: Any, **kwargs: Any) -> Any:
        if host not in _LOOPBACK:
            pytest.fail(f"a test tried to reach {host!r}: tests talk to 127.0.0.1 only")
        return resolve(host, *args, **kwargs)

    monkeypatch.setattr(socket, "getaddrinfo", loopback_only)
    monkeypatch.delenv("ANTHROPIC_API_KEY", raising=False)
    monkeypatch.setenv("ANTHROPIC_BASE_URL", "http://127.0.0.1:9")


@pytest.fixture(scope="session", autouse=True)
def no_certificate_authorities(tmp_path_factory: pytest.TempPathFactory) -> Iterator[None]:
    """No TLS here: every peer a test talks to is plain HTTP on 127.0.0.1, so no client needs the
    system's certificate authorities. An empty folder stands for them, in this process and in the
    processes the tests start: an HTTP client (the anthropic SDK builds one per conversation with the
    model) builds its TLS context in under a millisecond, not the 40 to 50 ms that reading the
    system's CA bundle takes (about 14 s over the planner corpus's 280 conversations). Were a test's
    HTTP client (httpx, as the SDKs use it) to reach a TLS peer, no certificate would verify.
    """
    empty = tmp_path_factory.mktemp("no-certificate-authorities")
    with pytest.MonkeyPatch.context() as patch:
        patch.delenv("SSL_CERT_FILE", raising=False)  # it would be read instead of SSL_CERT_DIR
        patch.setenv("SSL_CERT_DIR", str(empty))
        yield


@pytest.fixture
def messages_api() -> Iterator[Callable[..., FakeMessagesApi]]:
    """Starts fake Messages APIs on 127.0.0.1 with the scripts given (``Conversations``' fields); at
    the test's end, each must have met no script error, and is closed."""
    started: list[FakeMessagesApi] = []

    def start(**conversations: Any) -> FakeMessagesApi:
        api = FakeMessagesApi(Conversations(**conversations))
        started.append(api)
        return api

    yield start
    for api in started:
        assert api.script_errors == []
        api.close()
