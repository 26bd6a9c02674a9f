"""Batch research: questions per second on Ray with 1, 2 and 4 workers against a long-lived coordinator and `research ask` one after another, under seeded chaos.

``--questions`` seeded, realistic questions for the demo world (``coordinator.chaos.catalogue``) are
written to a JSON-lines file and researched by ``research batch --engine ray`` once per worker count,
each run into a fresh folder, with ``--concurrency`` = workers x ``--concurrency-per-worker``. The
baseline is ``research ask`` run one question after another: every question a whole command, which
starts its five sources over stdio. It runs only the first ``--ask-sample`` questions (a sample: its
questions per second is that sample's, extrapolated to the rest, and printed as a sample). The fair
baseline for a batch engine is the long-lived coordinator (``benchmarks/long_lived.py``): one
process that opens one Coordinator as `research ask` does (the same sources over stdio, the same
faults, seed and deadline) and asks every question of the batch one after another on its sessions.

Every run gets the same seeded chaos (``--faults``, below): orders transient errors, tickets latency
with jitter and transient errors, kb hangs (cut by the per-call timeout), customers garbage, billing
transient errors. Everything runs in a fresh temporary ``RESEARCH_DATA_DIR`` (its world generated
by one untimed ``research ask`` first), so no fleet of the user's is touched.

Printed for each configuration: questions, outcomes, the command's wall time, the batch's start-up
(fleet and Ray workers), questions per second (the batch's on its asking time, the start-up being
paid once a batch; also end to end, start-up included), the speed-up over ``research ask`` one
after another and over the long-lived coordinator, memory per Ray worker (RSS, as ``ps`` shows it,
which the goal of at most 150 MB is read against; USS beside it) next to an empty Ray worker's
(``benchmarks/ray_floor.py``: Ray's own floor), the fleet's retry ratio and the retries its budget
refused, and the chaos checker's invariant violations. Exit status 1 if any run had an invariant violation,
or a command failed (a batch or an ask exiting other than 0 or 3, or killed at its timeout).

    .venv/bin/python benchmarks/batch.py [--questions 500] [--seed 1] [--workers 1,2,4]
        [--concurrency-per-worker 8] [--ask-sample 10] [--engine ray|local] [--keep DIR]
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import sys
import tempfile
import time
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from benchmarks import run_all  # noqa: E402
from coordinator.batch.loopback import unshare_command  # noqa: E402
from coordinator.chaos.catalogue import scenarios  # noqa: E402

# The installed `research` script beside this interpreter, or the same entry point from the checkout.
INSTALLED = Path(sys.executable).parent / "research"
RESEARCH = (
    [str(INSTALLED)]
    if INSTALLED.exists()
    else [sys.executable, "-c", "from coordinator.cli import app; app()"]
)
# A moderate chaos mix, the same for every run; each source's faults get a seed of their own.
CHAOS = [
    ("orders", "transient=0.2"),
    ("tickets", "latency=50ms,jitter=50ms,transient=0.1"),
    ("kb", "hang=0.01"),
    ("customers", "garbage=0.02"),
    ("billing", "transient=0.1"),
]
DEADLINE_S = 30  # per question; a kb hang is cut by the per-call timeout (5 s) well before it
ASK_TIMEOUT_S = 120
BATCH_TIMEOUT_S = 900
STDERR_TAIL = 20
NO = "—"
BASELINE = "research ask one after another"
LONG_LIVED = "one long-lived coordinator"
WORKER_GOAL_MB = 150  # memory per Ray worker, RSS (issue 46)
FLOOR_TIMEOUT_S = 180


@dataclass
class Run:
    """One configuration's figures (None: not measured for it)."""

    name: str
    questions: str
    outcomes: str
    wall_s: float
    per_s: float
    end_to_end_per_s: float
    startup_s: float | None = None
    memory_mb: list[float] = field(default_factory=list)  # RSS per worker
    memory_uss_mb: list[float] = field(default_factory=list)
    retry_ratio: float | None = None
    retries_refused: int | None = None
    violations: int | None = None
    sample_complete: int | None = None  # complete among the questions the `research ask` baseline ran
    budget_after_pushback: int | None = None  # tasks given up on the retry budget after a pushback
    breaker_open: int | None = None  # tasks not called because a source's circuit was open
    problem: str = ""  # why the run failed, if it did


