"""HTTP routes beside a source's MCP endpoint: health always, run-time chaos control on request.

    GET  /health   {"source": "kb", "pid": 1234, "faults": "hang=1", "chaos_control": true}
    GET  /chaos    the fault settings in force
    POST /chaos    {"faults": "latency=300ms,jitter=50ms"} replaces them ("" heals)
                   {"faults": "transient=0.3", "mode": "merge"} changes only the faults named
                   (``FaultSettings.merged``): a fault added to those in force, or one cleared
                   ("transient=0"); merged here in one step, so two callers never undo each other's

Chaos control is off unless the source was started with ``--chaos-control``. What protects it, in
layers, so that nothing a web page can send reaches it:

* it listens on 127.0.0.1, or on the one address the fleet was given (``sources.security.listen``);
* the MCP endpoint's own request checks (the SDK's, with the SDK's defaults for a loopback server):
  a POST must be ``application/json`` (a cross-site form or ``text/plain`` "simple request" is not),
  the Host must be a loopback name or that address (DNS rebinding), an Origin, if sent, the same;
* a per-fleet secret: ``research sources up`` makes one, keeps it in a 0600 file beside the
  fleet's state, passes it to each source (``RESEARCH_FLEET_SECRET``), and ``research chaos ...``
  sends it in ``X-Research-Fleet-Secret``. A browser can neither read the file nor, cross-site, set
  that header without a preflight that nothing here answers.
"""

from __future__ import annotations

import hmac
import os
from typing import Any

from mcp.server import MCPServer
from mcp.server.transport_security import TransportSecurityMiddleware
from starlette.requests import Request
from starlette.responses import JSONResponse, Response

from sources.faults import FaultLayer, FaultSettings
from sources.security.fleet_secret import FLEET_SECRET_ENV, FLEET_SECRET_HEADER
from sources.security.listen import LOOPBACK, transport_security

__all__ = ["add_control_routes", "refuse_unless_trusted"]


async def refuse_unless_trusted(
    request: Request, *, secret: str | None, host: str = LOOPBACK
) -> Response | None:
    """The refusal for a request that a web page could have sent, or that lacks the fleet's secret
    (when ``secret`` is given); None for a request to serve. Every route beside an MCP endpoint, a
    source's (listening on ``host``) or the coordinator service's, goes through here."""
    # The checks the SDK applies to the MCP endpoint itself (sources.security.listen).
    checks = TransportSecurityMiddleware(transport_security(host))
    refused = await checks.validate_request(request, is_post=request.method == "POST")
    if refused is not None or secret is None:
        return refused
    if not hmac.compare_digest(request.headers.get(FLEET_SECRET_HEADER, "").encode(), secret.encode()):
        return JSONResponse(
            {"error": f"this route needs the fleet's secret in {FLEET_SECRET_HEADER}; `research` sends it"},
            status_code=403,
        )
    return None


def add_control_routes(server: MCPServer, name: str, *, chaos_control: bool, host: str = LOOPBACK) -> None:
    """Add /health, and /chaos when ``chaos_control``; chaos control needs ``RESEARCH_FLEET_SECRET``."""
    layer = next(layer for layer in server.middleware if isinstance(layer, FaultLayer))
    secret = os.environ.get(FLEET_SECRET_ENV, "")
    if chaos_control and len(secret) < 16:
        raise ValueError(
            f"--chaos-control needs a secret of at least 16 characters in {FLEET_SECRET_ENV}; "
            "`research sources up --chaos` makes one"
        )

    def state() -> dict[str, Any]:
        return {
            "source": name,
            "pid": os.getpid(),
            "faults": layer.settings.spec(),
            "chaos_control": chaos_control,
        }

    # The SDK's route decorator has no return type: decorating with it would leave the handlers
    # untyped, so it is called on them instead.
    async def health(request: Request) -> Response:
        refused = await refuse_unless_trusted(request, secret=None, host=host)
        return refused or JSONResponse(state())

    server.custom_route("/health", methods=["GET"])(health)
    if not chaos_control:
        return

    async def chaos(request: Request) -> Response:
        refused = await refuse_unless_trusted(request, secret=secret, host=host)
        if refused is not None:
            return refused
        if request.method == "POST":
            try:
                body = await request.json()
                change = FaultSettings.parse(str(body.get("faults", "")))
                mode = body.get("mode", "replace")
                if mode not in ("replace", "merge"):
                    raise ValueError(f'mode must be "replace" or "merge", not {mode!r}')
                layer.apply(layer.settings.merged(change) if mode == "merge" else change)
            except (ValueError, AttributeError) as exc:
                message = str(exc) or 'the body must be JSON such as {"faults": "hang=1", "mode": "merge"}'
                return JSONResponse({"error": message}, status_code=400)
        return JSONResponse(state())

    server.custom_route("/chaos", methods=["GET", "POST"])(chaos)
