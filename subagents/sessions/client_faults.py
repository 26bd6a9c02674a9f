"""Client-side fault injection: chaos for MCP servers that have no fault layer of their own.

Our sources run behind ``sources.faults.FaultLayer``; a third-party server (the npm filesystem
server, say) does not. ``with_client_faults`` wraps the target of such a server so that the faults
happen between the ``mcp.Client`` and the transport, on the messages the SDK sends and receives:

    targets["files"] = with_client_faults(lambda: files_parameters, FaultSettings.parse("hang=0.1,seed=7"))

The transport underneath is the one ``mcp.Client`` itself would open, from the SDK's own functions:
``stdio_client`` for ``StdioServerParameters``, ``streamable_http_client`` for a URL, the SDK's
in-memory transport for an in-process ``MCPServer`` (JSON-RPC framed, as ``Client(server,
mode="legacy")`` runs it: the direct dispatcher of the other modes has no streams to fault), and a
transport context manager as it is.

Each outgoing ``tools/call`` rolls the server-side layer's dice (``sources.faults.rolls``: the same
seed strikes the same calls in the same order) and its faults act, in the server-side layer's order
of precedence, as the caller would see them from a faulty server:

| name             | effect on each ``tools/call``, client side                                   |
|------------------|------------------------------------------------------------------------------|
| `latency`/`jitter` | the request is held back that long before it is sent                       |
| `crash`, `exit`  | the connection ends mid-call: the caller reads the end of its input ("Connection closed"), the server's input is closed, and the transport's exit ends a stdio child |
| `garbage`        | the call runs; its answer is replaced by the SDK's report of an answer it could not parse (JSON-RPC parse error, as its HTTP client reports a corrupt body) |
| `hang`           | the request is swallowed: never sent, never answered                          |
| `transient`      | answered at once with the server-side layer's transient contract error; never sent |
| `lose`           | the call runs; its answer is dropped                                          |
| `oversize`       | the answer carries the server-side layer's extra 2 MB text block              |
| `seed`           | seed of the dice                                                               |

``crash`` and ``exit`` differ only in the exit status of a server process, which a client-side
layer has no process to give: both end the connection. ``truncate``, ``unknown_id`` and ``die_at``
are refused with a ``ValueError``: the first two corrupt the bytes of the stdio wire, below the
parsed messages this layer sees, and ``die_at`` kills a server process at its start or handshake,
which only the server's own layer can do.

The dice are shared by every session the wrapped target opens: a session reopened after a crash
goes on with the sequence rather than replaying its start (which could strike the same first call
forever). Handshakes, notifications and every other request pass untouched, among them the
cancellation the SDK sends for a call that timed out: a server ignores one for a request it never saw.
"""

from __future__ import annotations

import contextlib
from collections.abc import AsyncIterator, Iterator
from contextlib import AbstractAsyncContextManager, asynccontextmanager
from dataclasses import dataclass, field
from typing import Any, Literal

import anyio
from anyio.abc import TaskGroup
from anyio.streams.memory import MemoryObjectReceiveStream, MemoryObjectSendStream
from mcp import StdioServerParameters
from mcp.client import Transport
from mcp.client._memory import InMemoryTransport  # the SDK's own, as mcp.Client opens it; not re-exported
from mcp.client._transport import ReadStream, TransportStreams, WriteStream
from mcp.client.stdio import stdio_client
from mcp.client.streamable_http import streamable_http_client
from mcp.server import MCPServer
from mcp.shared.dispatcher import coerce_request_id
from mcp.shared.message import SessionMessage
from mcp_types import (
    PARSE_ERROR,
    SERVER_INFO_META_KEY,
    ErrorData,
    JSONRPCError,
    JSONRPCRequest,
    JSONRPCResponse,
    RequestId,
    jsonrpc_message_adapter,
)
from pydantic import ValidationError

from sources.faults import OVERSIZE_BYTES, FaultSettings, Roll, rolls, transient_result
from sources.wire import GARBAGE
from subagents.sessions.connection import AuthorizedUrl, Target

__all__ = ["with_client_faults"]

