"""Plan accuracy on the labelled corpus, and the planning time per query.

Accuracy: the share of corpus cases whose plan holds exactly the expected calls with their key
arguments, nothing unplanned that should not be and everything unplanned that should be, or is
refused where it should be (the same check as ``tests/test_planner_corpus.py``). Time: every query
planned ``--rounds`` times after one warm-up pass (the first date read loads dateparser's tables,
about 0.3 s, once per process); the per-query p50 and p90 and the mean are printed, with the cost of
reading alone and of ``read_query`` + planning, and the one-off warm-up.

    .venv/bin/python benchmarks/planner.py [--rounds 20] [--corpus tests/planner_corpus.toml ...]

Targets: accuracy at least 97 %; under 5 ms per query.
"""

from __future__ import annotations

import argparse
import contextlib
import statistics
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from coordinator.planner import plan_query  # noqa: E402
from coordinator.reading import QueryError, read_query  # noqa: E402
from tests import corpus  # noqa: E402


def plan_or_refusal(query: str) -> tuple[object, str]:
    try:
        return plan_query(query), ""
    except QueryError as exc:
        return None, str(exc)


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--rounds", type=int, default=20)
    parser.add_argument(
        "--corpus", type=Path, action="append", help="default: the corpus and the held-out set"
    )
    args = parser.parse_args()
    for path in args.corpus or [corpus.CORPUS, corpus.HELD_OUT]:
        measure(path, args.rounds)


def measure(path: Path, rounds: int) -> None:
    cases = corpus.load_cases(path)

    started = time.perf_counter()
    for case in cases:  # warm-up: imports, caches, dateparser's tables
        plan_or_refusal(case.query)
    warm_up = time.perf_counter() - started

    failed = []
    for case in cases:
        plan, refusal = plan_or_refusal(case.query)
        if corpus.mismatches(case, plan, refusal):  # type: ignore[arg-type]
            failed.append(case.query)

    per_query: list[float] = []
    reading: list[float] = []
    for _ in range(rounds):
        for case in cases:
            began = time.perf_counter()
            with contextlib.suppress(QueryError):
                read_query(case.query)
            reading.append(time.perf_counter() - began)
            began = time.perf_counter()
            plan_or_refusal(case.query)
            per_query.append(time.perf_counter() - began)

    accuracy = (len(cases) - len(failed)) / len(cases)
    deciles = statistics.quantiles(per_query, n=10)
    print(f"corpus: {path.name}, {len(cases)} queries")
    print(f"accuracy: {len(cases) - len(failed)}/{len(cases)} = {accuracy:.1%} (target at least 97 %)")
    for query in failed:
        print(f"  wrong: {query}")
    print(
        f"planning per query: p50 {statistics.median(per_query) * 1000:.2f} ms, p90 {deciles[8] * 1000:.2f} ms, "
        f"mean {statistics.fmean(per_query) * 1000:.2f} ms (target under 5 ms); of which reading p50 "
        f"{statistics.median(reading) * 1000:.2f} ms"
    )
    print(f"first pass over the corpus (imports, dateparser's tables): {warm_up:.2f} s")


if __name__ == "__main__":
    main()
