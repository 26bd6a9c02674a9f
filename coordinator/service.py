"""A long-lived coordinator beside the fleet: `research ask --transport http` answered warm.

Every `research` command is a fresh process, and before it can send one MCP request it imports the
mcp SDK: 1.2 to 1.5 s of CPU (its protocol types are pydantic models, built at import). Against a
fleet that is already serving, that import is most of what a user waits for. So `research sources
up` also starts this service: one process that has imported the coordinator once, keeps a session
with each source of the fleet open across queries, and shares its circuit breakers across them, as
a production coordinator would. `research ask --transport http` sends it the query and prints what
comes back; the command imports neither the SDK nor the sources.

    POST /ask     {"query": "...", "deadline_s": 29.6, "seed": null, "grants": [], "approve": [], "output": {...}}
                  200 {"status": "partial", "trace_id": "...", "output": "<the report, as asked>"}
                  400 {"error": "..."}  the query or a field is not usable (the asker's usage error)
                  413 {"error": "..."}  the body is larger than a query and its options can be; refused
                                        before it is read whole (Content-Length, or while it streams)
    GET  /health  {"service": "coordinator", "pid": 1234, "queries_in_flight": 0,
                   "sessions_opened": {"customers": 1, ...},
                   "dialled": {"customers": ["http://127.0.0.1:8101/mcp"], ...}}

Each source is dialled where the fleet's state (``fleet.json``, ``sources.processes.fleet``) has it when its
session opens, never on a default port: ``dialled`` lists the URLs each was opened on.

``output`` says how the asker prints: ``{"json": true}`` for the report's JSON, otherwise the
rendered report for its terminal (``width``, ``terminal``, ``color_system``), so that the asker need
not import the report's models to print it. An asker that hangs up (Ctrl-C) cancels its query.

Protected as chaos control is (``sources.processes.control``): loopback only, the SDK's Host and Origin checks,
JSON only, and the fleet's secret in a header. Deterministic mode only: Claude mode runs in the
asking process, with the asker's own API key.
"""

from __future__ import annotations

import io
import json
import os
import sys
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from typing import Any

import anyio
import typer
import uvicorn
from rich.console import Console
from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import JSONResponse, Response
from starlette.routing import Route

from coordinator.ask_service import NAME
from coordinator.core import Config, Coordinator
from coordinator.planning.planner import QueryError, plan_query
from coordinator.planning.reading import MAX_QUERY_CHARS
from coordinator.registry import DemoSource, fleet_target
from coordinator.reporting.render import print_report, print_task_table
from coordinator.reporting.report import ResearchReport
from sources.bounds import MAX_NESTING, TooLarge
from sources.catalogue import SOURCES
from sources.processes.control import refuse_unless_trusted
from sources.processes.fleet import Fleet
from sources.processes.serve import READY_PREFIX, BoundedShutdownServer, bind_loopback, log_plainly
from sources.security.fleet_secret import FLEET_SECRET_ENV
from sources.settings import SourceSettings
from subagents.broker import Grant
from subagents.guard import LocalGuard
from subagents.sessions.connection import Target
from subagents.writes import Approval
from traces.setup import start_run

__all__ = ["create_app", "main"]


