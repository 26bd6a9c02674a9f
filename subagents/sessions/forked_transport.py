"""An MCP client transport to a forked source (``sources.processes.forked``): stdio's framing over a socket.

The mcp SDK's ``stdio_client`` spawns a command and talks to its pipes; a forked source is started
by the fork server instead, and hands us one end of a socket pair. What travels on it is exactly
what travels on a spawned source's stdin and stdout, one JSON-RPC message per line, so this is
``stdio_client`` without the spawning: the same parsing (the SDK's message adapter), the same
serialisation, and the end of the session when either side hangs up; each line bounded as a spawned
source's are (``subagents.sessions.framing``).

Closing the transport closes our end of the socket: the source reads the end of its input and
leaves at once. One that does not within ``_EXIT_GRACE_S`` (stopped, or stuck before it serves) is
killed, as the SDK kills a spawned child that outlives its grace.
"""

from __future__ import annotations

import socket
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager

import anyio
from anyio.abc import SocketStream
from mcp.client._transport import TransportStreams

from sources.processes import forked_ahead
from subagents.answer_limit import MAX_ANSWER_BYTES
from subagents.sessions.framing import framed

__all__ = ["forked_source", "socket_stream"]

_EXIT_GRACE_S = 0.5  # how long a source whose input ended may take to leave before it is killed


@asynccontextmanager
async def forked_source(
    source: str, environment: dict[str, str], limit: int = MAX_ANSWER_BYTES
) -> AsyncIterator[TransportStreams]:
    """Fork ``source`` and talk MCP with it for as long as the block lasts, each answer at most ``limit`` bytes."""
    # The fork server answers with the child's pid once it has forked it (the first time, once it
    # has imported the sources): a blocking read, so it waits in a worker thread. A child forked ahead
    # for this session (``research ask``) is taken as it is.
    child = await anyio.to_thread.run_sync(forked_ahead.take_or_start, source, environment)
    try:
        wire = await socket_stream(child.wire)
        async with wire, framed(wire, wire, limit) as streams:
            yield streams
    finally:
        child.wire.close()
        with anyio.CancelScope(shield=True), anyio.move_on_after(_EXIT_GRACE_S):
            await anyio.wait_readable(child.process.sentinel)  # readable once the child has exited
        if child.process.is_alive():
            child.kill()
        child.forget()


async def socket_stream(wire: socket.socket) -> SocketStream:
    """A connected socket as a byte stream, read through an asyncio transport.

    Not anyio's ``UNIXSocketStream``, which this socket pair would suggest: on asyncio it resolves a
    waiting read from the selector's callback without looking whether the read was cancelled in the
    same turn of the loop. An answer arriving as the run is cancelled (Ctrl-C, a deadline) then has
    asyncio log "Exception in callback Future.set_result(None)" and a traceback on stderr. A
    transport reads into its protocol's buffer and has no such window.
    """
    return await SocketStream.from_socket(wire)
