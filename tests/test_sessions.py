"""Sessions with the sources (``subagents.sessions.connection``): what a session does as it starts."""

from __future__ import annotations

from collections.abc import Callable

import anyio
import pytest
from mcp.server import MCPServer
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter

from subagents.hooks import ToolCall
from subagents.sessions.connection import Connections

pytestmark = pytest.mark.anyio

BOUND_S = 30


async def test_the_tools_listing_comes_with_the_session_start_not_after_the_first_call(
    server_for: Callable[..., MCPServer], spans: InMemorySpanExporter
) -> None:
    """The SDK validates a result against the tool's listed output schema, and lists the tools after
    the first call of a tool it has not seen listed: a round trip on every task's critical path. The
    session lists them as it opens, so no call is followed by a listing."""
    server = server_for("orders")
    with anyio.fail_after(BOUND_S):
        async with Connections.opened({"orders": lambda: server}) as connections:
            connection = connections["orders"]
            client, _ = await connection.session()
            listed_before_the_call = [span.name for span in spans.get_finished_spans()]
            for customer in ("CUST-00042", "CUST-00077"):
                call = ToolCall("orders", "search_orders", {"customer_id": customer}, attempt=1)
                await connection.send(client, call, timeout_s=BOUND_S, meta=None)
    # What the source served, in order (its server spans: in memory, the client records none).
    served = [span.name for span in spans.get_finished_spans() if span.name.startswith("tools/")]
    assert "tools/list" in listed_before_the_call
    assert served == ["tools/list", *["tools/call search_orders"] * 2]
