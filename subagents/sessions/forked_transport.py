"""An MCP client transport to a forked source (``sources.processes.forked``): stdio's framing over a socket.

The mcp SDK's ``stdio_client`` spawns a command and talks to its pipes; a forked source is started
by the fork server instead, and hands us one end of a socket pair. What travels on it is exactly
what travels on a spawned source's stdin and stdout, one JSON-RPC message per line, so this is
``stdio_client`` without the spawning: the same parsing (the SDK's message adapter), the same
serialisation, and the end of the session when either side hangs up.

Closing the transport closes our end of the socket: the source reads the end of its input and
leaves at once. One that does not within ``_EXIT_GRACE_S`` (stopped, or stuck before it serves) is
killed, as the SDK kills a spawned child that outlives its grace.
"""

from __future__ import annotations

import contextlib
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager

import anyio
import mcp_types
from anyio.abc import UNIXSocketStream
from anyio.streams.buffered import BufferedByteReceiveStream
from mcp.client._transport import TransportStreams
from mcp.shared.message import SessionMessage

from sources.processes import forked

__all__ = ["forked_source"]

_EXIT_GRACE_S = 0.5  # how long a source whose input ended may take to leave before it is killed
_MAX_MESSAGE_BYTES = 256 * 1024 * 1024  # far beyond any answer (the oversized fault sends a few MB)
_GONE = (
    anyio.EndOfStream,
    anyio.IncompleteRead,
    anyio.ClosedResourceError,
    anyio.BrokenResourceError,
    OSError,
)


@asynccontextmanager
async def forked_source(source: str, environment: dict[str, str]) -> AsyncIterator[TransportStreams]:
    """Fork ``source`` and talk MCP with it for as long as the block lasts."""
    # The fork server answers with the child's pid once it has forked it (the first time, once it
    # has imported the sources): a blocking read, so it waits in a worker thread.
    child = await anyio.to_thread.run_sync(forked.start, source, environment)
    try:
        wire = await UNIXSocketStream.from_socket(child.wire)
        async with wire, _framed(wire) as streams:
            yield streams
    finally:
        child.wire.close()
        with anyio.CancelScope(shield=True), anyio.move_on_after(_EXIT_GRACE_S):
            await anyio.wait_readable(child.process.sentinel)  # readable once the child has exited
        if child.process.is_alive():
            child.kill()
        child.forget()


@asynccontextmanager
async def _framed(wire: UNIXSocketStream) -> AsyncIterator[TransportStreams]:
    """One JSON-RPC message per line, in both directions, as on a stdio source's pipes."""
    incoming_writer, incoming = anyio.create_memory_object_stream[SessionMessage | Exception](0)
    outgoing, outgoing_reader = anyio.create_memory_object_stream[SessionMessage](0)

    async def receive() -> None:
        lines = BufferedByteReceiveStream(wire)
        async with incoming_writer:
            with contextlib.suppress(*_GONE):  # the source hung up: the session sees its input end
                while True:
                    line = await lines.receive_until(b"\n", _MAX_MESSAGE_BYTES)
                    try:
                        message: SessionMessage | Exception = SessionMessage(
                            mcp_types.jsonrpc_message_adapter.validate_json(line, by_name=False)
                        )
                    except ValueError as exc:  # a line that is not JSON-RPC: the session reports it
                        message = exc
                    await incoming_writer.send(message)

    async def send() -> None:
        async with outgoing_reader:
            try:
                async for session_message in outgoing_reader:
                    text = session_message.message.model_dump_json(by_alias=True, exclude_unset=True)
                    await wire.send(text.encode() + b"\n")
            except _GONE:  # the source is gone: end the session's input too, so no request waits
                await incoming_writer.aclose()

    async with anyio.create_task_group() as group:
        group.start_soon(receive)
        group.start_soon(send)
        try:
            yield incoming, outgoing
        finally:
            group.cancel_scope.cancel()
            for stream in (incoming, outgoing):
                await stream.aclose()