def plural(count: int, noun: str) -> str:
    return f"{count} {noun}" + ("" if count == 1 else "s")


def say(line: str) -> None:
    print(line, file=sys.stderr, flush=True)


def chaos_options(seed: int) -> list[str]:
    """``--faults SOURCE:SETTINGS,seed=N`` for every source of the mix, N derived from ``seed``."""
    options = []
    for index, (source, settings) in enumerate(CHAOS, start=1):
        options += ["--faults", f"{source}:{settings},seed={seed * 100 + index}"]
    return options


def execute(argv: list[str], env: dict[str, str], timeout_s: float) -> tuple[int | None, str, str, float]:
    """``run_all.execute`` (its own process group, killed at the timeout), and its wall time."""
    started = time.perf_counter()
    status, stdout, stderr = run_all.execute(argv, timeout_s, env)
    return status, stdout, stderr, time.perf_counter() - started


def failed(what: str, status: int | None, stderr: str) -> str:
    """Say on stderr how a command failed, with the end of its stderr; the problem, for the table."""
    problem = "killed at its timeout" if status is None else f"exit status {status}"
    say(f"[batch] {what}: FAILED, {problem}; the last lines of its stderr:")
    for line in stderr.rstrip("\n").splitlines()[-STDERR_TAIL:]:
        say(f"    {line}")
    return problem


def write_questions(path: Path, count: int, seed: int) -> list[str]:
    queries = [scenario.query for scenario in scenarios(count, seed)]
    lines = [json.dumps({"id": f"q{number:04d}", "query": query}) for number, query in enumerate(queries, 1)]
    path.write_text("\n".join(lines) + "\n", encoding="utf-8")
    return queries


def baseline(queries: list[str], sample: int, env: dict[str, str], seed: int) -> Run:
    """``research ask`` on the first ``sample`` questions, one after another, each a whole command."""
    ask = [*RESEARCH, "ask", "--json", "--llm", "none", "--deadline", str(DEADLINE_S)]
    say("[batch] generating the world: one untimed `research ask` without faults")
    status, _, stderr, _ = execute([*ask, queries[0]], env, ASK_TIMEOUT_S)
    if status not in (0, 3):
        problem = failed("the untimed first `research ask`", status, stderr)
        return Run(BASELINE, NO, NO, 0.0, 0.0, 0.0, problem=problem)
    chosen = queries[:sample]
    counts = {"complete": 0, "partial": 0}
    problem, total_s = "", 0.0
    for number, query in enumerate(chosen, 1):
        say(f"[batch] {BASELINE}: question {number} of {len(chosen)}")
        argv = [*ask, "--seed", str(seed), *chaos_options(seed), query]
        status, _, stderr, seconds = execute(argv, env, ASK_TIMEOUT_S)
        total_s += seconds
        if status not in (0, 3):
            problem = failed(f"`research ask` on question {number}", status, stderr)
            break
        counts["complete" if status == 0 else "partial"] += 1
    done = sum(counts.values())
    per_s = done / total_s if done and total_s > 0 else 0.0
    return Run(
        name=BASELINE,
        questions=f"{done} of {len(queries)} (sample)",
        outcomes=f"{counts['complete']}/{counts['partial']}/{0 if not problem else 1}",
        wall_s=total_s,
        per_s=per_s,
        end_to_end_per_s=per_s,
        sample_complete=counts["complete"],
        problem=problem,
    )


def long_lived(questions: Path, env: dict[str, str], options: argparse.Namespace) -> Run:
    """Every question asked in a loop by one process on one Coordinator (``benchmarks/long_lived.py``)."""
    argv = [
        sys.executable, str(ROOT / "benchmarks" / "long_lived.py"), str(questions), "--seed", str(options.seed),
        "--deadline", str(DEADLINE_S), *chaos_options(options.seed),
    ]  # fmt: skip
    say(f"[batch] {LONG_LIVED}: {plural(options.questions, 'question')} in a loop")
    status, stdout, stderr, seconds = execute(argv, env, BATCH_TIMEOUT_S)
    if status != 0:
        return Run(LONG_LIVED, NO, NO, seconds, 0.0, 0.0, problem=failed(LONG_LIVED, status, stderr))
    ran: dict[str, Any] = json.loads(stdout.splitlines()[-1])
    statuses: list[str] = ran["statuses"]
    asking_s = float(ran["asking_s"])
    return Run(
        name=LONG_LIVED,
        questions=str(len(statuses)),
        outcomes="/".join(str(statuses.count(each)) for each in ("complete", "partial", "failed")),
        wall_s=seconds,
        per_s=len(statuses) / asking_s if asking_s > 0 else 0.0,
        end_to_end_per_s=len(statuses) / seconds if seconds > 0 else 0.0,
        startup_s=float(ran["startup_s"]),
        sample_complete=statuses[: options.ask_sample].count("complete"),
    )


