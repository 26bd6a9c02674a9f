"""Overhead of one call through a subagent against a bare mcp ``Client.call_tool``.

Both go through the same live MCP session to the same warm source process (orders, spawned over
stdio), in alternating order so that machine noise falls on both alike: the only difference is the
subagent's own work (pre-call hooks, breaker, classification, post-call hooks, policy). No faults.

Over streamable HTTP on loopback, each call here costs about 48 ms whichever path makes it (the
transport's own latency: delayed ACKs), which would drown the difference; stdio shows it.

    .venv/bin/python benchmarks/subagent_overhead.py [--calls 300]

Prints the p50 and p90 of each and the ratio of the p50s (target: at most 1.25).
"""

from __future__ import annotations

import argparse
import statistics
import sys
import tempfile
import time
from pathlib import Path

import anyio

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from sources.settings import SourceSettings  # noqa: E402
from subagents.broker import CredentialBroker  # noqa: E402
from subagents.sessions.connection import Connections, stdio_target  # noqa: E402
from subagents.subagent import Runtime, Task, run_subagent  # noqa: E402

ARGUMENTS = {"customer_id": "CUST-00042"}


def quantile(samples: list[float], q: float) -> float:
    return statistics.quantiles(samples, n=100)[int(q * 100) - 1]


async def measure(settings: SourceSettings, calls: int) -> tuple[list[float], list[float]]:
    bare: list[float] = []
    through: list[float] = []
    task = Task("bench", "orders", "search_orders", ARGUMENTS)
    async with Connections.opened({"orders": stdio_target("orders", settings)}) as connections:
        runtime = Runtime(connections=connections, broker=CredentialBroker(settings.signing_key()))
        client, _ = await connections["orders"].session()
        for _ in range(20):  # warm both paths: the session, the tool listing, caches
            await client.call_tool("search_orders", ARGUMENTS, read_timeout_seconds=10)
            await run_subagent(task, runtime, deadline=time.monotonic() + 30)
        for _ in range(calls):
            started = time.perf_counter()
            result = await client.call_tool("search_orders", ARGUMENTS, read_timeout_seconds=10)
            bare.append(time.perf_counter() - started)
            assert not result.is_error
            started = time.perf_counter()
            report = await run_subagent(task, runtime, deadline=time.monotonic() + 30)
            through.append(time.perf_counter() - started)
            assert report.state == "ok" and report.attempts == 1
    return bare, through


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--calls", type=int, default=300)
    calls = parser.parse_args().calls
    with tempfile.TemporaryDirectory() as data_dir:
        bare, through = anyio.run(measure, SourceSettings(data_dir=Path(data_dir)), calls)
    for name, samples in (("bare Client.call_tool", bare), ("through a subagent", through)):
        print(
            f"{name:24} p50 {quantile(samples, 0.5) * 1000:7.2f} ms   p90 {quantile(samples, 0.9) * 1000:7.2f} ms"
        )
    print(
        f"ratio of p50s: {quantile(through, 0.5) / quantile(bare, 0.5):.3f} (target <= 1.25), {calls} calls each"
    )


if __name__ == "__main__":
    main()
