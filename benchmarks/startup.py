"""How fast the `research` command starts: each command as a fresh process, against a bare baseline.

Each command runs as a new process the way the installed ``research`` script runs it (``from
coordinator.cli import app; app()``, from this checkout), in rounds that take the commands in turn
so that machine noise falls on all alike, after one warm-up round (bytecode, the disk cache).
Printed: each command's median and fastest wall time, the median's ratio to the baseline
(``python -c "import typer, rich"``: what any typer command line with rich output costs before it
does anything) and to the import floor, and the median CPU time (user + system, the fork server's
and the forked sources' included), which a busy machine inflates less. `research plan` runs the
deterministic planner; `research sources list` reads the catalogue (no source is started).

`research ask STORY` researches the story query over stdio (its sources forked from the fork server)
on a world built before the first round, against the import floor of what it needs:
``python -c "import mcp.server, opentelemetry.sdk.trace, pydantic, anyio"``.

``--against DIR`` runs the `research` commands of another checkout (e.g. ``git archive <commit> | tar
-x -C DIR``) in the same rounds, each right after this checkout's, so that both see the same machine.

    .venv/bin/python benchmarks/startup.py [--rounds 5] [--against DIR]

Targets (issue 13): `research --help` and a usage error in at most 0.5 s. Issue 46: the story query
in at most 1.7 times the import floor, and under 1.5 s.
"""

from __future__ import annotations

import argparse
import contextlib
import ctypes
import os
import resource
import statistics
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass, replace
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from coordinator.chaos import QUERIES  # noqa: E402

STORY = QUERIES[0]
TARGET_S = 0.5
STORY_TARGET_S = 1.5
STORY_TARGET_FLOOR_RATIO = 1.7
RESEARCH = [sys.executable, "-c", "from coordinator.cli import app; app()"]
_PR_SET_CHILD_SUBREAPER = 36  # prctl(2)
_REAP_S = 10.0
FLOOR = "import floor: mcp.server, otel sdk, pydantic, anyio"
STORY_ASK = "research ask STORY"


@dataclass(frozen=True)
class Command:
    argv: list[str]
    statuses: tuple[int, ...]  # the exit statuses that mean it did what is measured
    target_s: float | None = None
    cwd: Path = ROOT  # the checkout it runs from (`research` is imported from the working directory)


def commands(against: Path | None) -> dict[str, Command]:
    """By name, in the order each round runs them: ``against``'s `research` commands right after ours."""
    ours = {
        "research --help": Command([*RESEARCH, "--help"], (0,), TARGET_S),
        'research ask ""  (usage error)': Command([*RESEARCH, "ask", ""], (2,), TARGET_S),
        "research plan STORY": Command([*RESEARCH, "plan", STORY], (0, 3)),
        "research sources list": Command([*RESEARCH, "sources", "list"], (0,)),
        STORY_ASK: Command([*RESEARCH, "ask", STORY], (3,), STORY_TARGET_S),  # 3: partial, the £750 refund
    }
    chosen = {
        "baseline: import typer, rich": Command([sys.executable, "-c", "import typer, rich"], (0,)),
        FLOOR: Command(
            [sys.executable, "-c", "import mcp.server, opentelemetry.sdk.trace, pydantic, anyio"], (0,)
        ),
    }
    for name, command in ours.items():
        chosen[name] = command
        if against is not None:
            chosen[f"{name}  [{against.name}]"] = replace(command, cwd=against)
    return chosen


def _adopt_orphans() -> None:
    """Become the subreaper of what the commands start (Linux): the fork server and the sources forked
    from it outlive the command by a moment, and are reaped here, so their CPU time counts as the
    command's (``_reap_orphans``). Elsewhere only the command's own CPU time counts."""
    with contextlib.suppress(OSError, AttributeError):
        ctypes.CDLL(None, use_errno=True).prctl(_PR_SET_CHILD_SUBREAPER, 1, 0, 0, 0)


def _reap_orphans() -> None:
    """Wait (bounded) for every process left by the command: their CPU time joins RUSAGE_CHILDREN."""
    deadline = time.monotonic() + _REAP_S
    while time.monotonic() < deadline:
        try:
            pid, _ = os.waitpid(-1, os.WNOHANG)
        except ChildProcessError:
            return  # none left
        if pid == 0:
            time.sleep(0.01)  # some still running: the fork server leaves as its command's pipe closes


def _children_cpu_s() -> float:
    usage = resource.getrusage(resource.RUSAGE_CHILDREN)
    return usage.ru_utime + usage.ru_stime


def once(command: Command, environment: dict[str, str]) -> tuple[float, float]:
    """The wall time and the CPU time of one run (its own, its fork server's and its sources')."""
    cpu, started = _children_cpu_s(), time.perf_counter()
    done = subprocess.run(  # noqa: S603  (the commands are this benchmark's own, listed above)
        command.argv, env=environment, cwd=command.cwd, capture_output=True, text=True, timeout=120
    )
    elapsed = time.perf_counter() - started
    _reap_orphans()
    cpu = _children_cpu_s() - cpu
    if done.returncode not in command.statuses:
        raise SystemExit(f"{' '.join(command.argv)!r} exited {done.returncode}:\n{done.stderr}")
    return elapsed, cpu


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument(
        "--against", type=Path, help="another checkout whose `research` runs in the same rounds"
    )
    arguments = parser.parse_args()
    rounds, chosen = arguments.rounds, commands(arguments.against)
    _adopt_orphans()
    walls: dict[str, list[float]] = {name: [] for name in chosen}
    cpus: dict[str, list[float]] = {name: [] for name in chosen}
    with tempfile.TemporaryDirectory() as data_dir:  # a world of its own, built by the warm-up round
        environment = {**os.environ, "COLUMNS": "200", "RESEARCH_DATA_DIR": data_dir}
        environment.pop("ANTHROPIC_API_KEY", None)  # the deterministic mode whatever the shell has
        # The warm-up round writes the bytecode an installed `research` has: a shell that forbids
        # writing it would have every round compile each module from source (0.5 s more a command).
        environment.pop("PYTHONDONTWRITEBYTECODE", None)
        for round_ in range(
            rounds + 1
        ):  # round 0 warms up (the world, bytecode, the disk cache): not counted
            for name, command in chosen.items():
                wall, cpu = once(command, environment)
                if round_:
                    walls[name].append(wall)
                    cpus[name].append(cpu)
    baseline, floor = (statistics.median(walls[name]) for name in list(chosen)[:2])
    print(f"{rounds} runs each; wall time median and fastest, ratio of the medians, CPU time median")
    print(f"load average at the end: {' '.join(f'{load:.2f}' for load in os.getloadavg())}")
    print(
        f"{'command':48} {'median':>8} {'fastest':>8} {'x baseline':>10} {'x floor':>8} {'cpu':>8}   target"
    )
    for name, command in chosen.items():
        median = statistics.median(walls[name])
        verdict = (
            ""
            if command.target_s is None
            else f"<= {command.target_s:g} s {'ok' if median <= command.target_s else 'MISSED'}"
        )
        if name.startswith(STORY_ASK):
            ratio_ok = median / floor <= STORY_TARGET_FLOOR_RATIO
            verdict += f", <= {STORY_TARGET_FLOOR_RATIO:g}x floor {'ok' if ratio_ok else 'MISSED'}"
        print(
            f"{name:48} {median:7.3f}s {min(walls[name]):7.3f}s {median / baseline:9.2f}x {median / floor:7.2f}x "
            f"{statistics.median(cpus[name]):7.3f}s   {verdict}"
        )


if __name__ == "__main__":
    main()
