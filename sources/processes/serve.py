"""Run one source on its own: stdio by default, or streamable HTTP on 127.0.0.1 (or one address chosen).

    python -m sources.customers                      # stdio, for a client that spawns it
    python -m sources.orders --http --port 8102      # streamable HTTP at http://127.0.0.1:8102/mcp
    python -m sources.kb --http --port 0             # any free port; the ready line says which
    python -m sources.kb --http --host 10.0.0.5      # on that address: every request needs a bearer token

Over HTTP a client may send the coordinator's credential as ``Authorization: Bearer <token>``, and
the source serves the protected-resource metadata that MCP hosts look for (``sources.security.http_auth``).

Over HTTP the source binds its port before serving and prints one line to stderr when it is ready:
``research-source ready {"source": "kb", "url": "http://127.0.0.1:40123/mcp", "pid": 1234}``.
A port already in use is reported at once, with a non-zero exit status.

Stopping is quick and quiet:

* over stdio, the source serves until its client hangs up (end of stdin, or its end of stdout
  closed: the client died), then leaves at once, a call still hanging in a handler or not: the SDK
  cancels in-flight handlers at the end of input, the spans are flushed (bounded), and the process
  exits without the interpreter's teardown, which took 0.3 to 1 s with a source's data loaded
  (the SDK's client waits up to 2 s for its child before a SIGTERM). A client that died leaves no
  traceback: its broken pipe is how a stdio session ends.
* over HTTP, SIGTERM gives the calls in flight ``GRACEFUL_SHUTDOWN_S``, then cancels them (an open
  SSE stream never ends on its own, and uvicorn would wait for it forever), and the whole shutdown
  is bounded by ``SHUTDOWN_S``: the SDK gives each cancelled call up to a second to write a last
  answer that no reader will take.
* logs are one plain line per record on stderr; a client that hangs up mid-request is one line,
  not the SDK's traceback.
"""

from __future__ import annotations

import asyncio
import contextlib
import errno
import json
import logging
import os
import socket
import sys
from collections.abc import Callable
from typing import TYPE_CHECKING, NoReturn

import anyio
import uvicorn
from mcp.server import MCPServer
from starlette.requests import ClientDisconnect

from sources.deferred import deferred
from sources.faults import FaultSettings
from sources.processes import collector
from sources.processes.control import add_control_routes
from sources.security.http_auth import MCP_PATH, authorized_http_app
from sources.security.listen import LOOPBACK, checked_address, http_base
from sources.settings import SourceSettings
from sources.wire import HttpWire, StdioWire, Wire
from traces.logs import RedactingFormatter
from traces.setup import configure_tracing, flush_spans

# typer is a spawned source's command line (``main``): a forked source parses none, and the fork
# server, which imports this module beside the coordinator's own imports, need not load it.
if TYPE_CHECKING:
    import typer
else:
    typer = deferred("typer")

__all__ = [
    "GRACEFUL_SHUTDOWN_S",
    "READY_PREFIX",
    "SHUTDOWN_S",
    "BoundedShutdownServer",
    "bind_address",
    "bind_loopback",
    "log_plainly",
    "main",
    "serve_stdio",
]

READY_PREFIX = "research-source ready "
# After SIGTERM, how long the HTTP calls in flight may take to finish before they are cancelled.
# A tool answers in milliseconds; what is left after this is a hung call or an idle SSE stream.
GRACEFUL_SHUTDOWN_S = 0.3
SHUTDOWN_S = 0.6  # the most an HTTP source's shutdown takes, from noticing SIGTERM to exiting
_EXIT_FLUSH_MS = 1000  # the most a stdio source waits for its last spans to be exported as it leaves

ServerFactory = Callable[..., MCPServer]

# What a client that hangs up mid-request looks like from here: an HTTP client gone before its body
# arrived, a reset or broken socket or pipe, an answer stream whose reader is gone.
_HANG_UPS: tuple[type[BaseException], ...] = (ClientDisconnect, ConnectionError, anyio.BrokenResourceError)


def _hung_up(exc: BaseException) -> bool:
    if isinstance(exc, BaseExceptionGroup):
        return all(_hung_up(inner) for inner in exc.exceptions)
    return isinstance(exc, _HANG_UPS)


