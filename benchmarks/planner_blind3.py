"""First-sight score of the planner on the blind set of issue 45 (``tests/planner_natural_blind3.toml``).

Plans each case with the planner's public entry point, scores it with ``tests/corpus.py`` (the same
check as the corpus test) and prints the exact matches, the misses by outcome (false COMPLETE the
figure that matters most), the same per kind (the set's ``kind`` field: through another record,
has-the-refund-been-paid billing asks, ordinary asks) and, with ``--misses``, every miss.

    .venv/bin/python benchmarks/planner_blind3.py [--misses]
"""

from __future__ import annotations

import argparse
import sys
import tomllib
from collections import Counter, defaultdict
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from coordinator.planning.planner import plan_query  # noqa: E402
from coordinator.planning.reading import QueryError  # noqa: E402
from tests import corpus  # noqa: E402

BLIND3 = ROOT / "tests" / "planner_natural_blind3.toml"


def plan_or_refusal(query: str) -> tuple[object, str]:
    try:
        return plan_query(query), ""
    except QueryError as exc:
        return None, str(exc)


def describe(plan: object) -> str:
    if plan is None:
        return "refused"
    calls = "; ".join(f"{task.source}.{task.tool} {task.arguments}" for task in plan.tasks.values())  # type: ignore[attr-defined]
    unplanned = [str(item) for item in plan.unplanned]  # type: ignore[attr-defined]
    return f"{calls} | unplanned {unplanned}" if unplanned else calls


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--corpus", type=Path, default=BLIND3)
    parser.add_argument("--misses", action="store_true", help="print every miss with the plan made")
    args = parser.parse_args()

    cases = corpus.load_cases(args.corpus)
    with args.corpus.open("rb") as file:
        kinds = [raw.get("kind", "-") for raw in tomllib.load(file)["case"]]

    overall: Counter[str] = Counter()
    by_kind: dict[str, Counter[str]] = defaultdict(Counter)
    misses = []
    for case, kind in zip(cases, kinds, strict=True):
        plan, refusal = plan_or_refusal(case.query)
        seen = corpus.outcome(case, plan, refusal)  # type: ignore[arg-type]
        overall[seen] += 1
        by_kind[kind][seen] += 1
        if seen != "exact":
            misses.append((kind, seen, case, plan, refusal))

    def line(name: str, counts: Counter[str]) -> str:
        total = sum(counts.values())
        return (
            f"{name:<9} exact {counts['exact']}/{total} = {counts['exact'] / total:.0%}; "
            f"partial {counts['partial']}, refused {counts['refused']}, "
            f"false complete {counts['false complete']}"
        )

    print(f"corpus: {args.corpus.name}, {len(cases)} cases")
    print(line("all", overall))
    for kind in sorted(by_kind):
        print(line(kind, by_kind[kind]))
    if args.misses:
        for kind, seen, case, plan, refusal in misses:
            print(f"\n[{kind}] {seen}: {' '.join(case.query.split())[:140]}")
            print(f"  planned: {describe(plan) if plan is not None else 'refused: ' + refusal}")
            for problem in corpus.mismatches(case, plan, refusal):  # type: ignore[arg-type]
                print(f"  - {problem}")


if __name__ == "__main__":
    main()