def ray_floor(env: dict[str, str]) -> dict[str, float] | None:
    """An empty Ray worker's memory in MB (``benchmarks/ray_floor.py``, in a namespace of loopback
    alone, as a local batch runs), or None if it could not be measured (said on stderr)."""
    argv = [*unshare_command(), sys.executable, str(ROOT / "benchmarks" / "ray_floor.py")]
    say("[batch] an empty Ray worker's memory (Ray's floor)")
    status, stdout, stderr, _ = execute(argv, env, FLOOR_TIMEOUT_S)
    if status != 0:
        failed("the empty Ray worker", status, stderr)
        return None
    return {kind: size / 2**20 for kind, size in json.loads(stdout.splitlines()[-1]).items()}


def _on_sample(out: Path, sample: int) -> tuple[int, int, int]:
    """Complete among the first ``sample`` questions; in all, the decisions giving up on the retry
    budget after a source's own pushback (an answer saying when to call again: what flow control must
    never do), and those not calling a source because its circuit was open."""
    complete, starved, open_circuit = 0, 0, 0
    for path in sorted((out / "reports").glob("*.json")):
        report = json.loads(path.read_text(encoding="utf-8"))
        if int(path.stem.removeprefix("q")) <= sample:  # the ids are q0001, q0002... in the file's order
            complete += report.get("status") == "complete"
        for said in (decision for task in report.get("tasks", []) for decision in task.get("decisions", [])):
            reason = str(said["reason"])
            starved += said["action"] == "give_up" and "retry budget" in reason and "Retry after" in reason
            open_circuit += said["action"] == "breaker_open"
    return complete, starved, open_circuit


def batch_run(
    workers: int,
    questions: Path,
    out: Path,
    env: dict[str, str],
    options: argparse.Namespace,
    *,
    name: str = "",
    prefix: Sequence[str] = (),
    extra: Sequence[str] = (),
) -> Run:
    """One ``research batch`` into the fresh folder ``out``, and the figures of its summary.json
    (``prefix``: a command that runs it, as ``nsenter``; ``extra``: its options beyond these)."""
    name = name or f"{options.engine} {plural(workers, 'worker')}"
    argv = [
        *prefix, *RESEARCH, "batch", str(questions), "--out", str(out), "--engine", options.engine,
        "--workers", str(workers), "--concurrency", str(workers * options.concurrency_per_worker),
        "--deadline", str(DEADLINE_S), "--seed", str(options.seed), "--llm", "none",
        *chaos_options(options.seed), *extra,
    ]  # fmt: skip
    say(f"[batch] {name}: research batch, {plural(options.questions, 'question')}")
    status, _, stderr, seconds = execute(argv, env, BATCH_TIMEOUT_S)
    summary_path = out / "summary.json"
    if status not in (0, 3) or not summary_path.exists():
        problem = failed(name, status, stderr) if status not in (0, 3) else "no summary.json written"
        return Run(name, NO, NO, seconds, 0.0, 0.0, problem=problem)
    summary: dict[str, Any] = json.loads(summary_path.read_text(encoding="utf-8"))
    this_run, budget = summary["this_run"], summary["retry_budget"]
    sample_complete, starved, open_circuit = _on_sample(out, options.ask_sample)
    return Run(
        name=name,
        questions=str(this_run["questions"]),
        outcomes=f"{summary['answered']}/{summary['partial']}/{summary['failed']}",
        wall_s=seconds,
        per_s=float(this_run["questions_per_s"]),
        end_to_end_per_s=this_run["questions"] / seconds if seconds > 0 else 0.0,
        startup_s=float(this_run["startup_s"]),
        memory_mb=[float(mb) for mb in this_run["memory_per_worker_mb"]],
        memory_uss_mb=[float(mb) for mb in this_run.get("memory_per_worker_uss_mb", [])],
        retry_ratio=float(budget["retry_ratio"]),
        retries_refused=int(budget["retries_refused"]),
        violations=int(summary["invariant_violations"]),
        sample_complete=sample_complete,
        budget_after_pushback=starved,
        breaker_open=open_circuit,
    )


