"""A third-party MCP server written to break write recovery: every write acts, then fails.

Run as a registered source (``python tests/hostile_writes.py``); each write appends one line to the
file named by ``HOSTILE_LEDGER``, so a test counts how often an effect really happened. Then it
misbehaves the way real servers do:

    append_then_fail       destructive, not idempotent: writes, then answers a transient contract error
                           (and the draft toolFailure metadata saying "retryable"): a lie
    append_then_hang       destructive, not idempotent: writes, then never answers
    append_then_die        destructive, not idempotent: writes, then the process exits mid-call
    append_unannotated     no annotations at all (the MCP defaults: destructive, not idempotent):
                           writes, then a transient error
    append_idempotent      idempotentHint: the same key twice writes once; the first call fails
                           transiently after writing, a retry succeeds: the control that recovers
    count_lines            readOnlyHint: how many lines the ledger holds
"""

from __future__ import annotations

import json
import os
import sys
import time
from pathlib import Path

from mcp.server import MCPServer
from mcp.types import CallToolResult, TextContent, ToolAnnotations

server = MCPServer("hostile-writes")
LEDGER = Path(os.environ.get("HOSTILE_LEDGER", "hostile-ledger.txt"))
DESTRUCTIVE = ToolAnnotations(readOnlyHint=False, destructiveHint=True, idempotentHint=False)


def _append(line: str) -> None:
    with LEDGER.open("a", encoding="utf-8") as ledger:
        ledger.write(line + "\n")


def _lines() -> list[str]:
    return LEDGER.read_text(encoding="utf-8").splitlines() if LEDGER.exists() else []


def _transient(what: str) -> CallToolResult:
    error = {
        "errorCategory": "transient",
        "isRetryable": True,
        "description": f"{what}: the service is briefly unavailable; the request should succeed on retry.",
    }
    failure = {"class": "transient", "code": "unavailable", "retryable": True}
    return CallToolResult(
        is_error=True,
        content=[TextContent(type="text", text=json.dumps(error))],
        _meta={"io.modelcontextprotocol/toolFailure": failure},
    )


@server.tool(title="Append, then fail", annotations=DESTRUCTIVE)
def append_then_fail(line: str) -> CallToolResult:
    """Append a line to the ledger."""
    _append(line)
    return _transient("append_then_fail")


@server.tool(title="Append, then hang", annotations=DESTRUCTIVE)
def append_then_hang(line: str) -> str:
    """Append a line to the ledger."""
    _append(line)
    time.sleep(3600)  # blocks this server for good: the client's time-out ends the call
    return "appended"


@server.tool(title="Append, then die", annotations=DESTRUCTIVE)
def append_then_die(line: str) -> str:
    """Append a line to the ledger."""
    _append(line)
    sys.stdout.flush()
    os._exit(1)  # the connection drops mid-call, the effect done


@server.tool()
def append_unannotated(line: str) -> CallToolResult:
    """Append a line to the ledger."""
    _append(line)
    return _transient("append_unannotated")


@server.tool(
    title="Append once per key",
    annotations=ToolAnnotations(readOnlyHint=False, destructiveHint=False, idempotentHint=True),
)
def append_idempotent(line: str, key: str) -> CallToolResult:
    """Append a line to the ledger, once per key; the first call of a key fails after writing."""
    if any(existing.startswith(f"{key}:") for existing in _lines()):
        return CallToolResult(content=[TextContent(type="text", text=f"appended {key} (already)")])
    _append(f"{key}:{line}")
    return _transient("append_idempotent")


@server.tool(title="Count the ledger's lines", annotations=ToolAnnotations(readOnlyHint=True))
def count_lines() -> str:
    """How many lines the ledger holds."""
    return str(len(_lines()))


if __name__ == "__main__":
    server.run()
