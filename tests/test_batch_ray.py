"""`research batch --engine ray` on a local Ray, started once for this module: the workers share one
guard actor (breakers and retry budget), write a report and a trace per question, and keep the
fleet-wide retry budget under a source that fails half its calls. Skipped only where Ray is not
installed (`pip install '.[ray]'`; `make test` installs it)."""

from __future__ import annotations

import contextlib
import json
import signal
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import psutil
import pytest

ray = pytest.importorskip("ray", reason="Ray is not installed here: pip install '.[ray]'")

from coordinator.report import ResearchReport  # noqa: E402
from sources.fleet import Fleet  # noqa: E402
from sources.settings import SourceSettings  # noqa: E402
from subagents.guard import (  # noqa: E402
    DEFAULT_RETRY_RESERVE_PER_S,
    DEFAULT_RETRY_SHARE,
    DEFAULT_RETRY_WINDOW_S,
)
from tests.test_batch import (  # noqa: E402
    QUESTIONS,
    SLOW,
    batch_command,
    interrupted,
    run_batch_command,
    wait_for_reports,
    write_questions,
)

pytestmark = pytest.mark.subprocess


@pytest.fixture(scope="module", autouse=True)
def local_ray() -> Iterator[None]:
    ray.init(num_cpus=2, include_dashboard=False, log_to_driver=False)
    yield
    ray.shutdown()


def on_ray(settings: SourceSettings, questions: Path, out: Path, *args: str) -> dict[str, Any]:
    """`research batch --engine ray` as a user runs it, joining this module's Ray (``--address auto``)."""
    try:
        done = run_batch_command(
            settings,
            str(questions),
            "--out",
            str(out),
            "--engine",
            "ray",
            "--workers",
            "2",
            "--address",
            "auto",
            *args,
        )
    finally:
        Fleet(settings).down()
    assert done.returncode in (0, 3), done.stderr
    assert "retries / first attempts" in done.stdout and "Traceback" not in done.stderr
    assert "core_worker.cc" not in done.stderr and "Token authentication" not in done.stderr, done.stderr
    summary: dict[str, Any] = json.loads((out / "summary.json").read_text())
    return summary


def test_ray_workers_share_one_retry_budget_under_a_source_failing_half_its_calls(
    settings: SourceSettings, tmp_path: Path
) -> None:
    # Sixty: the retries they want (about two in three of them) outrun what the reserve can refill.
    queries = [f"Orders of CUST-{number:05d}?" for number in range(1, 61)]
    questions = write_questions(tmp_path, queries)
    summary = on_ray(settings, questions, tmp_path / "out", "--faults", "orders:transient=0.5,seed=5")
    budget = summary["retry_budget"]["by_source"]
    first, retries = budget["first_attempts"]["orders"], budget["retries"].get("orders", 0)
    reports = [json.loads(path.read_text()) for path in (tmp_path / "out" / "reports").glob("*.json")]
    called = [task for r in reports for task in r["tasks"] if task["source"] == "orders" and task["attempts"]]
    assert first == len(called) >= 20  # one first attempt per orders task that called, counted in one place
    # The share of first attempts plus the reserve held, across both workers (the guard actor's budget
    # lives within the command, so within its wall time).
    reserve = DEFAULT_RETRY_RESERVE_PER_S * (DEFAULT_RETRY_WINDOW_S + summary["this_run"]["wall_s"])
    assert retries <= DEFAULT_RETRY_SHARE * first + reserve
    assert budget["retries_refused"]["orders"] > 0  # and it was what held it: retries were wanted
    assert summary["answered"] + summary["partial"] == 60  # every question still has its report
    assert summary["invariant_violations"] == 0
    run = summary["this_run"]
    assert run["engine"] == "ray" and run["workers"] == 2 and len(run["memory_per_worker_mb"]) == 2
    services: dict[str, set[str]] = {}
    for path in (tmp_path / "out" / "traces").glob("*.jsonl"):
        for line in path.read_text().splitlines():
            span = json.loads(line)
            trace_id = span["context"]["trace_id"].removeprefix("0x")
            services.setdefault(trace_id, set()).add(span["resource"]["attributes"]["service.name"])
    for report in reports:  # a trace per question, from a worker process into the sources it called
        called_sources = {task["source"] for task in report["tasks"] if task["attempts"]}
        assert services[report["trace_id"]] == {
            "research-coordinator",
            *(f"research-source-{s}" for s in called_sources),
        }
    reasons = [d["reason"] for task in called for d in task["decisions"]]
    assert any(reason.startswith("the retry budget for orders is spent") for reason in reasons)


def test_a_killed_worker_loses_no_question_and_ctrl_c_leaves_no_worker(
    settings: SourceSettings, tmp_path: Path
) -> None:
    questions = write_questions(tmp_path, [QUESTIONS[number % 3] for number in range(40)])
    out = tmp_path / "out"
    process = batch_command(
        settings, str(questions), "--out", str(out), "--engine", "ray", "--address", "auto", *SLOW
    )
    try:
        wait_for_reports(process, out, 2)
        (worker, *_) = _batch_workers()
        psutil.Process(worker).kill()  # one Ray worker dies mid-batch: its questions go to the other
        err = interrupted(process, out, 8, signal.SIGINT)
    finally:
        if process.poll() is None:
            process.kill()
        Fleet(settings).down()
    assert process.returncode == 130, err
    kept = list((out / "reports").glob("*.json"))
    assert 8 <= len(kept) < 40
    assert list((out / "failed").iterdir()) == []  # the dead worker's questions were asked again
    for path in kept:
        ResearchReport.model_validate_json(path.read_text())
    until = time.monotonic() + 30  # Ray ends the workers of a driver that left
    while _batch_workers() and time.monotonic() < until:
        time.sleep(0.1)
    assert _batch_workers() == []


def _batch_workers() -> list[int]:
    found = []
    for process in psutil.process_iter(["cmdline"]):
        with contextlib.suppress(psutil.Error):
            if any("BatchWorker" in part for part in process.info["cmdline"] or []):
                found.append(process.pid)
    return found