def times(value: float, base: float) -> str:
    return f"{value / base:.1f}x" if base > 0 else NO


def speed_up(value: float, base: Run) -> str:
    return times(value, base.per_s)


def table(runs: list[Run]) -> list[str]:
    """The plain-text table: one row per configuration, the baseline first."""
    base = runs[0]
    header = [
        "configuration", "questions", "complete/partial/failed", "wall s", "start-up s", "questions/s",
        "speed-up", "end to end q/s", "memory per worker MB (RSS)", "USS MB", "retry ratio", "retries refused",
        "invariant violations", "complete of the sample", "budget spent after pushback", "breaker open",
    ]  # fmt: skip
    rows = [header]
    for run in runs:
        if run.problem:
            rows.append([run.name, f"FAILED: {run.problem}", *[NO] * (len(header) - 2)])
            continue
        rows.append(
            [
                run.name, run.questions, run.outcomes, f"{run.wall_s:.1f}",
                "in each" if run is base else f"{run.startup_s:.1f}", f"{run.per_s:.2f}",
                speed_up(run.per_s, base), f"{run.end_to_end_per_s:.2f}",
                "/".join(f"{mb:.0f}" for mb in run.memory_mb) or NO,
                "/".join(f"{mb:.0f}" for mb in run.memory_uss_mb) or NO,
                NO if run.retry_ratio is None else f"{run.retry_ratio:.1%}",
                NO if run.retries_refused is None else str(run.retries_refused),
                "not checked" if run.violations is None else str(run.violations),
                NO if run.sample_complete is None else str(run.sample_complete),
                NO if run.budget_after_pushback is None else str(run.budget_after_pushback),
                NO if run.breaker_open is None else str(run.breaker_open),
            ]
        )  # fmt: skip
    widths = [max(len(row[column]) for row in rows) for column in range(len(header))]
    return [
        "  ".join(text.ljust(width) for text, width in zip(row, widths, strict=True)).rstrip() for row in rows
    ]


def report(runs: list[Run], options: argparse.Namespace, floor: dict[str, float] | None) -> int:
    """Print the table and the regular lines; the exit status (1 on a failure or a violation)."""
    base, loop = runs[0], next((run for run in runs if run.name == LONG_LIVED), None)
    for line in table(runs):
        print(line)
    print()
    if not base.problem:
        each = 1 / base.per_s if base.per_s > 0 else 0.0
        print(
            f"{BASELINE}: {base.per_s:.2f} questions/s (a sample: the first {base.questions.split()[0]} of "
            f"{options.questions} questions, {each:.2f} s each, extrapolated to the rest)"
        )
    for run in runs[1:]:
        if run.problem:
            print(f"{run.name}: FAILED ({run.problem})")
            continue
        print(f"{run.name}: {run.per_s:.2f} questions/s ({speed_up(run.per_s, base)} {BASELINE})")
        print(
            f"{run.name}, end to end: {run.end_to_end_per_s:.2f} questions/s "
            f"({speed_up(run.end_to_end_per_s, base)} {BASELINE})"
        )
        if loop is not None and run is not loop and not loop.problem:
            print(
                f"{run.name} against {LONG_LIVED}: {speed_up(run.per_s, loop)} "
                f"({run.per_s:.2f} against {loop.per_s:.2f} questions/s; end to end "
                f"{times(run.end_to_end_per_s, loop.end_to_end_per_s)})"
            )
    memory_lines(runs, floor)
    violations = sum(run.violations or 0 for run in runs)
    print(f"invariant violations: {violations}")
    sample = ", ".join(f"{run.name} {run.sample_complete}" for run in runs if run.sample_complete is not None)
    print(f"complete of the first {options.ask_sample} questions: {sample}")
    print(
        "questions/s: on the batch's asking time (fleet and workers up); end to end: the whole command, "
        "start-up included; each `research ask` starts its own sources"
    )
    print("chaos: " + " ".join(chaos_options(options.seed)[1::2]))
    print(
        f"seed {options.seed}; concurrency {options.concurrency_per_worker} per worker; deadline {DEADLINE_S} s"
    )
    return 1 if violations or any(run.problem for run in runs) else 0