# Faults that need the server's process or the bytes of its wire: refused, each with why.
_REFUSED = {
    "truncate": "it cuts a JSON-RPC message short on the stdio wire, below the parsed messages a client-side layer sees",
    "unknown_id": "it writes an answer to an unknown request id on the stdio wire, below the parsed messages a client-side layer sees",
    "die_at": "it kills the server process at its start or handshake, which only the server's own layer can do",
}
_HANDSHAKE_METHODS = frozenset({"initialize", "server/discover"})
_CLOSED = (anyio.ClosedResourceError, anyio.BrokenResourceError)
_UNNAMED_SOURCE = "third-party"  # a server that gives no name in its handshake

Effect = Literal["end", "garbage", "hang", "transient", "lose", "oversize"]
# The server-side layer's order of precedence, when several dice strike one call.
_PRECEDENCE: tuple[tuple[str, Effect], ...] = (
    ("crash", "end"),
    ("exit", "end"),
    ("garbage", "garbage"),
    ("hang", "hang"),
    ("transient", "transient"),
    ("lose", "lose"),
    ("oversize", "oversize"),
)


def with_client_faults(target: Target, faults: FaultSettings, *, source: str | None = None) -> Target:
    """``target`` with ``faults`` injected on the client side of its transport, for each ``tools/call``.

    ``source`` names the source in the transient fault's message; by default, the name the server
    gives itself in its handshake. Raises ``ValueError`` naming a fault that cannot act client side.
    """
    for name, why in _REFUSED.items():
        if getattr(faults, name):
            raise ValueError(
                f"the {name} fault cannot be injected client side: {why}; use the source's own --faults"
            )
    dice = rolls(faults)  # one sequence for every session of this target (see the module's docstring)
    return lambda: _faulty_transport(_transport_of(target()), dice, source)


def _transport_of(
    opened: MCPServer | StdioServerParameters | str | AbstractAsyncContextManager[Any],
) -> Transport:
    """The transport ``mcp.Client`` opens on what a target returns, from the SDK's own functions."""
    if isinstance(opened, MCPServer):
        return InMemoryTransport(opened)
    if isinstance(opened, StdioServerParameters):
        return stdio_client(opened)
    if isinstance(opened, AuthorizedUrl):  # a URL whose requests carry a token
        return opened.transport()
    if isinstance(opened, str):
        return streamable_http_client(opened)
    return opened


@asynccontextmanager
async def _faulty_transport(
    transport: Transport, dice: Iterator[Roll], source: str | None
) -> AsyncIterator[TransportStreams]:
    """The transport's streams, with a relay between them and the caller that applies the faults."""
    async with transport as (server_messages, to_server):
        to_caller, caller_reads = anyio.create_memory_object_stream[SessionMessage | Exception](0)
        caller_writes, from_caller = anyio.create_memory_object_stream[SessionMessage](0)
        relay = _Relay(dice, source, to_caller, to_server)
        async with anyio.create_task_group() as group:
            group.start_soon(relay.answers, server_messages)
            group.start_soon(relay.requests, from_caller, group)
            try:
                yield caller_reads, caller_writes
            finally:
                group.cancel_scope.cancel()  # held-back and swallowed calls die with the session
                for stream in (caller_reads, caller_writes, to_caller, from_caller):
                    await stream.aclose()


def _parse_failure() -> str:
    """What the SDK's parser says of the server-side layer's garbage bytes."""
    try:
        jsonrpc_message_adapter.validate_json(GARBAGE, by_name=False)
    except ValidationError as exc:
        return str(exc)
    raise AssertionError("the fault layer's garbage parsed as JSON-RPC")