def create_app(settings: SourceSettings, secret: str) -> Starlette:
    """The service: one set of sessions and breakers, for every query it is sent."""
    # Each source where the fleet's state has it, read each time a session opens (a source healed is
    # found again); never a default port, where another fleet, or anything, may listen.
    config = Config.for_ask(settings, fleet={})
    guard = LocalGuard()  # the breakers every query shares
    held: dict[str, Coordinator] = {}
    in_flight: set[anyio.CancelScope] = set()
    dialled: dict[str, list[str]] = {source: [] for source in SOURCES}  # the URLs each session opened on

    def noted(entry: DemoSource) -> Target:
        source = entry.name
        find = fleet_target(Fleet(settings), source)

        def dial() -> str:
            url = find()  # a source of the fleet is found at a URL
            if url not in dialled[source]:
                dialled[source].append(url)
            return url

        return entry.over_http(settings, dial)

    @asynccontextmanager
    async def lifespan(app: Starlette) -> AsyncIterator[None]:
        targets = config.targets()  # the demo sources' noted as they are dialled
        targets.update(
            (name, noted(entry))
            for name, entry in config.registry.sources().items()
            if isinstance(entry, DemoSource)
        )
        async with Coordinator(config, targets=targets, guard=guard) as coordinator:
            held["coordinator"] = coordinator
            coordinator.open_soon(SOURCES)  # the first query finds its sessions open, as every later one does
            yield

    async def health(request: Request) -> Response:
        refused = await refuse_unless_trusted(request, secret=None)
        if refused is not None:
            return refused
        coordinator = held.get("coordinator")
        return JSONResponse(
            {
                "service": NAME,
                "pid": os.getpid(),
                "queries_in_flight": len(in_flight),
                # Sessions opened per source since the service started: one each while all is well.
                "sessions_opened": coordinator.sessions_opened(SOURCES) if coordinator else {},
                "dialled": dialled,
            }
        )

    async def ask(request: Request) -> Response:
        refused = await refuse_unless_trusted(request, secret=secret)
        if refused is not None:
            return refused
        try:
            asked = _Asked.of(_json_body(await _bounded_body(request)))
            plan = plan_query(asked.query)
        except TooLarge:
            return JSONResponse({"error": _TOO_LARGE}, status_code=413)
        except (ValueError, QueryError) as exc:
            return JSONResponse({"error": str(exc)}, status_code=400)
        answered: list[ResearchReport] = []
        async with anyio.create_task_group() as group:
            in_flight.add(group.cancel_scope)
            try:
                group.start_soon(_cancel_when_gone, request, group.cancel_scope)
                answered.append(
                    await held["coordinator"].research(
                        asked.query,
                        deadline_s=asked.deadline_s,
                        seed=asked.seed,
                        plan=plan,
                        grants=tuple(Grant(scope) for scope in asked.grants),
                        approvals=asked.approvals,
                    )
                )
                group.cancel_scope.cancel()
            finally:
                in_flight.discard(group.cancel_scope)
        if not answered:  # the asker hung up and its query was cancelled: no one reads an answer
            return Response(status_code=499)
        report = answered[0]
        return JSONResponse(
            {
                "status": report.status, "trace_id": report.trace_id, "output": asked.render(report),
                "tasks": asked.render_tasks(report),
            }
        )  # fmt: skip

    return Starlette(
        routes=[Route("/health", health, methods=["GET"]), Route("/ask", ask, methods=["POST"])],
        lifespan=lifespan,
    )


async def _cancel_when_gone(request: Request, scope: anyio.CancelScope) -> None:
    """Cancel the query when the asker hangs up: the body is read, so the next message is the hang-up."""
    while (await request.receive())["type"] != "http.disconnect":
        pass
    scope.cancel()


_EXAMPLE = '{"query": "Refund £45 on ORD-10031?", "deadline_s": 30}'
# A query's most bytes, every character escaped (``\\uXXXX``: 6 bytes), and room for the options.
_MAX_BODY_BYTES = 6 * MAX_QUERY_CHARS + 64 * 1024
_TOO_LARGE = (
    f"the body is larger than {_MAX_BODY_BYTES:,} bytes; a query is at most {MAX_QUERY_CHARS:,} "
    f"characters, e.g. {_EXAMPLE}"
)


async def _bounded_body(request: Request) -> bytes:
    """The request's body, refused (``TooLarge``) before it is read whole: at once on a Content-Length
    over the bound, and while it streams (chunked, or a length that lies) as soon as it passes it.
    Starlette's ``request.body()`` would hold all of it first, whatever its size."""
    declared = request.headers.get("content-length", "")
    if declared.isdigit() and int(declared) > _MAX_BODY_BYTES:
        raise TooLarge(_MAX_BODY_BYTES)
    body = bytearray()
    async for chunk in request.stream():
        body += chunk
        if len(body) > _MAX_BODY_BYTES:
            raise TooLarge(_MAX_BODY_BYTES)
    return bytes(body)


def _json_body(body: bytes) -> Any:
    try:
        return json.loads(body)
    except ValueError as exc:  # not JSON, or not UTF-8
        raise ValueError(f"the body must be a JSON object such as {_EXAMPLE} ({exc})") from None
    except RecursionError:  # json's decoder recurses per level: past the interpreter's limit it gives up
        raise ValueError(
            f"the body nests deeper than {MAX_NESTING} levels; send a flat JSON object such as {_EXAMPLE}"
        ) from None


