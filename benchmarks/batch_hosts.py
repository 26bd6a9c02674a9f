"""Batch research across two hosts: 500 questions under seeded chaos on a Ray cluster of two network namespaces, beside one host.

The same questions and the same chaos as ``benchmarks/batch.py`` (its helpers), researched twice in one
run: on one host (``research batch --engine ray --workers 2``, local Ray in a namespace of loopback
alone) and across two hosts (``tests/hosts.py``: two network namespaces joined by a veth pair; the Ray
head, the batch's own fleet on host A's address (``--fleet-host``, every call with its bearer token) and
the driver on A, a second Ray node on B; one CPU each, so one worker each, ``--workers 2``). Printed for
each: questions, outcomes, questions per second (on the batch's asking time, and end to end), start-up,
the questions each node answered, and the chaos checker's invariant violations. Exit status 1 on a
violation or a failed run; 0 with a line saying why where two hosts cannot be made here (not root).

    .venv/bin/python benchmarks/batch_hosts.py [--questions 500] [--seed 1] [--concurrency-per-worker 8]
"""

from __future__ import annotations

import contextlib
import json
import os
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from benchmarks.batch import batch_run, chaos_options, options_from, write_questions  # noqa: E402
from tests.hosts import joined_hosts, unavailable  # noqa: E402
from tests.test_batch_hosts import ray_across  # noqa: E402

WORKERS = 2
CLUSTER_S = 120.0  # to start the two nodes


def main(argv: list[str] | None = None) -> int:
    options = options_from(argv)
    why = unavailable()
    if why is not None:
        print(f"not measured: {why}")
        return 0
    with contextlib.ExitStack() as stack:
        data_dir = stack.enter_context(tempfile.TemporaryDirectory(prefix="batch-hosts-data-"))
        work = Path(stack.enter_context(tempfile.TemporaryDirectory(prefix="batch-hosts-")))
        env = {**os.environ, "RESEARCH_DATA_DIR": data_dir, "COLUMNS": "200"}
        env.pop("ANTHROPIC_API_KEY", None)  # the deterministic mode, whatever the shell has
        questions = work / "questions.jsonl"
        write_questions(questions, options.questions, options.seed)
        one = batch_run(WORKERS, questions, work / "one-host", env, options, name="one host, 2 workers")
        with joined_hosts() as hosts, ray_across(hosts, time.monotonic() + CLUSTER_S) as cluster:
            two = batch_run(
                WORKERS, questions, work / "two-hosts", {**env, **cluster.environment}, options,
                name="two hosts, 2 workers", prefix=hosts.a.prefix,
                extra=["--address", cluster.address, "--fleet-host", hosts.a.address],
            )  # fmt: skip
        runs = [(one, work / "one-host"), (two, work / "two-hosts")]
        for run, out in runs:
            if run.problem:
                print(f"{run.name}: FAILED ({run.problem})")
                continue
            by_node = json.loads((out / "summary.json").read_text())["this_run"]["questions_by_node"]
            nodes = ", ".join(f"{node[:8]} {count}" for node, count in sorted(by_node.items())) or "local"
            print(
                f"{run.name}: {run.questions} questions, complete/partial/failed {run.outcomes}, "
                f"{run.per_s:.2f} questions/s ({run.end_to_end_per_s:.2f} end to end, start-up "
                f"{run.startup_s or 0:.1f} s), by node {nodes}, invariant violations {run.violations}"
            )
        if not one.problem and not two.problem and one.per_s > 0:
            print(f"two hosts / one host, questions/s: {two.per_s / one.per_s:.2f}")
        print("chaos: " + " ".join(chaos_options(options.seed)[1::2]))
        print(f"seed {options.seed}; concurrency {options.concurrency_per_worker} per worker")
        failed = any(run.problem or run.violations for run, _ in runs)
        return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