@dataclass(eq=False)
class _Relay:
    """Carries requests to the server and answers back to the caller, faulting the ``tools/call`` ones."""

    dice: Iterator[Roll]
    source: str | None
    to_caller: MemoryObjectSendStream[SessionMessage | Exception]
    to_server: WriteStream[SessionMessage]
    # The calls sent whose answer is to be faulted, and the handshakes whose answers name the server.
    answer_effects: dict[RequestId, Effect] = field(default_factory=dict)
    handshakes: set[RequestId] = field(default_factory=set)
    ended: bool = False

    async def requests(
        self, from_caller: MemoryObjectReceiveStream[SessionMessage], group: TaskGroup
    ) -> None:
        async with from_caller:
            async for message in from_caller:
                request = message.message
                if isinstance(request, JSONRPCRequest) and request.method == "tools/call":
                    # Rolled here, in the order the calls were made, whatever each one's delay.
                    group.start_soon(self._call, message, request, next(self.dice))
                    continue
                if isinstance(request, JSONRPCRequest) and request.method in _HANDSHAKE_METHODS:
                    self.handshakes.add(coerce_request_id(request.id))
                await self._send(message)
        # The caller is done writing: so is the server's input, as when the caller talks to it directly.
        with contextlib.suppress(*_CLOSED):
            await self.to_server.aclose()

    async def _call(self, message: SessionMessage, request: JSONRPCRequest, roll: Roll) -> None:
        if roll.delay_ms:
            await anyio.sleep(roll.delay_ms / 1000)
        effect = next((struck for die, struck in _PRECEDENCE if getattr(roll, die)), None)  # the first
        if effect == "end":
            await self._end()
        elif effect == "transient":
            answer = transient_result(self.source or _UNNAMED_SOURCE)
            # The SDK's server dumps a handler's result so: the answer is what the server-side layer sends.
            result = answer.model_dump(by_alias=True, mode="json", exclude_none=True)
            await self._to_caller_safely(
                SessionMessage(JSONRPCResponse(jsonrpc="2.0", id=request.id, result=result))
            )
        elif effect != "hang":  # a hung call is neither sent nor answered
            if effect is not None:
                self.answer_effects[coerce_request_id(request.id)] = effect
            await self._send(message)

    async def _send(self, message: SessionMessage) -> None:
        if self.ended:
            return
        try:
            await self.to_server.send(message)
        except _CLOSED:
            # The server is gone: end the caller's input too, so no request waits for an answer.
            await self._end()

    async def answers(self, server_messages: ReadStream[SessionMessage | Exception]) -> None:
        async with server_messages:
            async for item in server_messages:
                # Read on after the connection ended, so the transport never blocks on an answer.
                answer = None if self.ended else self._faulted(item)
                if answer is not None:
                    await self._to_caller_safely(answer)
        await self.to_caller.aclose()  # the server hung up: the caller reads the end of its input

    def _faulted(self, item: SessionMessage | Exception) -> SessionMessage | Exception | None:
        """The server's message as the caller gets it: untouched, replaced, or dropped (None)."""
        if isinstance(item, Exception) or not isinstance(item.message, JSONRPCResponse | JSONRPCError):
            return item
        answer = item.message
        key = coerce_request_id(answer.id) if answer.id is not None else None
        if isinstance(answer, JSONRPCResponse) and key in self.handshakes:
            self.handshakes.discard(key)
            self.source = self.source or _server_name(answer.result)
        effect = self.answer_effects.pop(key, None) if key is not None else None
        if effect == "lose":
            return None
        if effect == "garbage" and answer.id is not None:
            # What the SDK's HTTP client hands the session for a body it cannot parse.
            error = ErrorData(code=PARSE_ERROR, message=f"Failed to parse JSON response: {_parse_failure()}")
            return SessionMessage(JSONRPCError(jsonrpc="2.0", id=answer.id, error=error))
        if effect == "oversize" and isinstance(answer, JSONRPCResponse):
            return SessionMessage(answer.model_copy(update={"result": _padded(answer.result)}), item.metadata)
        return item

    async def _to_caller_safely(self, item: SessionMessage | Exception) -> None:
        with contextlib.suppress(*_CLOSED):  # the caller is gone, or the connection ended: no one to tell
            await self.to_caller.send(item)

    async def _end(self) -> None:
        """The connection ends mid-call: the caller reads the end of its input; the server, of its own."""
        self.ended = True
        await self.to_caller.aclose()
        with contextlib.suppress(*_CLOSED):
            await self.to_server.aclose()


def _server_name(result: dict[str, Any]) -> str | None:
    """The name in a handshake's answer: ``serverInfo`` (initialize) or the 2026 ``_meta`` stamp (discover)."""
    meta = result.get("_meta")
    info = result.get("serverInfo") or (meta.get(SERVER_INFO_META_KEY) if isinstance(meta, dict) else None)
    name = info.get("name") if isinstance(info, dict) else None
    return name if isinstance(name, str) and name else None


def _padded(result: dict[str, Any]) -> dict[str, Any]:
    content = result.get("content")
    if not isinstance(content, list):
        return result  # not a tool result: nothing to pad
    return {**result, "content": [*content, {"type": "text", "text": "x" * OVERSIZE_BYTES}]}