class _Asked:
    """What an asker sends, checked: each field named in the error when it is not usable."""

    def __init__(
        self, query: str, deadline_s: float, seed: int | None, output: dict[str, Any], grants: list[str],
        approvals: tuple[Approval, ...] = (),
    ) -> None:  # fmt: skip
        self.query, self.deadline_s, self.seed, self.output = query, deadline_s, seed, output
        self.grants, self.approvals = grants, approvals

    @classmethod
    def of(cls, body: Any) -> _Asked:
        if not isinstance(body, dict):
            raise ValueError(f"the body must be a JSON object such as {_EXAMPLE}")
        query, deadline_s = body.get("query"), body.get("deadline_s", 30.0)
        seed, output = body.get("seed"), body.get("output") or {}
        if not isinstance(query, str):
            raise ValueError('"query" must be the question as a string')
        if (
            isinstance(deadline_s, bool)
            or not isinstance(deadline_s, int | float)
            or not 0 < deadline_s <= 3600
        ):
            raise ValueError('"deadline_s" must be the seconds left for the query, above 0 and at most 3600')
        if seed is not None and (isinstance(seed, bool) or not isinstance(seed, int)):
            raise ValueError('"seed" must be a whole number or null')
        if not isinstance(output, dict):
            raise ValueError('"output" must be an object such as {"json": true}')
        grants = body.get("grants") or []
        if not isinstance(grants, list) or not all(isinstance(scope, str) and scope for scope in grants):
            raise ValueError('"grants" must be a list of scopes such as ["billing:read"]')
        approve = body.get("approve") or []
        if not isinstance(approve, list) or not all(isinstance(given, str) for given in approve):
            raise ValueError('"approve" must be a list of approved writes such as ["issue_refund:ORD-10031"]')
        try:
            approvals = tuple(Approval.parse(given) for given in approve)
        except ValueError as exc:
            raise ValueError(f'"approve": {exc}') from None
        return cls(query, float(deadline_s), seed, output, grants, approvals)

    def render(self, report: ResearchReport) -> str:
        """The report as the asker prints it on stdout: JSON, or rendered for its terminal."""
        if self.output.get("json"):
            return str(report.to_json())
        return self._rendered(lambda console: print_report(report, console))

    def render_tasks(self, report: ResearchReport) -> str:
        """The tasks' table, which the asker prints on stderr (as `research ask` does in process)."""
        return self._rendered(lambda console: print_task_table(report, console))

    def _rendered(self, printing: Any) -> str:
        width = self.output.get("width")
        buffer = io.StringIO()
        console = Console(
            file=buffer,
            width=width if isinstance(width, int) and 20 <= width <= 1000 else 80,
            force_terminal=bool(self.output.get("terminal")),
            color_system=self.output.get("color_system") if self.output.get("terminal") else None,
        )
        printing(console)
        return buffer.getvalue()


def main() -> None:
    def run(
        port: int = typer.Option(0, "--port", min=0, max=65535, help="HTTP port; 0 picks a free one."),
    ) -> None:
        try:
            settings = SourceSettings.from_environment()
            secret = os.environ.get(FLEET_SECRET_ENV, "")
            if len(secret) < 16:
                raise ValueError(
                    f"the service needs the fleet's secret in {FLEET_SECRET_ENV}; `research sources up` passes it"
                )
        except ValueError as exc:
            raise SystemExit(f"error: {exc}") from None
        log_plainly(NAME)
        start_run("research-coordinator", settings.traces_path)
        anyio.run(_serve, create_app(settings, secret), port)

    typer.run(run)


async def _serve(app: Starlette, port: int) -> None:
    sock = bind_loopback(port)
    url = f"http://127.0.0.1:{sock.getsockname()[1]}"
    runner = BoundedShutdownServer(uvicorn.Config(app, lifespan="on", log_config=None, log_level="warning"))
    print(
        READY_PREFIX + json.dumps({"source": NAME, "url": url, "pid": os.getpid()}),
        file=sys.stderr,
        flush=True,
    )
    await runner.serve(sockets=[sock])


if __name__ == "__main__":
    main()
