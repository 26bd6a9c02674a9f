"""A batch's figures: where each question of the file stands in its folder (this run's answers and
earlier runs'), this run's wall time and throughput (and on Ray, the nodes its answers came from),
and the fleet's retry budget as it was spent.

Each question is counted once: answered (a complete report), partial, failed, or not started (no
report and no failure: its turn did not come, the batch being interrupted or its tokens spent);
``resumed`` says how many of the reports came from an earlier run.
"""

from __future__ import annotations

from collections import Counter
from dataclasses import dataclass, field
from typing import Any

from rich.table import Table

from coordinator.batch.memory import Memory
from coordinator.batch.questions import Question
from coordinator.batch.store import BatchDir
from coordinator.batch.trusted import kept

__all__ = ["Tally", "summarize", "summary_table"]


@dataclass
class Tally:
    """What this run has done so far: the progress line's counts, then the summary's figures."""

    counts: dict[str, int] = field(default_factory=lambda: {"complete": 0, "partial": 0, "failed": 0})
    violations: int = 0
    not_started: int = 0  # Claude mode: left for the next run, the batch's tokens being spent
    resumed: int = 0  # the questions with a report from an earlier run, not asked again
    budget: dict[str, dict[str, int]] = field(default_factory=dict)  # the guard's counts, per source
    workers: int = 0  # the engine's, once one is started: none when every question had its report
    asking_s: float | None = None  # the time with the fleet and the workers up
    memory: list[Memory] = field(default_factory=list)  # each worker's, as the engine closed
    # On Ray: the node each worker last answered on (None: it never did), the answers each node gave,
    # and the questions asked again on another worker because theirs died under them.
    worker_nodes: list[str | None] = field(default_factory=list)
    questions_by_node: dict[str, int] = field(default_factory=dict)
    asked_again: int = 0
    questions_asked_again: list[str] = field(default_factory=list)  # their ids, in the order asked again

    def add(self, status: str, violations: int) -> None:
        self.counts[status] = self.counts.get(status, 0) + 1
        self.violations += violations

    @property
    def done(self) -> int:
        return sum(self.counts.values())

    def spent(self, count: str) -> int:
        """A count of the guard's across every source: first_attempts, retries, retries_refused."""
        return sum(self.budget.get(count, {}).values())

    @property
    def retry_ratio(self) -> float:
        first = self.spent("first_attempts")
        return self.spent("retries") / first if first else 0.0


def summarize(
    folder: BatchDir, tally: Tally, *, questions: list[Question], wall_s: float, engine: str
) -> dict[str, Any]:
    """The figures of ``questions`` in ``folder``, with this run's: ``wall_s`` from the command's start,
    the asking time of it with the fleet and the workers up (questions per second counts that: the
    start-up is paid once a batch, whatever its size). ``UntrustedFile`` if a file of theirs is not
    this project's (checked before the run: only a file changed under a running batch)."""
    ran, budget, memory = tally.done, tally.budget, tally.memory
    asking_s = wall_s if tally.asking_s is None else tally.asking_s
    found = kept(folder, questions)
    reports, violations = found.reports, found.violations
    escalations = Counter(
        gap.get("errorCategory") or "none" for report in reports.values() for gap in report.get("gaps", [])
    )
    statuses = Counter(report["status"] for report in reports.values())  # each a whole report: checked
    return {
        "questions": len(questions),
        "answered": statuses["complete"],
        "partial": statuses["partial"],
        "failed": len(found.failures),
        "not_started": len(questions) - len(reports) - len(found.failures),
        "resumed": tally.resumed,
        "escalations_by_category": dict(sorted(escalations.items())),
        "this_run": {
            "engine": engine,
            "workers": tally.workers,
            "questions": ran,
            "wall_s": round(wall_s, 3),
            "asking_s": round(asking_s, 3),
            "startup_s": round(wall_s - asking_s, 3),
            "questions_per_s": round(ran / asking_s, 3) if asking_s > 0 else 0.0,
            # Resident (as ps shows it, Ray's shared libraries counted whole), then unique and proportional.
            "memory_per_worker_mb": [round(each.rss / 2**20, 1) for each in memory],
            "memory_per_worker_uss_mb": [round(each.uss / 2**20, 1) for each in memory],
            "memory_per_worker_pss_mb": [round(each.pss / 2**20, 1) for each in memory],
            "worker_nodes": list(tally.worker_nodes),
            "questions_by_node": dict(sorted(tally.questions_by_node.items())),
            "asked_again": tally.asked_again,
            "questions_asked_again": sorted(set(tally.questions_asked_again)),
        },
        "retry_budget": {
            "first_attempts": tally.spent("first_attempts"),
            "retries": tally.spent("retries"),
            "retries_refused": tally.spent("retries_refused"),
            "retry_ratio": round(tally.retry_ratio, 4),
            "by_source": budget,
        },
        # A source's pushback (it said when to call again): waited out, not from the budget; and the
        # concurrency limit it left each source at (those below the ceiling).
        "flow_control": {"pushbacks": tally.spent("pushbacks"), "limits": dict(budget.get("limits", {}))},
        "invariant_violations": sum(len(found) for found in violations.values()),
        "questions_with_violations": sorted(violations),
    }


