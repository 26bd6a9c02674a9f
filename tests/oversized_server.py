"""A third-party MCP server that answers far more than a client should read: the memory it must survive.

Over stdio (``python tests/oversized_server.py``), or streamable HTTP (``python tests/oversized_server.py
http`` answering SSE, ``... json`` answering ``application/json``) on a loopback port the system
chooses, its URL printed on stderr as ``listening URL``.

``dump(megabytes)`` answers a text that large; ``records(count)`` that many records; ``echo(text)``
answers at once (what shows the session is still healthy after a refused answer).
"""

from __future__ import annotations

import socket
import sys

import anyio
import uvicorn
from mcp.server import MCPServer
from mcp.types import ToolAnnotations

server = MCPServer("oversized")
_READ_ONLY = ToolAnnotations(readOnlyHint=True)


@server.tool(annotations=_READ_ONLY)
def dump(megabytes: float) -> str:
    """A text of ``megabytes`` MB."""
    return "x" * int(megabytes * 2**20)


@server.tool(annotations=_READ_ONLY)
def records(count: int) -> list[dict[str, object]]:
    """``count`` records."""
    return [
        {"id": f"REC-{number:07d}", "title": f"record {number}", "amount": number} for number in range(count)
    ]


@server.tool(annotations=_READ_ONLY)
def echo(text: str) -> str:
    """``text`` back."""
    return text


async def _serve_http(json_response: bool) -> None:
    listening = socket.socket(socket.AF_INET, socket.SOCK_STREAM, socket.IPPROTO_TCP)
    listening.bind(("127.0.0.1", 0))  # a free port, chosen by the system
    listening.listen(64)  # connections wait in the backlog from now, before uvicorn has started
    app = server.streamable_http_app(json_response=json_response, host="127.0.0.1")
    print(f"listening http://127.0.0.1:{listening.getsockname()[1]}/mcp", file=sys.stderr, flush=True)
    await uvicorn.Server(uvicorn.Config(app, log_level="warning")).serve(sockets=[listening])


if __name__ == "__main__":
    mode = sys.argv[1] if len(sys.argv) > 1 else "stdio"
    if mode == "stdio":
        server.run()
    else:
        anyio.run(_serve_http, mode == "json")
