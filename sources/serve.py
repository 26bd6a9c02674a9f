"""Run one source on its own: stdio by default, or streamable HTTP on 127.0.0.1.

    python -m sources.customers                      # stdio, for a client that spawns it
    python -m sources.orders --http --port 8102      # streamable HTTP at http://127.0.0.1:8102/mcp
    python -m sources.kb --http --port 0             # any free port; the ready line says which

Over HTTP the source binds its port before serving and prints one line to stderr when it is ready:
``research-source ready {"source": "kb", "url": "http://127.0.0.1:40123/mcp", "pid": 1234}``.
A port already in use is reported at once, with a non-zero exit status.
"""

from __future__ import annotations

import errno
import json
import os
import socket
import sys
from collections.abc import Callable

import anyio
import typer
import uvicorn
from mcp.server import MCPServer

from sources.control import add_control_routes
from sources.faults import FaultSettings
from sources.settings import SourceSettings
from sources.wire import HttpWire, StdioWire
from traces.setup import configure_tracing

__all__ = ["READY_PREFIX", "main"]

READY_PREFIX = "research-source ready "
LOOPBACK = "127.0.0.1"

ServerFactory = Callable[..., MCPServer]


def _bind(port: int) -> socket.socket:
    # IPPROTO_TCP, not the default 0: asyncio (under uvicorn) turns Nagle's algorithm off on an
    # accepted socket only when its proto is IPPROTO_TCP, and accepted sockets inherit the listener's.
    # Without it each response (headers and body are two writes) waited ~40 ms for a delayed ACK.
    sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM, socket.IPPROTO_TCP)
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    try:
        sock.bind((LOOPBACK, port))
    except OSError as exc:
        sock.close()
        if exc.errno == errno.EADDRINUSE:
            raise SystemExit(
                f"error: port {port} on {LOOPBACK} is already in use; choose another with --port"
            ) from None
        raise
    sock.listen(128)
    return sock


async def _serve_http(
    server: MCPServer, name: str, port: int, wire: HttpWire | None, settings: SourceSettings
) -> None:
    sock = _bind(port)
    url = f"http://{LOOPBACK}:{sock.getsockname()[1]}/mcp"
    # Sessions are bounded by the SDK's own options: idle ones end, and past the cap a new one is
    # refused with 503 "Too many open sessions" until some end.
    app = server.streamable_http_app(
        host=LOOPBACK,
        session_idle_timeout=settings.http_session_idle_s,
        max_sessions=settings.http_max_sessions,
    )
    config = uvicorn.Config(wire.wrap(app) if wire else app, log_level="warning", lifespan="on")
    runner = uvicorn.Server(config)
    print(
        READY_PREFIX + json.dumps({"source": name, "url": url, "pid": os.getpid()}),
        file=sys.stderr,
        flush=True,
    )
    await runner.serve(sockets=[sock])


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
        faults: str = typer.Option(
            "",
            "--faults",
            envvar="RESEARCH_FAULTS",
            help="Fault layer settings, e.g. 'latency=200ms,transient=0.2,seed=7'.",
        ),
        chaos_control: bool = typer.Option(
            False,
            "--chaos-control",
            help="HTTP only: accept fault settings at run time on /chaos (127.0.0.1 only).",
        ),
    ) -> None:
        try:
            settings = SourceSettings.from_environment().with_faults(FaultSettings.parse(faults))
            if settings.faults.die_at == "start":
                os._exit(1)  # the fault layer's "dies before serving": no handshake ever answered
            # Spans join the caller's trace through the mcp SDK's server span; a stdio source never
            # exports to stdout (the console exporter writes to stderr).
            configure_tracing(
                f"research-source-{name}",
                traces_dir=settings.traces_path,
                run_id=settings.run_id,
                full_payloads=settings.full_payloads,
                eager=True,  # a source may be killed at any moment: export each span as it ends
            )
            if http:
                wire = HttpWire() if chaos_control else None
                server = create_server(settings, wire=wire)
                add_control_routes(server, name, chaos_control=chaos_control)
                anyio.run(_serve_http, server, name, port, wire, settings)
            else:
                # A second handle on stdout, for the garbage fault: the SDK diverts fd 1 while serving.
                create_server(settings, wire=StdioWire(os.dup(sys.stdout.fileno()))).run()
        except ValueError as exc:  # bad settings: one plain line on stderr, never a traceback
            raise SystemExit(f"error: {exc}") from None

    typer.run(run)
