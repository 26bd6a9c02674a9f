"""The fork server against spawning: the story query, its five sources forked or spawned, same run.

`research ask` forks its stdio sources from a fork server that imported them once
(``sources.processes.forked``); without it, each source is spawned as ``python -m sources.NAME`` and imports
the mcp SDK itself. Each round is a fresh process, as a user's command is: it starts the sources as
one way or the other (``SourceEntry.connect``: ``over="stdio"``, the fork server, or ``"spawn"``),
researches the story and exits; the two ways alternate so machine noise falls on both alike.

    .venv/bin/python benchmarks/fork_server.py [--rounds 6]

Prints each way's median wall time from the process's start to its report, and spawned/forked.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
STORY = "Investigate jane.doe@example.com: recent orders, open tickets, and whether a £750 refund on ORD-10023 is allowed"

# One round: the process's own start counts (time.monotonic at its first line, as `research ask`'s
# deadline does), the report's status and the seconds to it printed as JSON.
ROUND = """
import time; started = time.monotonic()
import json, sys, anyio
from sources.processes import forked
way = sys.argv[1]
if way == "stdio":
    forked.prestart()  # as `research ask` does first: the fork server imports while this process does
from coordinator import Config, Coordinator
from sources.faults import FaultSettings
from sources.settings import SourceSettings

async def main():
    config = Config.for_ask(SourceSettings.from_environment())
    targets = {name: entry.connect(config.settings, FaultSettings(), over=way)
               for name, entry in config.registry.sources().items()}
    async with Coordinator(config, targets=targets) as coordinator:
        report = await coordinator.research(sys.argv[2], seed=1, record=False)
    return report.status

status = anyio.run(main)
print(json.dumps({"status": status, "seconds": time.monotonic() - started}))
"""


def one_round(way: str, environment: dict[str, str]) -> float:
    done = subprocess.run(  # noqa: S603  (this script's own round)
        [sys.executable, "-c", ROUND, way, STORY], env=environment, cwd=ROOT, capture_output=True, text=True,
        timeout=120, check=True,
    )  # fmt: skip
    outcome = json.loads(done.stdout.splitlines()[-1])
    assert outcome["status"] == "partial", outcome  # the story's £750 refund is a gap by design
    return float(outcome["seconds"])


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=6)
    rounds = parser.parse_args().rounds
    with tempfile.TemporaryDirectory() as data_dir:
        environment = {**os.environ, "RESEARCH_DATA_DIR": data_dir, "OTEL_TRACES_EXPORTER": "none"}
        one_round("stdio", environment)  # the world generated, untimed
        seconds: dict[str, list[float]] = {"forked": [], "spawned": []}
        started = time.monotonic()
        for _ in range(rounds):
            seconds["forked"].append(one_round("stdio", environment))
            seconds["spawned"].append(one_round("spawn", environment))
    forked, spawned = (statistics.median(seconds[way]) for way in ("forked", "spawned"))
    print(f"story, sources forked (the fork server)   median {forked:.2f} s  ({rounds} rounds)")
    print(f"story, sources spawned (python -m each)   median {spawned:.2f} s  ({rounds} rounds)")
    print(f"spawned / forked: {spawned / forked:.2f}x  ({time.monotonic() - started:.0f} s in all)")


if __name__ == "__main__":
    main()
