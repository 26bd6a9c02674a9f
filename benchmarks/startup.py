"""How fast the `research` command starts: each command as a fresh process, against a bare baseline.

Each command runs as a new process the way the installed ``research`` script runs it (``from
coordinator.cli import app; app()``, from this checkout), in rounds that take the commands in turn
so that machine noise falls on all alike, after one warm-up round (bytecode, the disk cache).
Printed: each command's median and fastest wall time, the median's ratio to the baseline,
``python -c "import typer, rich"`` (what any typer command line with rich output costs before it
does anything), and the median CPU time (user + system), which a busy machine inflates less. `research plan` runs the deterministic planner; `research sources list` reads the
catalogue (no source is started).

    .venv/bin/python benchmarks/startup.py [--rounds 5]

Targets (issue 13): `research --help` and a usage error in at most 0.5 s.
"""

from __future__ import annotations

import argparse
import os
import resource
import statistics
import subprocess
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from coordinator.chaos import QUERIES  # noqa: E402

STORY = QUERIES[0]
TARGET_S = 0.5
RESEARCH = [sys.executable, "-c", "from coordinator.cli import app; app()"]

# name -> (argv, the exit statuses that mean it did what is measured, target in seconds or None)
COMMANDS: dict[str, tuple[list[str], tuple[int, ...], float | None]] = {
    "baseline: import typer, rich": ([sys.executable, "-c", "import typer, rich"], (0,), None),
    "research --help": ([*RESEARCH, "--help"], (0,), TARGET_S),
    'research ask ""  (usage error)': ([*RESEARCH, "ask", ""], (2,), TARGET_S),
    "research plan STORY": ([*RESEARCH, "plan", STORY], (0, 3), None),
    "research sources list": ([*RESEARCH, "sources", "list"], (0,), None),
}


def _children_cpu_s() -> float:
    usage = resource.getrusage(resource.RUSAGE_CHILDREN)
    return usage.ru_utime + usage.ru_stime


def once(argv: list[str], statuses: tuple[int, ...]) -> tuple[float, float]:
    """The wall time and the CPU time of one run."""
    environment = {**os.environ, "COLUMNS": "200"}
    environment.pop("ANTHROPIC_API_KEY", None)  # the deterministic mode whatever the shell has
    cpu, started = _children_cpu_s(), time.perf_counter()
    done = subprocess.run(  # noqa: S603  (the commands are this benchmark's own, listed above)
        argv, env=environment, cwd=ROOT, capture_output=True, text=True, timeout=120
    )
    elapsed, cpu = time.perf_counter() - started, _children_cpu_s() - cpu
    if done.returncode not in statuses:
        raise SystemExit(f"{' '.join(argv)!r} exited {done.returncode}:\n{done.stderr}")
    return elapsed, cpu


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=5)
    rounds = parser.parse_args().rounds
    walls: dict[str, list[float]] = {name: [] for name in COMMANDS}
    cpus: dict[str, list[float]] = {name: [] for name in COMMANDS}
    for round_ in range(rounds + 1):  # round 0 warms up and is not counted
        for name, (argv, statuses, _) in COMMANDS.items():
            wall, cpu = once(argv, statuses)
            if round_:
                walls[name].append(wall)
                cpus[name].append(cpu)
    baseline = statistics.median(walls[next(iter(COMMANDS))])
    print(f"{rounds} runs each; wall time median and fastest, ratio of the medians, CPU time median")
    print(f"{'command':32} {'median':>8} {'fastest':>8} {'x baseline':>10} {'cpu':>8}   target")
    for name, (_, _, target) in COMMANDS.items():
        median = statistics.median(walls[name])
        verdict = "" if target is None else f"<= {target:g} s {'ok' if median <= target else 'MISSED'}"
        print(
            f"{name:32} {median:7.3f}s {min(walls[name]):7.3f}s {median / baseline:9.2f}x "
            f"{statistics.median(cpus[name]):7.3f}s   {verdict}"
        )


if __name__ == "__main__":
    main()
