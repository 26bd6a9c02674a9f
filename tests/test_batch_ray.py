"""`research batch --engine ray` on a local Ray, the batch's own, as a user runs it: every socket of
every process of it on loopback (the batch runs in a network namespace of loopback alone,
``coordinator.batch.loopback``); the workers share one guard actor (breakers and retry budget), write a
report and a trace per question, and keep the fleet-wide retry budget under a source that fails half
its calls. Then on a real two-node cluster (`ray start --head`, a second `ray start --address`, as "On a
cluster" in docs/guides/batch.md shows), in a namespace of loopback alone too, whose second node dies
mid-batch. Skipped only where Ray is not installed (`pip install '.[ray]'`; `make test` installs it)."""

from __future__ import annotations

import contextlib
import json
import os
import secrets
import shutil
import signal
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import psutil
import pytest

ray = pytest.importorskip("ray", reason="Ray is not installed here: pip install '.[ray]'")

from coordinator.reporting.report import ResearchReport  # noqa: E402
from sources.processes.fleet import Fleet  # noqa: E402
from sources.settings import SourceSettings  # noqa: E402
from subagents.guard import (  # noqa: E402
    DEFAULT_RETRY_RESERVE_PER_S,
    DEFAULT_RETRY_SHARE,
    DEFAULT_RETRY_WINDOW_S,
)
from tests.conftest import free_ports  # noqa: E402
from tests.sockets import batch_processes, loopback_namespace, off_loopback, sockets_of  # noqa: E402
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


def on_ray(settings: SourceSettings, questions: Path, out: Path, *args: str) -> dict[str, Any]:
    """`research batch --engine ray` as a user runs it, on a local Ray of its own."""
    try:
        done = run_batch_command(
            settings, str(questions), "--out", str(out), "--engine", "ray", "--workers", "2", *args
        )
    finally:
        Fleet(settings).down()
    assert done.returncode in (0, 3), done.stderr
    assert "retries / first attempts" in done.stdout and "Traceback" not in done.stderr
    assert "core_worker.cc" not in done.stderr and "Token authentication" not in done.stderr, done.stderr
    assert "listens on every interface" not in done.stderr, done.stderr  # it ran on loopback alone
    summary: dict[str, Any] = json.loads((out / "summary.json").read_text())
    return summary


def test_a_local_ray_batch_listens_and_connects_on_loopback_only(
    settings: SourceSettings, tmp_path: Path
) -> None:
    """Every socket of every process of a local Ray batch, listed while it runs: the command (Ray's
    driver), its fleet, the GCS, the raylet and its agents, the workers. None listens on or connects to
    an address other than loopback's (a socket on every interface counts only in a namespace whose one
    interface is loopback)."""
    questions = write_questions(tmp_path, [QUESTIONS[number % 3] for number in range(40)])
    out = tmp_path / "out"
    process = batch_command(settings, str(questions), "--out", str(out), "--engine", "ray", *SLOW)
    try:
        wait_for_reports(process, out, 2)  # the fleet and the workers are up and answering
        processes = batch_processes(process.pid)
        sockets = sockets_of(processes)
    finally:
        if process.poll() is None:
            process.kill()
        process.communicate(timeout=30)
        Fleet(settings).down()
    commands = " ".join(each.command for each in sockets)
    for part in ("gcs_server", "raylet", "BatchWorker", "coordinator.cli"):  # the listing saw them all
        assert part in commands, commands
    assert any(each.status == "LISTEN" for each in sockets)
    assert off_loopback(sockets) == [], "\n".join(map(str, off_loopback(sockets)))


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
    # Each worker's memory three ways: unique (USS) within proportional (PSS) within resident (RSS).
    for rss, uss, pss in zip(
        run["memory_per_worker_mb"],
        run["memory_per_worker_uss_mb"],
        run["memory_per_worker_pss_mb"],
        strict=True,
    ):
        assert 0 < uss <= pss <= rss
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
    process = batch_command(settings, str(questions), "--out", str(out), "--engine", "ray", *SLOW)
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


# --- a real cluster: two nodes of `ray start`, the second killed mid-batch ---------------------------

RAY = (sys.executable, "-c", "from ray.scripts.scripts import main; main()")  # the `ray` command, this venv's
CLUSTER_S = 110.0  # the whole test: two nodes started, the batch, its rerun and the nodes stopped


