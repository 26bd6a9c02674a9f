"""One call over streamable HTTP against one call over stdio: same source, same data, same run.

The orders source runs twice, once spawned over stdio and once serving HTTP on a free port of
127.0.0.1 (``python -m sources.orders --http --port 0``, as the fleet starts it); each is called through the bare mcp ``Client.call_tool`` and
through a subagent, the four paths in alternating order so that machine noise falls on all alike.

    .venv/bin/python benchmarks/http_vs_stdio.py [--calls 200]

Prints the p50 and p90 of each path and the HTTP/stdio ratio of the p50s (target: at most 2).
"""

from __future__ import annotations

import argparse
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import anyio

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from benchmarks import served_url  # noqa: E402
from sources.settings import SourceSettings  # noqa: E402
from subagents.broker import CredentialBroker  # noqa: E402
from subagents.sessions.connection import Connections, http_target, stdio_target  # noqa: E402
from subagents.subagent import Runtime, Task, run_subagent  # noqa: E402

ARGUMENTS = {"customer_id": "CUST-00042"}
PATHS = ("stdio bare", "stdio subagent", "http bare", "http subagent")


def quantile(samples: list[float], q: float) -> float:
    return statistics.quantiles(samples, n=100)[int(q * 100) - 1]


async def measure(settings: SourceSettings, url: str, calls: int) -> dict[str, list[float]]:
    samples: dict[str, list[float]] = {path: [] for path in PATHS}
    targets = {"stdio": stdio_target("orders", settings), "http": http_target(url)}
    async with (
        Connections.opened({"orders": targets["stdio"]}) as over_stdio,
        Connections.opened({"orders": targets["http"]}) as over_http,
    ):
        runtimes = {
            transport: Runtime(connections=connections, broker=CredentialBroker(settings.signing_key()))
            for transport, connections in (("stdio", over_stdio), ("http", over_http))
        }
        clients = {
            "stdio": (await over_stdio["orders"].session())[0],
            "http": (await over_http["orders"].session())[0],
        }
        task = Task("bench", "orders", "search_orders", ARGUMENTS)

        async def once(path: str) -> float:
            transport, way = path.split()
            started = time.perf_counter()
            if way == "bare":
                result = await clients[transport].call_tool(
                    "search_orders", ARGUMENTS, read_timeout_seconds=10
                )
                assert not result.is_error
            else:
                report = await run_subagent(task, runtimes[transport], deadline=time.monotonic() + 30)
                assert report.state == "ok" and report.attempts == 1
            return time.perf_counter() - started

        for _ in range(20):  # warm every path: sessions, the tool listing, caches
            for path in PATHS:
                await once(path)
        for _ in range(calls):
            for path in PATHS:
                samples[path].append(await once(path))
    return samples


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--calls", type=int, default=200)
    calls = parser.parse_args().calls
    with tempfile.TemporaryDirectory() as data_dir:
        settings = SourceSettings(data_dir=Path(data_dir))
        server = subprocess.Popen(
            [sys.executable, "-m", "sources.orders", "--http", "--port", "0"],
            env={**os.environ, **settings.child_environment()}, stdin=subprocess.DEVNULL,
            stderr=subprocess.PIPE, text=True,
        )  # fmt: skip
        try:
            url = served_url(server)
            samples = anyio.run(measure, settings, url, calls)
        finally:
            server.terminate()
            server.wait(timeout=10)
    for path in PATHS:
        print(
            f"{path:15} p50 {quantile(samples[path], 0.5) * 1000:7.2f} ms   "
            f"p90 {quantile(samples[path], 0.9) * 1000:7.2f} ms"
        )
    for way in ("bare", "subagent"):
        ratio = quantile(samples[f"http {way}"], 0.5) / quantile(samples[f"stdio {way}"], 0.5)
        print(f"HTTP/stdio ratio of p50s, {way}: {ratio:.2f} (target <= 2), {calls} calls each")


if __name__ == "__main__":
    main()
