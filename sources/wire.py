"""The transport side of the garbage fault: corrupt what goes on the wire instead of the answer.

The fault layer decides, per call, that its answer is corrupted; how depends on the transport:

* ``StdioWire`` writes bytes that are not even UTF-8 to the process's stdout, where the answer
  would go, and the answer never follows (the caller's reader fails on the bytes).
* ``HttpWire`` lets the call run and corrupts its answer in transit: an ASGI wrapper replaces the
  response chunk that carries that request id with the same garbage.
"""

from __future__ import annotations

import os
import re
from typing import Any, Protocol

__all__ = ["GARBAGE", "HttpWire", "StdioWire", "Wire"]

GARBAGE = b'}{"jsonrpc": "2.0", "id": \x00\xff garbage from the fault layer\n'

Scope = dict[str, Any]
Message = dict[str, Any]


class Wire(Protocol):
    def corrupt(self, request_id: Any, kind: str = "garbage") -> bool:
        """Corrupt this request's answer; True when the answer must then never be sent."""
        ...


def _corruption(request_id: Any, kind: str) -> bytes:
    if kind == "truncate":  # a JSON-RPC answer cut off mid-message
        return (
            b'{"jsonrpc": "2.0", "id": '
            + str(request_id).encode()
            + b', "result": {"content": [{"type": "te\n'
        )
    if kind == "unknown_id":  # a well-formed answer to a request nobody made
        return b'{"jsonrpc": "2.0", "id": 987654321, "result": {"content": [], "isError": false}}\n'
    return GARBAGE


class StdioWire:
    """A second handle on stdout; a write below PIPE_BUF lands whole, never inside another message."""

    def __init__(self, fd: int) -> None:
        self._fd = fd

    def corrupt(self, request_id: Any, kind: str = "garbage") -> bool:
        os.write(self._fd, _corruption(request_id, kind))
        return True


class HttpWire:
    def __init__(self) -> None:
        self._pending: set[str] = set()

    def corrupt(self, request_id: Any, kind: str = "garbage") -> bool:
        self._pending.add(str(request_id))
        return False

    def _spoils(self, body: bytes) -> bool:
        for request_id in list(self._pending):
            if re.search(rb'"id"\s*:\s*"?' + re.escape(request_id.encode()) + rb'"?\s*[,}]', body):
                self._pending.discard(request_id)
                return True
        return False

    def wrap(self, app: Any) -> Any:
        """The ASGI app with this wire's corruption applied to outgoing bodies."""

        async def corrupted(scope: Scope, receive: Any, send: Any) -> None:
            if scope.get("type") != "http" or not self._pending:
                await app(scope, receive, send)
                return

            async def sending(message: Message) -> None:
                if message.get("type") == "http.response.body" and self._spoils(message.get("body", b"")):
                    message = {**message, "body": GARBAGE}
                await send(message)

            await app(scope, receive, sending)

        return corrupted
