"""Fan-out: five sources that each take 200 ms, asked at once through the coordinator.

In one run, on warm sources (spawned over stdio, sessions open), each given a fixed 200 ms latency by
the fault layer:

* the wall time of a five-task plan through the coordinator, divided by its critical path: two calls
  of 200 ms, because the customer lookup gates the three tasks that read that customer's data
  (``coordinator.run``: nothing reads a customer's records before the lookup has found them, a
  data-protection rule), while the policy search runs beside it (1.0 is the fan-out limit; target
  at most 1.10);
* the same five calls made one after another through a subagent each (about 5.0);
* peak memory: the coordinator process, and each source process with its data loaded.

    .venv/bin/python benchmarks/fanout.py [--rounds 5]
"""

from __future__ import annotations

import argparse
import resource
import statistics
import sys
import tempfile
import time
from pathlib import Path

import anyio
import psutil

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from coordinator.planning.plan import Plan, PlannedTask  # noqa: E402
from coordinator.run import run_plan  # noqa: E402
from sources.catalogue import SOURCES  # noqa: E402
from sources.faults import FaultSettings  # noqa: E402
from sources.settings import SourceSettings  # noqa: E402
from subagents.broker import CredentialBroker  # noqa: E402
from subagents.sessions.connection import Connections, stdio_target  # noqa: E402
from subagents.subagent import Runtime, run_subagent  # noqa: E402

LATENCY_S = 0.2
# The customer lookup, then the tasks it gates (orders, invoices, tickets); the policy search runs beside.
CRITICAL_PATH_CALLS = 2
TASKS = [
    PlannedTask("customer", "customers", "customer_lookup", {"identifier": "CUST-00042"}),
    PlannedTask("orders", "orders", "search_orders", {"customer_id": "CUST-00042"}),
    PlannedTask(
        "invoices", "billing", "list_invoices", {"customer_id": "CUST-00042"}, purpose="refund research"
    ),
    PlannedTask("tickets", "tickets", "search_tickets", {"customer_id": "CUST-00042"}),
    PlannedTask("policies", "kb", "search_policies", {"query": "refunds damaged"}),
]


def _rss_mb(process: psutil.Process) -> float:
    try:
        return process.memory_info().rss / 2**20
    except psutil.Error:
        return 0.0


async def measure(settings: SourceSettings, rounds: int) -> dict[str, object]:
    latency = FaultSettings(latency_ms=LATENCY_S * 1000)
    targets = {source: stdio_target(source, settings.with_faults(latency)) for source in SOURCES}
    plan = Plan.of("fan-out", TASKS)
    peaks: dict[str, float] = {}
    fanned: list[float] = []
    serial: list[float] = []
    async with Connections.opened(targets) as connections:
        broker = CredentialBroker(settings.signing_key(), base_scopes=frozenset({"billing:read"}))
        runtime = Runtime(connections=connections, broker=broker)
        for source in SOURCES:  # warm: spawn every source and open its session
            await connections[source].session()

        async def sample() -> None:
            me = psutil.Process()
            while True:
                for child in me.children(recursive=True):
                    name = next((s for s in SOURCES if f"sources.{s}" in " ".join(child.cmdline())), None)
                    if name:
                        peaks[name] = max(peaks.get(name, 0.0), _rss_mb(child))
                await anyio.sleep(0.05)

        async with anyio.create_task_group() as group:
            group.start_soon(sample)
            for _ in range(rounds):
                started = time.perf_counter()
                outcomes = await run_plan(plan, runtime, deadline_s=30)
                fanned.append(time.perf_counter() - started)
                assert all(o.state == "ok" for o in outcomes.values()), {
                    k: o.state for k, o in outcomes.items()
                }
                started = time.perf_counter()
                for task in TASKS:
                    report = await run_subagent(
                        task.resolved(task.arguments),
                        runtime,
                        time.monotonic() + 30,
                    )
                    assert report.state == "ok"
                serial.append(time.perf_counter() - started)
            group.cancel_scope.cancel()
    return {"fanned": fanned, "serial": serial, "peaks": peaks}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=5)
    rounds = parser.parse_args().rounds
    with tempfile.TemporaryDirectory() as data_dir:
        settings = SourceSettings(data_dir=Path(data_dir), kb_warmup_ms=0)
        result = anyio.run(measure, settings, rounds)
    fanned, serial, peaks = result["fanned"], result["serial"], result["peaks"]
    assert isinstance(fanned, list) and isinstance(serial, list) and isinstance(peaks, dict)
    median_fanned, median_serial = statistics.median(fanned), statistics.median(serial)
    limit = CRITICAL_PATH_CALLS * LATENCY_S
    print(
        f"five tasks through the coordinator: median {median_fanned * 1000:.0f} ms = {median_fanned / limit:.2f} x {limit * 1000:.0f} ms, the critical path of {CRITICAL_PATH_CALLS} calls (target <= 1.10)"
    )
    print(
        f"the same five one after another:    median {median_serial * 1000:.0f} ms = {median_serial / LATENCY_S:.2f} x 200 ms"
    )
    coordinator_mb = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
    print(f"peak memory: coordinator {coordinator_mb:.0f} MB (target < 200 MB); sources " + ", ".join(
        f"{name} {mb:.0f} MB" for name, mb in sorted(peaks.items())) + " (target < 120 MB each)")  # fmt: skip
    print(f"{rounds} rounds")


if __name__ == "__main__":
    main()