@dataclass
class Node:
    """One `ray start --block` (the node's processes live while it does) and its output."""

    process: subprocess.Popen[bytes]
    log: Path
    killed: tuple[psutil.Process, ...] = ()

    def processes(self) -> list[psutil.Process]:
        """The command, the raylet and its agents, and the workers the raylet started."""
        with contextlib.suppress(psutil.Error):
            command = psutil.Process(self.process.pid)
            return [command, *command.children(recursive=True)]
        return []

    def workers(self) -> list[int]:
        """The pids of the batch's Ray workers on this node."""
        found = []
        for each in self.processes():
            with contextlib.suppress(psutil.Error):
                if any("BatchWorker" in part for part in each.cmdline()):
                    found.append(each.pid)
        return found

    def kill(self) -> None:
        """The node dies at once, as a machine losing power: every process of it, SIGKILL."""
        self.killed = (*self.killed, *self.processes())
        for each in self.killed:
            with contextlib.suppress(psutil.Error):
                each.kill()
        with contextlib.suppress(subprocess.TimeoutExpired):
            self.process.wait(timeout=10)  # the command is this test's child: reaped here

    def gone(self, within_s: float = 10.0) -> bool:
        """Whether none of the processes killed runs (an orphan nobody reaped yet is a zombie), given
        ``within_s`` for the kernel to end them: a SIGKILL is delivered at once, but a process tearing
        down its sockets (a network namespace being deleted) may take a moment to exit."""
        until = time.monotonic() + within_s
        while any(_still_runs(each) for each in self.killed):
            if time.monotonic() > until:
                return False
            time.sleep(0.05)
        return True


def _still_runs(process: psutil.Process) -> bool:
    with contextlib.suppress(psutil.Error):
        return process.is_running() and process.status() != psutil.STATUS_ZOMBIE
    return False


def start_node(
    args: list[str], log: Path, environment: dict[str, str], until: float, agent_port: int, prefix: list[str]
) -> Node:
    """`ray start ARGS --block` in a session of its own, run by ``prefix`` (into the cluster's network
    namespace); returned once Ray says the node is up (it is then registered with the head). Each
    node's agent gets a port of its own: two nodes share a host."""
    owned = ("--block", "--disable-usage-stats", f"--dashboard-agent-listen-port={agent_port}")
    with log.open("wb") as output:
        process = subprocess.Popen(
            [*prefix, *RAY, "start", *args, *owned], stdout=output, stderr=subprocess.STDOUT, env=environment,
            start_new_session=True,
        )  # fmt: skip
    node = Node(process, log)
    while "Ray runtime started" not in log.read_text(errors="replace"):
        if process.poll() is not None or time.monotonic() > until:
            node.kill()
            raise AssertionError(f"`ray start {' '.join(args)}` did not start:\n{log.read_text()[-3000:]}")
        time.sleep(0.1)  # polling the command's output: bounded by `until`
    return node


@dataclass
class Cluster:
    address: str  # the head's, as `--address` takes it
    nodes: list[Node]  # the head, then the second node
    token: dict[str, str]  # the environment that joins it: token authentication of its own
    prefix: list[str]  # runs a command in the cluster's network namespace, of loopback alone


@contextlib.contextmanager
def two_node_cluster(until: float) -> Iterator[Cluster]:
    """A head and a second node on this machine, one CPU each (so one worker each), in a network
    namespace of loopback alone: Ray keeps no port on loopback itself (``coordinator.batch.loopback``).
    Every process of both nodes is ended on the way out."""
    temp = Path(tempfile.mkdtemp(prefix="rc-ray-"))  # short: Ray's socket paths are under it
    token = {"RAY_AUTH_MODE": "token", "RAY_AUTH_TOKEN": secrets.token_hex(32)}
    environment = {**os.environ, **token}
    namespace = contextlib.ExitStack()
    cluster = Cluster("", [], token, namespace.enter_context(loopback_namespace()))
    try:
        for attempt in range(3):
            # Chosen together, so none is handed out twice. A port free now may still be taken before
            # the head binds it (an outgoing connection's own port, on a busy machine): then new ones.
            port, head_agent, second_agent = free_ports(3)
            head = [
                "--head",
                f"--port={port}",
                "--num-cpus=1",
                "--include-dashboard=false",
                f"--temp-dir={temp}",
            ]
            try:
                cluster.nodes.append(
                    start_node(head, temp / "head.log", environment, until, head_agent, cluster.prefix)
                )
                break
            except AssertionError as failed:
                if attempt == 2 or "Failed to start the grpc server" not in str(failed):
                    raise
        cluster.address = f"127.0.0.1:{port}"
        second = [f"--address={cluster.address}", "--num-cpus=1"]
        cluster.nodes.append(
            start_node(second, temp / "second.log", environment, until, second_agent, cluster.prefix)
        )
        yield cluster
    finally:
        for node in reversed(cluster.nodes):
            node.kill()
        namespace.close()
        shutil.rmtree(temp, ignore_errors=True)


