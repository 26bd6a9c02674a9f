"""A third-party MCP server that drops its session under load, once: the collapse a breaker must survive.

Run over stdio (``python tests/dropping_server.py``). ``lookup`` (read-only) waits until ``DROP_UNDER``
calls are in flight at once, then, the first time only (the marker file ``DROP_MARKER`` remembers it),
the process exits: every call in flight fails together, as when one corrupted answer makes a client
drop a session. The process started again answers every call at once.
"""

from __future__ import annotations

import asyncio
import os
from pathlib import Path

from mcp.server import MCPServer
from mcp.types import ToolAnnotations

server = MCPServer("dropping")
UNDER = int(os.environ.get("DROP_UNDER", "8"))
MARKER = Path(os.environ.get("DROP_MARKER", "dropped.marker"))
_in_flight = 0
_all_here = asyncio.Event()


def _dropped_before() -> bool:
    return MARKER.exists()


def _drop() -> None:
    MARKER.write_text("dropped")
    os._exit(1)


@server.tool(annotations=ToolAnnotations(readOnlyHint=True))
async def lookup(key: str) -> str:
    """Look a key up."""
    global _in_flight
    if _dropped_before():
        return f"found {key}"
    _in_flight += 1
    if _in_flight >= UNDER:
        _all_here.set()
    await _all_here.wait()
    _drop()
    return "unreachable"


if __name__ == "__main__":
    server.run()
