"""HTTP routes beside a source's MCP endpoint: health always, run-time chaos control on request.

    GET  /health   {"source": "kb", "pid": 1234, "faults": "hang=1", "chaos_control": true}
    GET  /chaos    the fault settings in force
    POST /chaos    {"faults": "latency=300ms,jitter=50ms"} replaces them ("" heals)

Chaos control is off unless the source was started with ``--chaos-control``; like the MCP endpoint
it listens on 127.0.0.1 only.
"""

from __future__ import annotations

import os
from typing import Any

from mcp.server import MCPServer
from starlette.requests import Request
from starlette.responses import JSONResponse, Response

from sources.faults import FaultLayer, FaultSettings

__all__ = ["add_control_routes", "fault_layer_of"]


def fault_layer_of(server: MCPServer) -> FaultLayer:
    return next(layer for layer in server.middleware if isinstance(layer, FaultLayer))


def add_control_routes(server: MCPServer, name: str, *, chaos_control: bool) -> None:
    layer = fault_layer_of(server)

    def state() -> dict[str, Any]:
        return {
            "source": name,
            "pid": os.getpid(),
            "faults": layer.settings.spec(),
            "chaos_control": chaos_control,
        }

    @server.custom_route("/health", methods=["GET"])
    async def health(request: Request) -> Response:
        return JSONResponse(state())

    if not chaos_control:
        return

    @server.custom_route("/chaos", methods=["GET", "POST"])
    async def chaos(request: Request) -> Response:
        if request.method == "POST":
            try:
                body = await request.json()
                layer.apply(FaultSettings.parse(str(body.get("faults", ""))))
            except (ValueError, AttributeError) as exc:
                message = str(exc) or 'the body must be JSON such as {"faults": "hang=1"}'
                return JSONResponse({"error": message}, status_code=400)
        return JSONResponse(state())