class _HangUpsInOneLine(logging.Filter):
    """A client that hangs up mid-request, or a call cut at shutdown, is routine: one warning line,
    not the SDK's or uvicorn's traceback."""

    def filter(self, record: logging.LogRecord) -> bool:
        exc = record.exc_info[1] if record.exc_info else None
        if exc is None:
            return True
        if _hung_up(exc):
            why = f"the client hung up ({type(exc).__name__})"
        elif isinstance(exc, asyncio.CancelledError):  # uvicorn cancels what outlives its graceful shutdown
            why = "the call was cancelled as the source stopped"
        else:
            return True
        record.msg = f"{record.getMessage().rstrip()}: {why}"
        record.args = None
        record.exc_info = record.exc_text = None
        record.levelno, record.levelname = logging.WARNING, "WARNING"
        return True


def log_plainly(name: str) -> None:
    """One plain line per record on stderr, for the SDK, uvicorn and the source alike.

    Installed before the server is created, so the SDK's own set-up (rich, boxed tracebacks wrapped
    at 80 columns in a log file) finds the root logger configured and leaves it alone.
    """
    handler = logging.StreamHandler(sys.stderr)
    # Redacted as spans are: a traceback may quote an argument, and these lines go to the fleet's log files.
    handler.setFormatter(RedactingFormatter(f"%(asctime)s %(levelname)s {name} %(name)s: %(message)s"))
    handler.addFilter(_HangUpsInOneLine())
    logging.basicConfig(level=logging.WARNING, handlers=[handler], force=True)


def bind_loopback(port: int) -> socket.socket:
    return bind_address(LOOPBACK, port)


def bind_address(host: str, port: int) -> socket.socket:
    """A listening socket on ``host`` (one address: ``sources.security.listen``) and ``port``."""
    # IPPROTO_TCP, not the default 0: asyncio (under uvicorn) turns Nagle's algorithm off on an
    # accepted socket only when its proto is IPPROTO_TCP, and accepted sockets inherit the listener's.
    # Without it each response (headers and body are two writes) waited ~40 ms for a delayed ACK.
    family = socket.AF_INET6 if ":" in host else socket.AF_INET
    sock = socket.socket(family, socket.SOCK_STREAM, socket.IPPROTO_TCP)
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    try:
        sock.bind((host, port))
    except OSError as exc:
        sock.close()
        if exc.errno == errno.EADDRINUSE:
            raise SystemExit(
                f"error: port {port} on {host} is already in use; choose another with --port"
            ) from None
        if exc.errno == errno.EADDRNOTAVAIL:
            raise SystemExit(
                f"error: --host {host} is no address of this machine; give one of its own, e.g. 127.0.0.1"
            ) from None
        raise
    sock.listen(128)
    return sock


class BoundedShutdownServer(uvicorn.Server):
    """uvicorn with its shutdown bounded; past the bound the process ends on the SIGTERM it got."""

    async def shutdown(self, sockets: list[socket.socket] | None = None) -> None:
        with anyio.move_on_after(SHUTDOWN_S):
            await super().shutdown(sockets)


async def _serve_http(
    server: MCPServer, name: str, host: str, port: int, wire: HttpWire | None, settings: SourceSettings
) -> None:
    sock = bind_address(host, port)
    url = f"{http_base(host, sock.getsockname()[1])}{MCP_PATH}"
    # Bearer tokens, 401s and protected-resource metadata (sources.security.http_auth). Sessions are bounded
    # by the SDK's own options, for anonymous sessions and for those opened with a token each: idle
    # ones end, and past the cap a new one is refused with 503 "Too many open sessions" until some end.
    app = authorized_http_app(
        server,
        name,
        url,
        host=host,
        session_idle_timeout=settings.http_session_idle_s,
        max_sessions=settings.http_max_sessions,
    )
    config = uvicorn.Config(
        wire.wrap(app) if wire else app,
        lifespan="on",
        log_config=None,  # uvicorn's records go to the root logger: one format, one filter
        log_level="warning",
        timeout_graceful_shutdown=GRACEFUL_SHUTDOWN_S,  # type: ignore[arg-type]  # typed int, but it is an asyncio.wait_for timeout: a float works
    )
    runner = BoundedShutdownServer(config)
    print(
        READY_PREFIX + json.dumps({"source": name, "url": url, "pid": os.getpid()}),
        file=sys.stderr,
        flush=True,
    )
    await runner.serve(sockets=[sock])