def _pushbacks(flow: dict[str, Any]) -> str:
    limits = ", ".join(f"{source} {limit}" for source, limit in sorted(flow["limits"].items()))
    return f"{flow['pushbacks']}" + (f"; calls at once now {limits}" if limits else "")


def summary_table(summary: dict[str, Any]) -> Table:
    run, budget = summary["this_run"], summary["retry_budget"]
    table = Table("", "", title="research batch", show_header=False)
    escalations = ", ".join(f"{name} {count}" for name, count in summary["escalations_by_category"].items())
    rows = [
        ("questions", str(summary["questions"])),
        ("answered (complete)", str(summary["answered"])),
        ("partial", str(summary["partial"])),
        ("failed", str(summary["failed"])),
        ("escalations by category", escalations or "none"),
        (
            "wall time (this run)",
            f"{run['wall_s']:.1f} s for {run['questions']} questions ({run['startup_s']:.1f} s start-up)",
        ),
        (
            "questions per second",
            f"{run['questions_per_s']:.2f} ({run['engine']}, {run['workers']} workers)"
            if run["questions"]
            else "none asked: every question had its report (no workers started)",
        ),
        (
            "retries / first attempts",
            f"{budget['retries']} / {budget['first_attempts']} = {budget['retry_ratio']:.1%}",
        ),
        ("retries refused by the budget", str(budget["retries_refused"])),
        ("pushbacks (waited out)", _pushbacks(summary["flow_control"])),
        ("invariant violations", str(summary["invariant_violations"])),
    ]
    on_ray = []  # after the questions per second: which nodes answered, and what a death cost
    if run["questions_by_node"]:
        on_ray.append(("questions by node", _by_node(run["questions_by_node"])))
    if run["asked_again"]:
        named = ", ".join(run.get("questions_asked_again", []))  # a summary from before it had the ids: none
        on_ray.append(
            (
                "asked again (worker died)",
                f"{run['asked_again']} ({named})" if named else str(run["asked_again"]),
            )
        )
    rows[7:7] = on_ray
    if summary["resumed"]:
        rows[3:3] = [("resumed (reports of an earlier run)", str(summary["resumed"]))]
    if summary["not_started"]:
        rows.append(("not started (asked by a run with --resume)", str(summary["not_started"])))
    for name, value in rows:
        table.add_row(name, value)
    return table


_NODES_SHOWN = 4  # in the table; more are counted
_NODE_ID_SHOWN = 8  # of a node id's 56 hex digits: enough to tell a cluster's nodes apart


def _by_node(by_node: dict[str, int]) -> str:
    """The nodes by the start of their ids (summary.json has them whole), each with its answers."""
    if len(by_node) > _NODES_SHOWN:
        return f"{sum(by_node.values())} on {len(by_node)} nodes (summary.json names them)"
    return ", ".join(f"{node[:_NODE_ID_SHOWN]} {count}" for node, count in by_node.items())