def researched_on(out: Path, pid: int) -> bool:
    """Whether a report the batch wrote was researched by the worker ``pid`` (its spans are there)."""
    traced = out / "traces" / f"research-coordinator-{pid}.jsonl"
    if not traced.exists():
        return False
    trace_ids = {
        json.loads(line)["context"]["trace_id"].removeprefix("0x")
        for line in traced.read_text().splitlines()
        if line.strip()
    }
    for path in (out / "reports").glob("*.json"):
        with contextlib.suppress(ValueError):  # a report is whole or absent; read as it is renamed
            if json.loads(path.read_text())["trace_id"] in trace_ids:
                return True
    return False


def test_a_two_node_cluster_answers_every_question_once_when_its_second_node_dies(
    settings: SourceSettings, tmp_path: Path
) -> None:
    """`ray start --head`, a second `ray start --address`, a batch with `--address`: its two workers
    answer on both nodes; the second node is killed mid-batch and the engine asks its questions in
    flight again on the head's worker, so each question has one answer and one report."""
    until = time.monotonic() + CLUSTER_S
    queries = [QUESTIONS[number % 3] for number in range(40)]
    questions = write_questions(tmp_path, queries)
    out = tmp_path / "out"
    with two_node_cluster(until) as cluster:
        second = cluster.nodes[1]
        command = (
            str(questions), "--out", str(out), "--engine", "ray", "--workers", "2",
            "--address", cluster.address, "--concurrency", "4", "--faults", "customers:latency=150ms,seed=1",
        )  # fmt: skip
        process = batch_command(settings, *command, environment=cluster.token, prefix=cluster.prefix)
        try:
            while not second.workers():  # the second node's worker, started for the batch
                assert process.poll() is None, process.communicate()[1]
                assert time.monotonic() < until, "no worker started on the second node"
                time.sleep(0.1)
            (worker,) = second.workers()
            # Every socket of both nodes and of the batch (its fleet too), listed as the batch runs.
            processes = {each.pid: each for each in batch_processes(process.pid)}
            processes.update((each.pid, each) for node in cluster.nodes for each in node.processes())
            sockets = sockets_of(processes.values())
            while not researched_on(out, worker):  # a question answered there, its report written
                assert process.poll() is None, process.communicate()[1]
                assert time.monotonic() < until, "the second node answered no question in time"
                time.sleep(0.05)
            second.kill()  # mid-batch, with its worker's questions in flight
            at_death = len(list((out / "reports").glob("*.json")))
            stdout, stderr = process.communicate(timeout=max(1.0, until - time.monotonic()))
        finally:
            if process.poll() is None:
                process.kill()
            Fleet(settings).down()
    assert process.returncode in (0, 3), stderr
    assert "Traceback" not in stderr and "questions by node" in stdout, stdout + stderr
    raylets = [each for each in sockets if "raylet" in each.command and each.status == "LISTEN"]
    assert len({each.pid for each in raylets}) == 2, "\n".join(map(str, sockets))  # both nodes listed
    assert off_loopback(sockets) == [], "\n".join(map(str, off_loopback(sockets)))
    assert at_death < len(queries)  # the batch went on without the second node
    summary = json.loads((out / "summary.json").read_text())
    run = summary["this_run"]
    # Both nodes answered: the head's worker and the second node's, each a node id of its own.
    by_node = run["questions_by_node"]
    assert len(by_node) == 2 and all(count >= 1 for count in by_node.values()), run
    assert set(run["worker_nodes"]) == set(by_node), run
    # The dead node's questions in flight were asked again on the head's worker (the engine does
    # that: nothing a deterministic question calls writes), so every question is answered once:
    # one answer each, one report each, none failed, each answer from exactly one node.
    assert run["asked_again"] >= 1, run
    assert run["questions"] == len(queries) == sum(by_node.values()), run
    assert summary["answered"] + summary["partial"] == len(queries) and summary["failed"] == 0
    assert list((out / "failed").iterdir()) == []
    reports = sorted(path.stem for path in (out / "reports").glob("*.json"))
    assert reports == [f"q{number:03d}" for number in range(1, len(queries) + 1)]
    trace_ids = [
        ResearchReport.model_validate_json((out / "reports" / f"{id}.json").read_text()).trace_id
        for id in reports
    ]
    assert len(set(trace_ids)) == len(queries)
    assert summary["invariant_violations"] == 0
    # The second node's worker cannot come back (the head has no CPU free): only the head's closed.
    assert len(run["memory_per_worker_mb"]) == 1, run
    until_gone = time.monotonic() + 10  # and nothing of the cluster is left running
    while not all(node.gone() for node in cluster.nodes) and time.monotonic() < until_gone:
        time.sleep(0.1)
    assert all(node.gone() for node in cluster.nodes)
    # The same command again, resuming, has nothing left to ask.
    again = run_batch_command(settings, *command, "--resume")
    assert again.returncode == 0 or again.returncode == 3, again.stderr
    rerun = json.loads((out / "summary.json").read_text())["this_run"]
    assert rerun["questions"] == 0 and rerun["workers"] == 0, rerun
