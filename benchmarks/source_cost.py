"""A source's own cost per call: every tool of the five sources against the SDK's no-op tool.

Each source runs over stdio as the coordinator spawns it (``python -m sources.NAME``), twice: with
tracing as shipped (spans to files, each exported as it ends) and with ``OTEL_SDK_DISABLED=true``.
Beside them runs the baseline, the mcp SDK's own server with one tool that returns an empty string
(this script, ``--serve-noop``). One mcp ``Client`` per process, the same SDK; the calls go round
every tool and variant in turn, so machine noise falls on all alike. A tool that needs a scope gets
a credential in its ``_meta`` as a subagent sends it (so its cost includes verifying it); the refund
is issued once and then replayed by its idempotency key.

Then the cold start of a standalone source: spawn to ``initialize`` answered, against
``python -c "import mcp.server"`` and the no-op server's spawn to ``initialize``, in the same rounds.

    .venv/bin/python benchmarks/source_cost.py [--calls 300] [--starts 8] [--against ../before]

``--against`` runs another checkout's sources (say, the code before a change: ``git worktree add``
or ``git archive | tar -x``) in the same rounds, so both are measured in one machine state.

Goals (issue 29): every read tool at most 1.3x the no-op tool's p50, no tool above 1.5x; tracing
on/off at most 1.10 per tool; spawn to ``initialize`` at most ``import mcp.server`` + 0.3 s.
Issue 46: every read tool at most 1.3x the same answer from a bare SDK tool ("x same"), the fair
floor: what the SDK and its client cost to carry that answer, validating it both ends. Each source's
bare tools run in a process of their own, called as often as the source is, so that both are as warm
when called (``twin_process``; ``--shared-twin`` puts every source's in one process, as before).
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import sys
import tempfile
import time
from contextlib import AsyncExitStack
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import anyio
import psutil
from mcp import Client, StdioServerParameters
from mcp.types import SERVER_INFO_META_KEY, CallToolResult

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from sources.security.auth import CREDENTIAL_META_KEY, issue_credential  # noqa: E402
from sources.settings import SourceSettings  # noqa: E402
from subagents.sessions.connection import stdio_parameters  # noqa: E402

READ_GOAL, ANY_GOAL, TRACING_GOAL, START_GOAL_S = 1.3, 1.5, 1.10, 0.3
NOOP = "noop"
TWIN = "same answer"  # the recorded answers, from a bare SDK tool (see serve_twins)
ASYNC_NOOP, ASYNC_NOOP_TOOL = "async no-op (mcp SDK)", "async_noop"
AGAINST = "against"  # another checkout's source (--against), measured in the same rounds
IMPORT_LABEL = 'python -c "import mcp.server"'


@dataclass(frozen=True)
class Case:
    source: str
    tool: str
    arguments: dict[str, Any]
    record: str  # the tool's record model, in sources.<source>: its output schema is ResultPage[record]
    scope: str | None = None
    writes: bool = False

    @property
    def name(self) -> str:
        return f"{self.source}.{self.tool}"


CASES = (
    Case("customers", "customer_lookup", {"identifier": "jane.doe@example.com"}, "Customer"),
    Case("customers", "find_customers", {"name": "Jane Doe"}, "Customer"),
    Case("orders", "search_orders", {"customer_id": "CUST-00042"}, "Order"),
    Case("orders", "get_order", {"order_id": "ORD-10023"}, "Order"),
    Case("billing", "list_invoices", {"customer_id": "CUST-00042"}, "Invoice", scope="billing:read"),
    Case(
        "billing",
        "refund_eligibility",
        {"order_id": "ORD-10023", "amount": 45.0},
        "RefundAssessment",
        scope="billing:read",
    ),
    Case(
        "billing",
        "issue_refund",
        {"order_id": "ORD-10023", "amount": 5.0, "idempotency_key": "bench-source-cost-01"},
        "Refund",
        scope="billing:refund",
        writes=True,
    ),
    Case("kb", "search_policies", {"query": "damaged item refund"}, "Policy"),
    Case("kb", "related_policies", {"article_id": "KB-REFUNDS"}, "RelatedPolicy"),
    Case("tickets", "search_tickets", {"customer_id": "CUST-00042"}, "Ticket"),
)
SOURCES = tuple(dict.fromkeys(case.source for case in CASES))


def serve_noop() -> None:
    """The baseline: the SDK's server, as its own docs start one, with a tool that does nothing (and the
    same as an async tool)."""
    from mcp.server import MCPServer

    server = MCPServer(NOOP)

    @server.tool()
    def noop() -> str:
        return ""

    @server.tool(name=ASYNC_NOOP_TOOL)
    async def async_noop() -> str:  # the floor: no hop to a worker thread, as a plain def takes
        return ""

    server.run()


def serve_twins(answers_file: str, source: str | None) -> None:
    """Each tool's recorded answer (of ``source``'s tools, or every source's), from the SDK's server with
    the same output schema and nothing of the source's own: what the SDK and its client cost to carry
    that answer (validating it both ends)."""
    import importlib
    import inspect
    from typing import Annotated

    from mcp.server import MCPServer
    from mcp.types import CallToolResult

    from sources.contract import ResultPage

    server = MCPServer(TWIN)
    answers = json.loads(Path(answers_file).read_text(encoding="utf-8"))
    for case in CASES:
        if source is not None and case.source != source:
            continue
        record = getattr(importlib.import_module(f"sources.{case.source}"), case.record)
        answer = CallToolResult.model_validate(answers[case.name])

        async def twin(answer: CallToolResult = answer) -> CallToolResult:
            return answer

        twin.__signature__ = inspect.Signature(  # type: ignore[attr-defined]
            return_annotation=Annotated[CallToolResult, ResultPage[record]]  # type: ignore[valid-type]
        )
        server.add_tool(twin, name=twin_name(case))

    server.run()


def recorded_answer(result: CallToolResult) -> dict[str, Any]:
    """A tool's answer as a bare SDK tool returns it: without the ``serverInfo`` stamp in ``_meta``,
    which the SDK's server adds to every result. A result that carries one is left as it is, so a twin
    returning the stamp as recorded skipped the copy of it the SDK makes for every other tool (a deep
    copy per call, 10 to 15 us): the twin measured less than the SDK costs any tool."""
    answer = result.model_dump(mode="json", by_alias=True, exclude_none=True)
    meta = {key: value for key, value in answer.pop("_meta", {}).items() if key != SERVER_INFO_META_KEY}
    return {**answer, "_meta": meta} if meta else answer


def noop_parameters(env: dict[str, str]) -> StdioServerParameters:
    return StdioServerParameters(command=sys.executable, args=[__file__, "--serve-noop"], env=env)


def twin_name(case: Case) -> str:
    return case.name.replace(".", "_")


def twin_parameters(env: dict[str, str], answers_file: Path, source: str | None) -> StdioServerParameters:
    serves = [] if source is None else [source]
    return StdioServerParameters(
        command=sys.executable, args=[__file__, "--serve-twins", str(answers_file), *serves], env=env
    )


def twin_process(case: Case, shared: bool) -> str:
    """The process that answers ``case``'s twin: the source's own twin process, called as often as the
    source is (so both are as warm), or with ``shared`` one process for every twin (as before
    2026-12-05: that process, called for every tool, was warmer than any source's)."""
    return TWIN if shared else f"{TWIN} {case.source}"


def quantile(samples: list[float], q: float) -> float:
    return statistics.quantiles(samples, n=100)[int(q * 100) - 1]


@dataclass
class Measured:
    """One kind of call: the wall time of each, and the CPU time its server spent per call, by block."""

    walls: list[float] = field(default_factory=list)
    cpus: list[float] = field(default_factory=list)


async def per_call(
    settings: SourceSettings, calls: int, block: int, against: Path | None = None, shared_twin: bool = False
) -> dict[str, Measured]:
    """By "NAME traced", "NAME untraced", "NAME same answer", NOOP and ASYNC_NOOP; with ``against``
    (another checkout), also "NAME against": that checkout's source, traced, in the same rounds."""
    key = settings.signing_key()
    async with AsyncExitStack() as stack:
        clients: dict[str, tuple[Client, psutil.Process]] = {}

        async def start(name: str, parameters: StdioServerParameters) -> None:
            before = {child.pid for child in psutil.Process().children()}
            client = await stack.enter_async_context(Client(parameters))
            (server,) = [child for child in psutil.Process().children() if child.pid not in before]
            clients[name] = (client, server)

        await start(NOOP, noop_parameters(settings.child_environment()))
        for source in SOURCES:
            for variant, extra in (("traced", {}), ("untraced", {"OTEL_SDK_DISABLED": "true"})):
                parameters = stdio_parameters(source, settings)
                parameters.env = {**(parameters.env or {}), **extra}
                await start(f"{source} {variant}", parameters)
            if against is not None:  # python -m sources.NAME from there: its own code, this venv
                parameters = stdio_parameters(source, settings)
                parameters.cwd = against
                await start(f"{source} {AGAINST}", parameters)
        metas = {  # a credential as a subagent is granted it, for the calls that need a scope
            case.name: {
                CREDENTIAL_META_KEY: issue_credential(key, "benchmark", {case.scope}, source=case.source)
            }
            if case.scope
            else None
            for case in CASES
        }
        # Each tool's answer, recorded once, for the bare SDK tools that return it (the same schema).
        answers = {}
        for case in CASES:
            client = clients[f"{case.source} traced"][0]
            result = await client.call_tool(case.tool, case.arguments, meta=metas[case.name])  # type: ignore[arg-type]
            answers[case.name] = recorded_answer(result)
        answers_file = settings.data_dir / "answers.json"
        answers_file.write_text(json.dumps(answers), encoding="utf-8")
        published: dict[str, dict[str, Any] | None] = {}
        for twinned in [None] if shared_twin else SOURCES:
            name = TWIN if twinned is None else f"{TWIN} {twinned}"
            await start(name, twin_parameters(settings.child_environment(), answers_file, twinned))
            published |= {
                tool.name: tool.output_schema for tool in (await clients[name][0].list_tools()).tools
            }
        for case in CASES:
            listed = (await clients[f"{case.source} traced"][0].list_tools()).tools
            (tool,) = [each for each in listed if each.name == case.tool]
            assert published[twin_name(case)] == tool.output_schema, f"{case.name}: another output schema"

        # Each kind of call: its client, the tool, its arguments and its _meta.
        plan: dict[str, tuple[str, str, dict[str, Any], Any]] = {
            NOOP: (NOOP, "noop", {}, None),
            ASYNC_NOOP: (NOOP, ASYNC_NOOP_TOOL, {}, None),
        }
        for case in CASES:
            for variant in ("traced", "untraced"):
                plan[f"{case.name} {variant}"] = (
                    f"{case.source} {variant}",
                    case.tool,
                    case.arguments,
                    metas[case.name],
                )
            plan[f"{case.name} {TWIN}"] = (twin_process(case, shared_twin), twin_name(case), {}, None)
            if against is not None:
                plan[f"{case.name} {AGAINST}"] = (
                    f"{case.source} {AGAINST}",
                    case.tool,
                    case.arguments,
                    metas[case.name],
                )
        measured = {name: Measured() for name in plan}

        def cpu_seconds(server: psutil.Process) -> float:
            """The CPU time of every thread of ``server`` so far: from the scheduler's nanosecond count
            where Linux keeps one (/proc/PID/task/*/schedstat), else psutil's (clock ticks, 10 ms)."""
            try:
                return sum(
                    int(path.read_text().split()[0]) / 1e9
                    for path in Path(f"/proc/{server.pid}/task").glob("*/schedstat")
                )
            except (OSError, ValueError):
                times = server.cpu_times()
                return float(times.user + times.system)

        for round_ in range(calls // block + 2):  # the first two rounds warm the caches, not counted
            for name, (process, tool, arguments, meta) in plan.items():
                client, server = clients[process]
                cpu = cpu_seconds(server)
                walls = []
                for _ in range(block):
                    started = time.perf_counter()
                    result = await client.call_tool(tool, arguments, meta=meta)
                    walls.append(time.perf_counter() - started)
                    if result.is_error:
                        raise SystemExit(f"{name} failed: {result.content}")
                spent = cpu_seconds(server) - cpu
                if round_ >= 2:
                    measured[name].walls.extend(walls)
                    measured[name].cpus.append(spent / block)
    return measured


async def cold_starts(settings: SourceSettings, starts: int) -> dict[str, list[float]]:
    """Seconds from spawn to ``initialize`` answered, by source, beside ``import mcp.server``."""
    found: dict[str, list[float]] = {}
    for round_ in range(starts + 1):  # round 0 warms the disk cache and bytecode, not counted
        started = time.perf_counter()
        await anyio.run_process([sys.executable, "-c", "import mcp.server"], check=True)
        timings = {"import mcp.server": time.perf_counter() - started}
        for name, parameters in (
            (NOOP, noop_parameters(settings.child_environment())),
            *((source, stdio_parameters(source, settings)) for source in SOURCES),
        ):
            started = time.perf_counter()
            async with Client(parameters):
                timings[name] = time.perf_counter() - started
        if round_:
            for name, seconds in timings.items():
                found.setdefault(name, []).append(seconds)
    return found


def report_calls(measured: dict[str, Measured], calls: int, block: int) -> None:
    p50 = {name: statistics.median(found.walls) for name, found in measured.items()}
    cpu = {name: statistics.mean(found.cpus) for name, found in measured.items()}
    base = p50[NOOP]
    print(f"{calls} calls of each over stdio, {block} back to back at a time; wall p50 and p90 in ms,")
    print("the server's CPU per call in ms; ratios of the p50s; on/off: tracing on against off")
    print(
        f"{'tool':27} {'p50':>5} {'p90':>5} {'x no-op':>7} {'same':>5} {'x same':>6} {'on/off':>6} {'cpu':>5} {'on/off':>6} {'x same':>6}"
    )
    for name, label in ((NOOP, "no-op tool (mcp SDK)"), (ASYNC_NOOP, ASYNC_NOOP)):
        found = measured[name].walls
        print(
            f"{label:27} {p50[name] * 1000:5.2f} {quantile(found, 0.9) * 1000:5.2f} "
            f"{p50[name] / base:6.2f}x {'':5} {'':6} {'':6} {cpu[name] * 1000:5.2f}"
        )
    worst = {"read": 0.0, "any": 0.0, "tracing": 0.0, "tracing cpu": 0.0, "own": 0.0, "own read": 0.0}
    for case in CASES:
        on, off, same = (f"{case.name} {variant}" for variant in ("traced", "untraced", TWIN))
        ratio, own = p50[on] / base, p50[on] / p50[same]
        tracing, tracing_cpu = p50[on] / p50[off], cpu[on] / cpu[off]
        for figure, value in (
            ("any", ratio),
            ("tracing", tracing),
            ("tracing cpu", tracing_cpu),
            ("own", own),
        ):
            worst[figure] = max(worst[figure], value)
        if not case.writes:
            worst["read"] = max(worst["read"], ratio)
            worst["own read"] = max(worst["own read"], own)
        print(
            f"{case.name + (' (w)' if case.writes else ''):27} {p50[on] * 1000:5.2f} "
            f"{quantile(measured[on].walls, 0.9) * 1000:5.2f} {ratio:6.2f}x {p50[same] * 1000:5.2f} "
            f"{own:5.2f}x {tracing:6.2f} {cpu[on] * 1000:5.2f} {tracing_cpu:6.2f} {cpu[on] / cpu[same]:5.2f}x"
        )
    print("same: the same answer from a bare SDK tool (async) with the same output schema;")
    print("(w): writes. No-op tool: a plain def, which the SDK runs on a worker thread. The last column:")
    print(
        "the server's CPU per call against the bare SDK tool's (steadier than wall time on a busy machine)."
    )
    print(f"worst read tool: {worst['read']:.2f}x the no-op p50 (goal <= {READ_GOAL})")
    print(f"worst tool: {worst['any']:.2f}x the no-op p50 (goal <= {ANY_GOAL})")
    print(
        f"worst read tool against the same answer from a bare SDK tool: {worst['own read']:.2f}x (goal <= {READ_GOAL})"
    )
    print(f"worst tool against the same answer from a bare SDK tool: {worst['own']:.2f}x")
    print(
        f"worst tracing on/off: {worst['tracing']:.2f} wall, {worst['tracing cpu']:.2f} CPU (goal <= {TRACING_GOAL:.2f})"
    )


def report_against(measured: dict[str, Measured], against: Path) -> None:
    """Each tool here and in the other checkout, side by side: same rounds, same twin."""
    p50 = {name: statistics.median(found.walls) for name, found in measured.items()}
    cpu = {name: statistics.mean(found.cpus) for name, found in measured.items()}
    print(f"against {against}, in the same rounds: p50 in ms, x same, server CPU per call in ms")
    print(f"{'tool':27} {'here':>5} {'x same':>6} {'there':>5} {'x same':>6} {'cpu':>5} {'there':>5}")
    worst = {"here": 0.0, "there": 0.0}
    for case in CASES:
        here, there, same = (f"{case.name} {variant}" for variant in ("traced", AGAINST, TWIN))
        if not case.writes:
            worst["here"] = max(worst["here"], p50[here] / p50[same])
            worst["there"] = max(worst["there"], p50[there] / p50[same])
        print(
            f"{case.name + (' (w)' if case.writes else ''):27} {p50[here] * 1000:5.2f} "
            f"{p50[here] / p50[same]:5.2f}x {p50[there] * 1000:5.2f} {p50[there] / p50[same]:5.2f}x "
            f"{cpu[here] * 1000:5.2f} {cpu[there] * 1000:5.2f}"
        )
    print(
        f"worst read tool against the same answer from a bare SDK tool: here {worst['here']:.2f}x, "
        f"there {worst['there']:.2f}x (goal <= {READ_GOAL})"
    )


def report_starts(found: dict[str, list[float]], starts: int) -> None:
    imported = statistics.median(found["import mcp.server"])
    print(f"cold start, {starts} rounds: median seconds from spawn to initialize answered")
    print(f"{IMPORT_LABEL:32} {imported:7.3f} s")
    worst = 0.0
    for name, seconds in found.items():
        if name == "import mcp.server":
            continue
        median = statistics.median(seconds)
        label = "no-op server (mcp SDK)" if name == NOOP else f"python -m sources.{name}"
        if name != NOOP:
            worst = max(worst, median - imported)
        print(f"{label:32} {median:7.3f} s  {median - imported:+.3f} s")
    print(f"worst source start: import mcp.server {worst:+.3f} s (goal <= +{START_GOAL_S} s)")


def main() -> None:
    if sys.argv[1:] == ["--serve-noop"]:
        serve_noop()
        return
    if sys.argv[1:2] == ["--serve-twins"]:
        serve_twins(sys.argv[2], sys.argv[3] if len(sys.argv) > 3 else None)
        return
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--calls", type=int, default=300)
    parser.add_argument("--block", type=int, default=10, help="calls of one kind back to back")
    parser.add_argument("--starts", type=int, default=8)
    parser.add_argument(
        "--against", type=Path, help="another checkout (e.g. the code before a change), measured alongside"
    )
    parser.add_argument(
        "--shared-twin",
        action="store_true",
        help="one process for every source's twins, as before 2026-12-05 (see twin_process)",
    )
    options = parser.parse_args()
    with tempfile.TemporaryDirectory() as data_dir:
        # The tickets source's rate limit is a behaviour, not a cost: set it out of the way.
        settings = SourceSettings(
            data_dir=Path(data_dir), kb_warmup_ms=0, tickets_rate_per_second=1e6, tickets_burst=10**6
        )
        os.environ.pop("OTEL_SDK_DISABLED", None)
        against = None if options.against is None else options.against.resolve()
        measured = anyio.run(per_call, settings, options.calls, options.block, against, options.shared_twin)
        report_calls(measured, options.calls, options.block)
        if against is not None:
            report_against(measured, against)
        report_starts(anyio.run(cold_starts, settings, options.starts), options.starts)


if __name__ == "__main__":
    main()
