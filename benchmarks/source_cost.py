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

    .venv/bin/python benchmarks/source_cost.py [--calls 300] [--starts 8]

Goals (issue 29): every read tool at most 1.3x the no-op tool's p50, no tool above 1.5x; tracing
on/off at most 1.10 per tool; spawn to ``initialize`` at most ``import mcp.server`` + 0.3 s.
"""

from __future__ import annotations

import argparse
import os
import statistics
import sys
import tempfile
import time
from contextlib import AsyncExitStack
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import anyio
from mcp import Client, StdioServerParameters

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from sources.auth import CREDENTIAL_META_KEY, issue_credential  # noqa: E402
from sources.settings import SourceSettings  # noqa: E402
from subagents.connection import stdio_parameters  # noqa: E402

READ_GOAL, ANY_GOAL, TRACING_GOAL, START_GOAL_S = 1.3, 1.5, 1.10, 0.3
NOOP = "noop"
IMPORT_LABEL = 'python -c "import mcp.server"'


@dataclass(frozen=True)
class Case:
    source: str
    tool: str
    arguments: dict[str, Any]
    scope: str | None = None
    writes: bool = False

    @property
    def name(self) -> str:
        return f"{self.source}.{self.tool}"


CASES = (
    Case("customers", "customer_lookup", {"identifier": "jane.doe@example.com"}),
    Case("customers", "find_customers", {"name": "Jane Doe"}),
    Case("orders", "search_orders", {"customer_id": "CUST-00042"}),
    Case("orders", "get_order", {"order_id": "ORD-10023"}),
    Case("billing", "list_invoices", {"customer_id": "CUST-00042"}, scope="billing:read"),
    Case("billing", "refund_eligibility", {"order_id": "ORD-10023", "amount": 45.0}, scope="billing:read"),
    Case(
        "billing",
        "issue_refund",
        {"order_id": "ORD-10023", "amount": 5.0, "idempotency_key": "bench-source-cost-01"},
        scope="billing:refund",
        writes=True,
    ),
    Case("kb", "search_policies", {"query": "damaged item refund"}),
    Case("kb", "related_policies", {"article_id": "KB-REFUNDS"}),
    Case("tickets", "search_tickets", {"customer_id": "CUST-00042"}),
)
SOURCES = tuple(dict.fromkeys(case.source for case in CASES))


def serve_noop() -> None:
    """The baseline: the SDK's server, as its own docs start one, with a tool that does nothing."""
    from mcp.server import MCPServer

    server = MCPServer(NOOP)

    @server.tool()
    def noop() -> str:
        return ""

    server.run()


def noop_parameters(env: dict[str, str]) -> StdioServerParameters:
    return StdioServerParameters(command=sys.executable, args=[__file__, "--serve-noop"], env=env)


def quantile(samples: list[float], q: float) -> float:
    return statistics.quantiles(samples, n=100)[int(q * 100) - 1]


async def per_call(settings: SourceSettings, calls: int) -> dict[str, list[float]]:
    """Samples in seconds, by "NAME traced"/"NAME untraced" and NOOP."""
    key = settings.signing_key()
    untraced_env = {"OTEL_SDK_DISABLED": "true"}
    samples: dict[str, list[float]] = {NOOP: []}
    async with AsyncExitStack() as stack:
        noop = await stack.enter_async_context(Client(noop_parameters(settings.child_environment())))
        clients: dict[tuple[str, str], Client] = {}
        for source in SOURCES:
            for variant, extra in (("traced", {}), ("untraced", untraced_env)):
                parameters = stdio_parameters(source, settings)
                parameters.env = {**(parameters.env or {}), **extra}
                clients[source, variant] = await stack.enter_async_context(Client(parameters))
        metas = {  # a credential as a subagent is granted it, for the calls that need a scope
            case.name: {
                CREDENTIAL_META_KEY: issue_credential(key, "benchmark", {case.scope}, source=case.source)
            }
            if case.scope
            else None
            for case in CASES
        }

        async def call(client: Client, case: Case | None) -> float:
            started = time.perf_counter()
            if case is None:
                result = await noop.call_tool("noop", {})
            else:
                result = await client.call_tool(case.tool, case.arguments, meta=metas[case.name])  # type: ignore[arg-type]
            elapsed = time.perf_counter() - started
            if result.is_error:
                raise SystemExit(f"{case.name if case else NOOP} failed: {result.content}")
            return elapsed

        for round_ in range(calls + 20):  # the first 20 rounds warm the caches and are not counted
            for case in (None, *CASES):
                variants = ("",) if case is None else ("traced", "untraced")
                for variant in variants:
                    client = noop if case is None else clients[case.source, variant]
                    elapsed = await call(client, case)
                    if round_ >= 20:
                        name = NOOP if case is None else f"{case.name} {variant}"
                        samples.setdefault(name, []).append(elapsed)
    return samples


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


def report_calls(samples: dict[str, list[float]], calls: int) -> None:
    base = statistics.median(samples[NOOP])
    print(f"{calls} calls each over stdio; p50 and p90 in ms; ratios of the p50s")
    print(f"{'tool':32} {'p50':>7} {'p90':>7} {'x no-op':>8} {'off p50':>8} {'on/off':>7}")
    print(f"{'no-op tool (mcp SDK)':32} {base * 1000:7.2f} {quantile(samples[NOOP], 0.9) * 1000:7.2f}")
    worst_read = worst_any = worst_tracing = 0.0
    for case in CASES:
        on, off = samples[f"{case.name} traced"], samples[f"{case.name} untraced"]
        ratio, tracing = statistics.median(on) / base, statistics.median(on) / statistics.median(off)
        worst_any, worst_tracing = max(worst_any, ratio), max(worst_tracing, tracing)
        if not case.writes:
            worst_read = max(worst_read, ratio)
        print(
            f"{case.name + (' (writes)' if case.writes else ''):32} {statistics.median(on) * 1000:7.2f} "
            f"{quantile(on, 0.9) * 1000:7.2f} {ratio:7.2f}x {statistics.median(off) * 1000:8.2f} {tracing:7.2f}"
        )
    print(f"worst read tool: {worst_read:.2f}x the no-op p50 (goal <= {READ_GOAL})")
    print(f"worst tool: {worst_any:.2f}x the no-op p50 (goal <= {ANY_GOAL})")
    print(f"worst tracing on/off: {worst_tracing:.2f} (goal <= {TRACING_GOAL:.2f})")


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
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--calls", type=int, default=300)
    parser.add_argument("--starts", type=int, default=8)
    options = parser.parse_args()
    with tempfile.TemporaryDirectory() as data_dir:
        # The tickets source's rate limit is a behaviour, not a cost: set it out of the way.
        settings = SourceSettings(
            data_dir=Path(data_dir), kb_warmup_ms=0, tickets_rate_per_second=1e6, tickets_burst=10**6
        )
        os.environ.pop("OTEL_SDK_DISABLED", None)
        report_calls(anyio.run(per_call, settings, options.calls), options.calls)
        report_starts(anyio.run(cold_starts, settings, options.starts), options.starts)


if __name__ == "__main__":
    main()
