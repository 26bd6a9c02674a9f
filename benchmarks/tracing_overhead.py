"""Tracing overhead: query wall time with the file exporter on, against tracing off, same run.

Five warm stdio sources; the same five-task plan run through the coordinator, alternating between
a tracer provider that writes every span to files (batched, as in production) and no provider at all,
so machine noise falls on both alike. The sources keep their own tracing the same in both.

    .venv/bin/python benchmarks/tracing_overhead.py [--rounds 40]

Prints the medians and the overhead (target at most 5 %).
"""

from __future__ import annotations

import argparse
import statistics
import sys
import tempfile
import time
from pathlib import Path

import anyio
from opentelemetry import trace
from opentelemetry.sdk.resources import Resource
from opentelemetry.sdk.trace import TracerProvider
from opentelemetry.sdk.trace.export import BatchSpanProcessor

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from benchmarks.fanout import TASKS  # noqa: E402
from coordinator.planning.plan import Plan  # noqa: E402
from coordinator.run import run_plan  # noqa: E402
from sources.catalogue import SOURCES  # noqa: E402
from sources.settings import SourceSettings  # noqa: E402
from subagents.broker import CredentialBroker  # noqa: E402
from subagents.sessions.connection import Connections, stdio_target  # noqa: E402
from subagents.subagent import Runtime  # noqa: E402
from traces.client_status import ClientSpanStatus  # noqa: E402
from traces.files import file_exporter  # noqa: E402


class _Switch:
    """Tracers that ask, at every span, which provider is on: the traced one or none."""

    def __init__(self) -> None:
        self.provider: trace.TracerProvider = trace.NoOpTracerProvider()

    def provider_view(self) -> trace.TracerProvider:
        switch = self

        class Tracer(trace.Tracer):
            def __init__(self, *args: object, **kwargs: object) -> None:
                self._args, self._kwargs = args, kwargs

            def _real(self) -> trace.Tracer:
                return switch.provider.get_tracer(*self._args, **self._kwargs)  # type: ignore[arg-type]

            def start_span(self, *args, **kwargs):  # type: ignore[no-untyped-def]
                return self._real().start_span(*args, **kwargs)

            def start_as_current_span(self, *args, **kwargs):  # type: ignore[no-untyped-def]
                return self._real().start_as_current_span(*args, **kwargs)

        class Provider(trace.TracerProvider):
            def get_tracer(self, *args, **kwargs):  # type: ignore[no-untyped-def]
                return Tracer(*args, **kwargs)

        return Provider()


async def measure(settings: SourceSettings, traces_dir: Path, rounds: int) -> tuple[list[float], list[float]]:
    traced_provider = TracerProvider(resource=Resource.create({"service.name": "research-coordinator"}))
    traced_provider.add_span_processor(
        ClientSpanStatus(BatchSpanProcessor(file_exporter(traces_dir, "research-coordinator")))
    )
    untraced_provider = trace.NoOpTracerProvider()
    switch = _Switch()
    trace.set_tracer_provider(switch.provider_view())  # the mcp SDK's tracers follow the switch too
    plan = Plan.of("overhead", TASKS)
    traced: list[float] = []
    untraced: list[float] = []
    targets = {source: stdio_target(source, settings) for source in SOURCES}
    async with Connections.opened(targets) as connections:
        runtime = Runtime(
            connections=connections,
            broker=CredentialBroker(settings.signing_key(), base_scopes=frozenset({"billing:read"})),
        )
        for _ in range(5):
            await run_plan(plan, runtime, deadline_s=30)
        for _ in range(rounds):
            for provider, samples in ((traced_provider, traced), (untraced_provider, untraced)):
                switch.provider = provider
                started = time.perf_counter()
                outcomes = await run_plan(plan, runtime, deadline_s=30)
                samples.append(time.perf_counter() - started)
                assert all(outcome.state == "ok" for outcome in outcomes.values())
    traced_provider.shutdown()
    return traced, untraced


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=40)
    rounds = parser.parse_args().rounds
    with tempfile.TemporaryDirectory() as data_dir:
        settings = SourceSettings(data_dir=Path(data_dir), kb_warmup_ms=0)
        traces_dir = Path(data_dir) / "traces"
        traced, untraced = anyio.run(measure, settings, traces_dir, rounds)
        written = sum(len(path.read_text().splitlines()) for path in traces_dir.glob("*.jsonl"))
    print(f"{written} spans written to files in the traced rounds")
    on, off = statistics.median(traced), statistics.median(untraced)
    print(f"tracing to files: median {on * 1000:.2f} ms; tracing off: median {off * 1000:.2f} ms")
    print(f"overhead: {(on / off - 1) * 100:+.1f} % (target <= 5 %), {rounds} rounds each")


if __name__ == "__main__":
    main()
