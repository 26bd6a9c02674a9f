"""Seeded batches under the batch benchmark's chaos: does a breaker open, or a retry starve on pushback?

``--batches`` batches of ``--questions`` seeded questions each (seed 1, 2, ...), each with the chaos mix of
``benchmarks/batch.py`` seeded alike (customers' garbage answers drop the client's session under every
call in flight on it; tickets' rate limit and kb's warm-up push back). For each batch: the questions
answered complete, the ``breaker_open`` decisions (a lost session must never open a breaker), the
tasks given up on the retry budget after a source's own pushback (flow control must never do that),
the pushbacks waited out and the chaos checker's invariant violations; then the totals. Exit status 1
if any breaker opened, any retry starved on pushback, or any invariant was violated.

    .venv/bin/python benchmarks/batch_seeds.py [--batches 20] [--questions 200] [--engine local|ray]
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from benchmarks.batch import RESEARCH, chaos_options, execute, write_questions  # noqa: E402

TIMEOUT_S = 900


def counted(out: Path) -> tuple[int, int]:
    """The ``breaker_open`` decisions, and the give-ups on the retry budget after a pushback."""
    opened = starved = 0
    for path in (out / "reports").glob("*.json"):
        for task in json.loads(path.read_text(encoding="utf-8")).get("tasks", []):
            for decision in task["decisions"]:
                reason = decision["reason"]
                opened += decision["action"] == "breaker_open"
                starved += (
                    decision["action"] == "give_up" and "retry budget" in reason and "Retry after" in reason
                )
    return opened, starved


def one_batch(seed: int, options: argparse.Namespace, env: dict[str, str], work: Path) -> dict[str, Any]:
    questions = work / f"questions-{seed}.jsonl"
    write_questions(questions, options.questions, seed)
    out = work / f"out-{seed}"
    workers = ["--workers", "2"] if options.engine == "ray" else []
    argv = [
        *RESEARCH, "batch", str(questions), "--out", str(out), "--engine", options.engine, *workers,
        "--concurrency", "16", "--deadline", "30", "--seed", str(seed), "--llm", "none", *chaos_options(seed),
    ]  # fmt: skip
    status, _, stderr, seconds = execute(argv, env, TIMEOUT_S)
    if status not in (0, 3):
        raise SystemExit(f"batch {seed}: exit status {status}\n{stderr[-2000:]}")
    summary = json.loads((out / "summary.json").read_text(encoding="utf-8"))
    opened, starved = counted(out)
    return {
        "seed": seed, "complete": summary["answered"], "breaker_open": opened, "budget_after_pushback": starved,
        "pushbacks": summary["flow_control"]["pushbacks"], "violations": summary["invariant_violations"],
        "wall_s": round(seconds, 1),
    }  # fmt: skip


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=(__doc__ or "").splitlines()[0])
    parser.add_argument("--batches", type=int, default=20, help="seeded batches, seeds 1 to N (20)")
    parser.add_argument("--questions", type=int, default=200, help="questions in each batch (200)")
    parser.add_argument(
        "--engine", choices=["local", "ray"], default="local", help="the batch's engine (local)"
    )
    options = parser.parse_args(argv)
    with tempfile.TemporaryDirectory(prefix="batch-seeds-") as folder:
        work = Path(folder)
        env = {**os.environ, "RESEARCH_DATA_DIR": str(work / "data"), "COLUMNS": "200"}
        env.pop("ANTHROPIC_API_KEY", None)  # the deterministic mode, whatever the shell has
        execute(
            [*RESEARCH, "ask", "--llm", "none", "orders of CUST-00042"], env, TIMEOUT_S
        )  # the world, untimed
        started, rows = time.perf_counter(), []
        for seed in range(1, options.batches + 1):
            rows.append(one_batch(seed, options, env, work))
            print(json.dumps(rows[-1]), flush=True)
    totals = {
        key: sum(row[key] for row in rows)
        for key in ("complete", "breaker_open", "budget_after_pushback", "violations")
    }
    print(
        f"{len(rows)} batches of {options.questions} questions ({options.engine}, {time.perf_counter() - started:.0f} s): "
        f"{totals['complete']} complete; breaker_open decisions {totals['breaker_open']}; retries given up on the "
        f"budget after a pushback {totals['budget_after_pushback']}; invariant violations {totals['violations']}"
    )
    return 1 if totals["breaker_open"] or totals["budget_after_pushback"] or totals["violations"] else 0


if __name__ == "__main__":
    sys.exit(main())
