"""How long a user waits for `research ask`, from start to exit, and how well a deadline is kept.

Every figure is one whole command as a user runs it (a fresh `research` process), the median of
``--runs``, all in one run so that machine noise falls on all alike:

    floor           python -c "import mcp"   (what any process that talks MCP pays to start)
    story, stdio    the story query, starting its five sources (cold: forked from a fork server that
                    imports them while the command imports its own, see sources.processes.forked)
    story, http     the story query against a fleet already serving (`research sources up`),
                    answered by the fleet's coordinator service (warm, see coordinator.service)
    ..., in process the same with the coordinator service killed: the command researches itself
    deadline D      the story query with tickets hung (--chaos hang:tickets) and --deadline D:
                    the exit time and how far past D it came

    .venv/bin/python benchmarks/answers.py [--runs 5] [--deadlines 2,4,6]
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

ROOT = Path(__file__).resolve().parent.parent
RESEARCH = [sys.executable, "-c", "from coordinator.cli import app; app()"]
STORY = "Investigate jane.doe@example.com: recent orders, open tickets, and whether a £750 refund on ORD-10023 is allowed"


def timed(command: list[str], environment: dict[str, str], expect: tuple[int, ...] = (0, 3)) -> float:
    started = time.perf_counter()
    done = subprocess.run(  # noqa: S603  (our own command lines)
        command, env=environment, cwd=ROOT, capture_output=True, text=True, timeout=120
    )
    elapsed = time.perf_counter() - started
    if done.returncode not in expect:
        raise SystemExit(f"{' '.join(command[3:])} exited {done.returncode}:\n{done.stderr[-2000:]}")
    return elapsed


def median(command: list[str], environment: dict[str, str], runs: int) -> float:
    return statistics.median(timed(command, environment) for _ in range(runs))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=5)
    parser.add_argument("--deadlines", default="2,4,6")
    options = parser.parse_args()
    deadlines = [float(value) for value in options.deadlines.split(",")]
    with tempfile.TemporaryDirectory() as data_dir:
        environment = {**os.environ, "RESEARCH_DATA_DIR": data_dir, "COLUMNS": "200"}
        ask = [*RESEARCH, "ask", STORY, "--llm", "none", "--json"]
        timed(ask, environment)  # generates the world and builds the kb index once, as a first run does
        rows = [
            (
                "floor: python -c 'import mcp'",
                median([sys.executable, "-c", "import mcp"], environment, options.runs),
            )
        ]
        rows.append(("story, stdio (cold sources)", median(ask, environment, options.runs)))
        timed([*RESEARCH, "sources", "up"], environment)
        try:
            rows.append(
                ("story, http (warm fleet)", median([*ask, "--transport", "http"], environment, options.runs))
            )
            timed([*RESEARCH, "chaos", "kill", "coordinator"], environment)
            rows.append(
                (
                    "story, http, in process",
                    median([*ask, "--transport", "http"], environment, options.runs),
                )
            )
        finally:
            timed([*RESEARCH, "sources", "down"], environment)
        overshoots = []
        for deadline in deadlines:
            hung = [*ask, "--deadline", f"{deadline:g}", "--chaos", "hang:tickets"]
            took = median(hung, environment, options.runs)
            overshoots.append(took - deadline)
            rows.append((f"deadline {deadline:g} s, tickets hung", took))
    floor = rows[0][1]
    for name, seconds in rows:
        print(f"{name:34} {seconds:6.2f} s   {seconds / floor:5.1f}x the floor")
    print(
        f"past the deadline, worst median: {max(overshoots):+.2f} s (target <= +0.5 s); {options.runs} runs each"
    )


if __name__ == "__main__":
    main()
