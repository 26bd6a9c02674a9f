"""A long-lived coordinator: one process, one Coordinator, the questions of a file asked in a loop.

The fair baseline for a batch engine (``benchmarks/batch.py`` runs it beside the batches): the
coordinator opened as `research ask` opens it (the five demo sources spawned over stdio with the
given faults, files tracing, the deterministic planner), its sessions held while it asks every
question of a JSON-lines file one after another, as `research ask --seed S` would ask each (the
same seed, deadline and faults), but without starting a command and five sources per question.
Prints one JSON line: each question's status in order, the time to start tracing and enter the coordinator
(``startup_s``) and the loop's (``asking_s``, the sessions' opening on the first question included).

    .venv/bin/python benchmarks/long_lived.py QUESTIONS.jsonl [--seed 1] [--deadline 30]
        [--faults SOURCE:SETTINGS ...]
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from pathlib import Path
from typing import Any

import anyio

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from coordinator.batch.questions import read_questions  # noqa: E402
from coordinator.cli.common import start_tracing  # noqa: E402
from coordinator.core import Config, Coordinator  # noqa: E402
from coordinator.planning.query_error import QueryError  # noqa: E402
from sources.faults import FaultSettings  # noqa: E402
from sources.settings import SourceSettings  # noqa: E402


async def ask_all(
    queries: list[str], faults: dict[str, FaultSettings], seed: int, deadline_s: float
) -> dict[str, Any]:
    """Every query asked in turn on one coordinator; its counts and times."""
    settings = start_tracing(SourceSettings.from_environment())  # as `research ask` traces its run
    statuses: list[str] = []  # each question's, in the file's order
    opening = time.perf_counter()
    async with Coordinator(Config.for_ask(settings, faults=faults)) as coordinator:
        # The sessions open as the first question needs them, as a batch worker's do: in the asking time.
        asking = time.perf_counter()
        for query in queries:
            try:
                report = await coordinator.research(query, deadline_s=deadline_s, seed=seed)
            except QueryError:
                statuses.append("failed")
                continue
            statuses.append(report.status)
        done = time.perf_counter()
    return {"statuses": statuses, "startup_s": asking - opening, "asking_s": done - asking}


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=(__doc__ or "").splitlines()[0])
    parser.add_argument("questions", type=Path, help="a JSON-lines file of questions (research batch's)")
    parser.add_argument(
        "--seed", type=int, default=1, help="the back-off jitter's seed, every question's (1)"
    )
    parser.add_argument("--deadline", type=float, default=30.0, help="each question's deadline, seconds (30)")
    parser.add_argument(
        "--faults", action="append", default=[], help="SOURCE:SETTINGS, as research ask --faults"
    )
    options = parser.parse_args(argv)
    faults = {}
    for given in options.faults:
        source, _, spec = given.partition(":")
        faults[source] = FaultSettings.parse(spec)
    queries = [question.query for question in read_questions(options.questions)]
    print(json.dumps(anyio.run(ask_all, queries, faults, options.seed, options.deadline)))
    return 0


if __name__ == "__main__":
    sys.exit(main())