def _leave(status: int) -> NoReturn:
    """Exit now: the spans flushed within a bound, stderr flushed, no interpreter teardown."""
    flush_spans(_EXIT_FLUSH_MS)
    with contextlib.suppress(OSError, ValueError):
        sys.stderr.flush()
    os._exit(status)


def _source_name(create_server: ServerFactory) -> str:
    """``customers`` for ``python -m sources.customers`` (where the module itself is ``__main__``)."""
    module = create_server.__module__
    if module == "__main__":
        spec = getattr(sys.modules["__main__"], "__spec__", None)
        module = spec.name if spec is not None else module
    return module.rsplit(".", 1)[-1]


def main(create_server: ServerFactory) -> None:
    """The command line of every source module."""
    name = _source_name(create_server)

    def run(
        http: bool = typer.Option(
            False, "--http", help="Serve streamable HTTP on 127.0.0.1 instead of stdio."
        ),
        port: int = typer.Option(0, "--port", min=0, max=65535, help="HTTP port; 0 picks a free one."),
        host: str = typer.Option(
            LOOPBACK,
            "--host",
            help="HTTP only: the one address to listen on, e.g. 10.0.0.5; off loopback every request "
            "needs a bearer token.",
        ),
        faults: str = typer.Option(
            "",
            "--faults",
            envvar="RESEARCH_FAULTS",
            help="Fault layer settings, e.g. 'latency=200ms,transient=0.2,seed=7'.",
        ),
        chaos_control: bool = typer.Option(
            False,
            "--chaos-control",
            help="HTTP only: accept fault settings at run time on /chaos (with the fleet's secret).",
        ),
    ) -> None:
        try:
            settings = SourceSettings.from_environment().with_faults(FaultSettings.parse(faults))
            if http:
                _start(name, settings)
                wire = HttpWire() if chaos_control else None
                server = _built(create_server, settings, wire)
                host = checked_address(host)
                add_control_routes(server, name, chaos_control=chaos_control, host=host)
                anyio.run(_serve_http, server, name, host, port, wire, settings)
            else:
                serve_stdio(create_server, name, settings)
        except ValueError as exc:  # bad settings: one plain line on stderr, never a traceback
            raise SystemExit(f"error: {exc}") from None

    typer.run(run)


def serve_stdio(create_server: ServerFactory, name: str, settings: SourceSettings) -> NoReturn:
    """Serve one source on fds 0 and 1 until its client hangs up (a spawned or a forked source), then
    leave at once (see the module's docstring)."""
    _start(name, settings)
    # A second handle on stdout, for the garbage fault: the SDK diverts fd 1 while serving.
    server = _built(create_server, settings, StdioWire(os.dup(sys.stdout.fileno())))

    async def serve() -> None:
        try:
            await server.run_stdio_async()
        except* ConnectionError:
            pass  # the client closed its end of the wire (it died): nobody is left to answer

    status = 0
    try:
        anyio.run(serve)
    except KeyboardInterrupt:  # Ctrl-C reaches the whole process group; the client handles it
        status = 130
    _leave(status)


def _built(create_server: ServerFactory, settings: SourceSettings, wire: Wire | None) -> MCPServer:
    """The source's server, with everything loaded and built so far out of the garbage collector's sight.

    What a source imports and builds before serving (the SDK, pydantic's models, its data's indexes:
    some 110,000 objects) lives as long as the process. Left in the collector's sight, the older
    generations' collections walked it again and again: over 3,000 calls of ``search_tickets``, 190 ms
    of collections, 89 ms once frozen (``gc.freeze``), 33 us a call. A forked source's imports were
    frozen in the fork server already (``sources.processes.fork_server_frozen``); what it builds is
    frozen here.
    """
    server = create_server(settings, wire=wire)
    collector.started_up()
    return server


def _start(name: str, settings: SourceSettings) -> None:
    if settings.faults.die_at == "start":
        os._exit(1)  # the fault layer's "dies before serving": no handshake ever answered
    log_plainly(name)
    # Spans join the caller's trace through the mcp SDK's server span; a stdio source never
    # exports to stdout (the console exporter writes to stderr).
    configure_tracing(
        f"research-source-{name}",
        traces_dir=settings.traces_path,
        run_id=settings.run_id,
        full_payloads=settings.full_payloads,
        eager=True,  # a source may be killed at any moment: each span written as it ends
    )
