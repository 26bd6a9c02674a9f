"""MCP's stdio framing (one JSON-RPC message a line) over any byte streams, with every line bounded.

The SDK's ``stdio_client`` keeps whatever a server writes until a newline comes: a 50 MB line is
50 MB held, and more while it is parsed. Here a line is read against ``limit`` as it arrives: one
that passes it is drained and discarded (only its first and last bytes are kept, to find its id),
and the request it answers fails at once with ``ANSWER_TOO_LARGE`` (``subagents.answer_limit``).
The stream stays in step, so the session goes on serving the next call.

Used for a spawned source's pipes (``subagents.sessions.bounded``) and a forked source's socket
(``subagents.sessions.forked_transport``).
"""

from __future__ import annotations

import contextlib
import json
import re
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from dataclasses import dataclass
from typing import Any

import anyio
import mcp_types
from anyio.abc import ByteReceiveStream, ByteSendStream
from mcp.client._transport import TransportStreams
from mcp.shared.message import SessionMessage

from subagents.answer_limit import ANSWER_TOO_LARGE, too_large

__all__ = ["GONE", "MessageLines", "Oversized", "framed"]

GONE = (
    anyio.EndOfStream,
    anyio.IncompleteRead,
    anyio.ClosedResourceError,
    anyio.BrokenResourceError,
    OSError,
)
_KEPT = 512  # bytes kept of each end of a discarded line: where its id is
# The id of a response, where a JSON-RPC library writes it: right after "jsonrpc" at the start (the
# SDK, pydantic), or last of all (a server that writes "result" first).
_ID_FIRST = re.compile(rb'^\s*\{\s*"jsonrpc"\s*:\s*"2\.0"\s*,\s*"id"\s*:\s*(-?\d+|"(?:[^"\\]|\\.)*")')
_ID_LAST = re.compile(rb'"id"\s*:\s*(-?\d+|"(?:[^"\\]|\\.)*")\s*\}\s*$')
_METHOD = re.compile(rb'"method"\s*:')
_ANSWER = re.compile(rb'"(?:result|error)"\s*:')


@dataclass
class Oversized:
    """A line over the limit: its size, and its two ends (never the rest)."""

    size: int
    head: bytes
    tail: bytes

    def request_id(self, pending: set[Any]) -> Any:
        """The pending request it answers; None for a message of the server's own (a notification or
        request: a method, no result); with no id found, the one request pending, else None."""
        for found in (_ID_FIRST.search(self.head), _ID_LAST.search(self.tail)):
            if found is not None and (value := json.loads(found.group(1))) in pending:
                return value
        if _METHOD.search(self.head) and not _ANSWER.search(self.head):
            return None
        return next(iter(pending)) if len(pending) == 1 else None


class MessageLines:
    """Cuts bytes into lines of at most ``limit`` bytes; a longer line comes out as ``Oversized``."""

    def __init__(self, limit: int) -> None:
        self._limit = limit
        self._line = bytearray()
        self._skipping: Oversized | None = None

    def feed(self, chunk: bytes) -> list[bytes | Oversized]:
        lines: list[bytes | Oversized] = []
        start = 0
        while True:
            end = chunk.find(b"\n", start)
            self._take(chunk[start:] if end < 0 else chunk[start:end])
            if end < 0:
                return lines
            lines.append(self._skipping or bytes(self._line))
            self._line, self._skipping = bytearray(), None
            start = end + 1

    def _take(self, piece: bytes) -> None:
        if self._skipping is not None:
            self._skipping.size += len(piece)
            self._skipping.tail = (self._skipping.tail + piece)[-_KEPT:]
            return
        self._line += piece
        if len(self._line) > self._limit:
            line = bytes(self._line)
            self._skipping = Oversized(len(line), line[:_KEPT], line[-_KEPT:])
            self._line = bytearray()


@asynccontextmanager
async def framed(
    incoming_bytes: ByteReceiveStream, outgoing_bytes: ByteSendStream, limit: int
) -> AsyncIterator[TransportStreams]:
    """The session's streams over the two byte streams, until the block ends or the other side hangs up."""
    incoming_writer, incoming = anyio.create_memory_object_stream[SessionMessage | Exception](0)
    outgoing, outgoing_reader = anyio.create_memory_object_stream[SessionMessage](0)
    pending: set[Any] = set()  # the ids of our requests not answered yet

    async def receive() -> None:
        lines = MessageLines(limit)
        async with incoming_writer:
            with contextlib.suppress(*GONE):  # the source hung up: the session sees its input end
                while True:
                    for line in lines.feed(await incoming_bytes.receive()):
                        message = _message(line, pending, limit)
                        if message is not None:
                            await incoming_writer.send(message)

    async def send() -> None:
        async with outgoing_reader:
            try:
                async for session_message in outgoing_reader:
                    _note_sent(session_message.message, pending)
                    text = session_message.message.model_dump_json(by_alias=True, exclude_unset=True)
                    await outgoing_bytes.send(text.encode() + b"\n")
            except GONE:  # the source is gone: end the session's input too, so no request waits
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


def _note_sent(message: mcp_types.JSONRPCMessage, pending: set[Any]) -> None:
    """A request is pending until answered, or cancelled (a call that timed out): never kept for ever."""
    if isinstance(message, mcp_types.JSONRPCRequest):
        pending.add(message.id)
    elif isinstance(message, mcp_types.JSONRPCNotification) and message.method == "notifications/cancelled":
        pending.discard((message.params or {}).get("requestId"))


def _message(line: bytes | Oversized, pending: set[Any], limit: int) -> SessionMessage | Exception | None:
    """What the session reads of one line: a message, the error of a line that is not one, or for a
    line over the limit the error of the request it answered (None when no request is known)."""
    if isinstance(line, Oversized):
        request_id = line.request_id(pending)
        if request_id is None:
            return None  # a notification, or an answer no pending request owns: dropped unread
        pending.discard(request_id)
        error = mcp_types.ErrorData(code=ANSWER_TOO_LARGE, message=too_large(limit))
        return SessionMessage(mcp_types.JSONRPCError(jsonrpc="2.0", id=request_id, error=error))
    if not line.strip():
        return None
    try:
        message = mcp_types.jsonrpc_message_adapter.validate_json(line, by_name=False)
    except ValueError as exc:  # a line that is not JSON-RPC: the session reports it
        return exc
    if isinstance(message, mcp_types.JSONRPCResponse | mcp_types.JSONRPCError):
        pending.discard(message.id)
    return SessionMessage(message)
