"""`research ask --otlp` with no collector listening: the extra seconds, against the same query without --otlp.

The real CLI in a subprocess (it spawns the five stdio sources), alternating three ways so machine noise
falls on all alike: without --otlp; with --otlp and OTEL_EXPORTER_OTLP_ENDPOINT on a closed port of
127.0.0.1; with --otlp and a real OTLP/HTTP receiver listening (the receiver of the tests).

    .venv/bin/python benchmarks/otlp_unreachable.py [--rounds 5]

Prints the medians of wall time and CPU time (the CLI's and its sources'), the extra seconds of each
--otlp way as the median of the rounds' differences (target: at most 1 s with no collector), the most
warning lines on stderr in a run (target: one with no collector, none with one) and the Jaeger links
printed (target: none with no collector). On a shared 2-core machine the wall times swing by
seconds from run to run: the CPU time shows the cost the wall time hides in that noise.
"""

from __future__ import annotations

import argparse
import os
import resource
import socket
import statistics
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from sources.settings import SourceSettings  # noqa: E402
from tests.otlp_receiver import OtlpReceiver  # noqa: E402

QUERY = "Investigate jane.doe@example.com: recent orders, open tickets, and whether a £750 refund on ORD-10023 is allowed"


def closed_port() -> int:
    """A loopback port nothing listens on: bound, then released."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


@dataclass
class Run:
    wall_s: float
    cpu_s: float  # user + system of the CLI and the sources it spawned (it waits for them)
    warnings: int  # stderr lines that say "warning"
    linked: bool  # stdout has a Jaeger link


def ask(settings: SourceSettings, *options: str, env: dict[str, str]) -> Run:
    environment = {**os.environ, **settings.child_environment(), **env}
    cpu_before = resource.getrusage(resource.RUSAGE_CHILDREN)
    started = time.perf_counter()
    done = subprocess.run(  # noqa: S603  (the project's own CLI)
        [sys.executable, "-c", "from coordinator.cli import app; app()", "ask", QUERY, "--seed", "1", *options],
        env=environment, cwd=ROOT, capture_output=True, text=True, timeout=300, check=False,
    )  # fmt: skip
    wall_s = time.perf_counter() - started
    cpu_after = resource.getrusage(resource.RUSAGE_CHILDREN)
    if done.returncode not in (0, 3):
        raise SystemExit(f"research ask failed ({done.returncode}): {done.stderr[-2000:]}")
    cpu_s = (cpu_after.ru_utime - cpu_before.ru_utime) + (cpu_after.ru_stime - cpu_before.ru_stime)
    warned = [line for line in done.stderr.splitlines() if "warning" in line.lower()]
    return Run(wall_s, cpu_s, len(warned), "Jaeger:" in done.stdout)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=5)
    rounds = parser.parse_args().rounds
    receiver = OtlpReceiver()
    runs: dict[str, list[Run]] = {"without --otlp": [], "--otlp, no collector": [], "--otlp, collector": []}
    try:
        with tempfile.TemporaryDirectory() as data_dir:
            settings = SourceSettings(data_dir=Path(data_dir))
            ask(settings, env={})  # the world's data is created once, outside the measured rounds
            for _ in range(rounds):
                ways = {
                    "without --otlp": ((), {}),
                    "--otlp, no collector": (
                        ("--otlp",),
                        {"OTEL_EXPORTER_OTLP_ENDPOINT": f"http://127.0.0.1:{closed_port()}"},
                    ),
                    "--otlp, collector": (("--otlp",), {"OTEL_EXPORTER_OTLP_ENDPOINT": receiver.endpoint}),
                }
                for name, (options, env) in ways.items():
                    runs[name].append(ask(settings, *options, env=env))
    finally:
        receiver.close()
    base = runs["without --otlp"]
    for name, done in runs.items():
        wall = [run.wall_s for run in done]
        line = (
            f"{name:22} wall median {statistics.median(wall):.2f} s (range {min(wall):.2f}-{max(wall):.2f})"
        )
        line += f", CPU median {statistics.median(run.cpu_s for run in done):.2f} s"
        if done is not base:
            extra = statistics.median(
                run.wall_s - other.wall_s for run, other in zip(done, base, strict=True)
            )
            cpu = statistics.median(run.cpu_s - other.cpu_s for run, other in zip(done, base, strict=True))
            line += f"; extra (median of the rounds' differences): wall {extra:+.2f} s, CPU {cpu:+.2f} s"
        line += f"; warning lines (most in a run) {max(run.warnings for run in done)}"
        line += f"; Jaeger links {sum(run.linked for run in done)}/{rounds}"
        print(line)
    print(f"{rounds} rounds each, alternating; target: no collector costs at most 1 s and one warning line")


if __name__ == "__main__":
    main()