def memory_lines(runs: list[Run], floor: dict[str, float] | None) -> None:
    """Each batch's largest worker against the goal, and Ray's floor beside it."""
    if floor is not None:
        print(
            f"an empty Ray worker (Ray's floor): {floor['rss']:.0f} MB RSS, {floor['uss']:.0f} MB USS, "
            f"{floor['pss']:.0f} MB PSS"
        )
    for run in runs:
        if run.memory_mb and not run.problem:
            largest = max(run.memory_mb)
            verdict = "met" if largest <= WORKER_GOAL_MB else "NOT met"
            beyond = f", {largest - floor['rss']:.0f} MB beyond Ray's floor" if floor is not None else ""
            print(
                f"{run.name}: memory per worker at most {largest:.0f} MB RSS "
                f"({max(run.memory_uss_mb or [0.0]):.0f} MB USS){beyond}; goal at most {WORKER_GOAL_MB} MB: {verdict}"
            )


def options_from(argv: list[str] | None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=(__doc__ or "").splitlines()[0])
    parser.add_argument("--questions", type=int, default=500, help="questions in the batch (500)")
    parser.add_argument("--seed", type=int, default=1, help="seed of the questions, faults and jitter (1)")
    parser.add_argument("--workers", default="1,2,4", help="worker counts, comma-separated (1,2,4)")
    parser.add_argument(
        "--concurrency-per-worker", type=int, default=8, help="questions in flight per worker (8)"
    )
    parser.add_argument(
        "--ask-sample", type=int, default=10, help="questions the `research ask` baseline runs (10)"
    )
    parser.add_argument("--engine", choices=["ray", "local"], default="ray", help="the batch's engine (ray)")
    parser.add_argument(
        "--keep", type=Path, help="keep the questions and every batch's folder here (new or empty)"
    )
    parsed = parser.parse_args(argv)
    try:
        parsed.worker_counts = [int(each) for each in parsed.workers.split(",")]
    except ValueError:
        parser.error(f"--workers takes worker counts separated by commas, e.g. 1,2,4; got {parsed.workers!r}")
    if parsed.questions < 1 or parsed.concurrency_per_worker < 1 or min(parsed.worker_counts) < 1:
        parser.error("--questions, --concurrency-per-worker and every worker count must be at least 1")
    if not 1 <= parsed.ask_sample <= parsed.questions:
        parser.error("--ask-sample must be between 1 and --questions")
    if parsed.keep is not None:
        parsed.keep.mkdir(parents=True, exist_ok=True)
        if any(parsed.keep.iterdir()):
            parser.error(f"--keep {parsed.keep} is not empty (a batch resumes from the reports it finds)")
    return parsed


def main(argv: list[str] | None = None) -> int:
    options = options_from(argv)
    with contextlib.ExitStack() as stack:
        data_dir = stack.enter_context(tempfile.TemporaryDirectory(prefix="batch-bench-data-"))
        work = options.keep or Path(stack.enter_context(tempfile.TemporaryDirectory(prefix="batch-bench-")))
        env = {**os.environ, "RESEARCH_DATA_DIR": data_dir, "COLUMNS": "200"}
        env.pop("ANTHROPIC_API_KEY", None)  # the deterministic mode, whatever the shell has
        questions = work / "questions.jsonl"
        queries = write_questions(questions, options.questions, options.seed)
        runs = [baseline(queries, options.ask_sample, env, options.seed)]
        runs.append(long_lived(questions, env, options))
        floor = ray_floor(env) if options.engine == "ray" else None
        for workers in options.worker_counts:
            out = work / f"{options.engine}-{workers}-workers"
            runs.append(batch_run(workers, questions, out, env, options))
        if options.keep:
            say(f"[batch] kept: {options.keep}")
        return report(runs, options, floor)


if __name__ == "__main__":
    sys.exit(main())
