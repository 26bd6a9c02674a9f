"""The transport side of the garbage fault: corrupt what goes on the wire instead of the answer.

The fault layer decides, per call, that its answer is corrupted; how depends on the transport:

* ``StdioWire`` writes bytes that are not even UTF-8 to the process's stdout, where the answer
  would go, and the answer never follows (the caller's reader fails on the bytes).
* ``HttpWire`` lets the call run and corrupts its answer in transit: an ASGI wrapper gives each
  HTTP request a mark in its scope, the fault layer sets the mark of the request it chose (the SDK
  hands it that HTTP request), and the wrapper replaces that one response's body with the garbage.
  The mark belongs to one HTTP request, so no other request is touched, whoever sent it and whatever
  its JSON-RPC id (ids repeat across sessions).
"""

from __future__ import annotations

import os
from typing import TYPE_CHECKING, Any, Protocol

if TYPE_CHECKING:
    from mcp.server.context import ServerRequestContext

__all__ = ["GARBAGE", "HttpWire", "StdioWire", "Wire"]

GARBAGE = b'}{"jsonrpc": "2.0", "id": \x00\xff garbage from the fault layer\n'

Scope = dict[str, Any]
Message = dict[str, Any]


class Wire(Protocol):
    def corrupt(self, ctx: ServerRequestContext[Any, Any], kind: str = "garbage") -> bool:
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

    def corrupt(self, ctx: ServerRequestContext[Any, Any], kind: str = "garbage") -> bool:
        os.write(self._fd, _corruption(ctx.request_id, kind))
        return True


_MARK = "research.corrupt"  # the scope key of an HTTP request's mark


class HttpWire:
    def corrupt(self, ctx: ServerRequestContext[Any, Any], kind: str = "garbage") -> bool:
        mark = getattr(ctx.request, "scope", {}).get(_MARK)
        if mark is None:
            raise RuntimeError(
                "the HTTP wire's wrapper did not see this request: serve the app through wrap()"
            )
        mark["garbage"] = True
        return False  # the call runs; its answer is corrupted on the way out

    def wrap(self, app: Any) -> Any:
        """The ASGI app with this wire's corruption applied to the responses the fault layer marks."""

        async def corrupted(scope: Scope, receive: Any, send: Any) -> None:
            if scope.get("type") != "http":
                await app(scope, receive, send)
                return
            mark: dict[str, bool] = {}
            scope[_MARK] = mark
            spoiled = False

            async def sending(message: Message) -> None:
                nonlocal spoiled
                if mark and message.get("type") == "http.response.start":
                    # The garbage is not the length the body was: let the server frame it (chunked).
                    headers = [
                        (k, v) for k, v in message.get("headers", []) if k.lower() != b"content-length"
                    ]
                    message = {**message, "headers": headers}
                elif mark and message.get("type") == "http.response.body":
                    message = {**message, "body": b"" if spoiled else GARBAGE}
                    spoiled = True
                await send(message)

            await app(scope, receive, sending)

        return corrupted
