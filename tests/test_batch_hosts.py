"""A Ray batch across two hosts (issue 47): two network namespaces joined by a veth pair (``tests.hosts``).
Host A holds the Ray head, the batch's own fleet (`--fleet-host`, on A's address: every request needs the
bearer token, which the workers send) and the batch's driver; host B a second Ray node, whose worker
researches against the fleet on A over the pair. Mid-batch B's cable is pulled out (its end of the pair
down): its processes live on, cut off. Ray's head notices by its health checks, tuned here to give up
on a node after about 3 s (``RAY_health_check_*``, Ray's system config read from the environment:
period 1 s, a check timing out after 1 s, 3 failures in a row; Ray's defaults take about 30 s), and the
engine asks B's questions in flight again on A's worker. Skipped where namespaces cannot be made."""

from __future__ import annotations

import contextlib
import json
import os
import secrets
import shutil
import tempfile
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from urllib.parse import urlsplit

import pytest

ray = pytest.importorskip("ray", reason="Ray is not installed here: pip install '.[ray]'")

from coordinator.reporting.report import ResearchReport  # noqa: E402
from sources.processes.fleet import Fleet  # noqa: E402
from sources.settings import SourceSettings  # noqa: E402
from tests.conftest import free_ports  # noqa: E402
from tests.hosts import TwoHosts, namespaces_left, two_hosts  # noqa: E402
from tests.sockets import batch_processes, off_loopback, sockets_of  # noqa: E402
from tests.test_batch import QUESTIONS, batch_command, write_questions  # noqa: E402
from tests.test_batch_ray import Node, researched_on, start_node  # noqa: E402

pytestmark = pytest.mark.subprocess

HOSTS_S = 150.0  # the whole test: the hosts made, two nodes started, the batch, all undone
# Ray's health checks of a node, from the head: a node that answers none for ~3 s is dead to the cluster.
HEALTH_CHECKS = {
    "RAY_health_check_period_ms": "1000",
    "RAY_health_check_timeout_ms": "1000",
    "RAY_health_check_failure_threshold": "3",
}


@dataclass
class HostsCluster:
    """Ray across two hosts: the head on A, a second node on B, one CPU each."""

    address: str  # the head's, as `--address` takes it
    nodes: list[Node]  # the head, then B's node
    environment: dict[str, str]  # what joins it: its token, and the health checks


@contextlib.contextmanager
def ray_across(hosts: TwoHosts, until: float, cpus: int = 1) -> Iterator[HostsCluster]:
    """`ray start --head` on host A and `ray start --address` on host B, each at its own address (as
    "On a cluster" in docs/guides/batch.md shows); every process of both ended on the way out."""
    temp = Path(tempfile.mkdtemp(prefix="rc-hosts-"))  # short: Ray's socket paths are under it
    joining = {"RAY_AUTH_MODE": "token", "RAY_AUTH_TOKEN": secrets.token_hex(32), **HEALTH_CHECKS}
    environment = {**os.environ, **joining}
    cluster = HostsCluster("", [], joining)
    try:
        port, head_agent, second_agent = free_ports(3)  # free on either host: the namespaces are new
        head = [
            "--head", f"--port={port}", f"--node-ip-address={hosts.a.address}", f"--num-cpus={cpus}",
            "--include-dashboard=false", f"--temp-dir={temp}",
        ]  # fmt: skip
        cluster.nodes.append(
            start_node(head, temp / "head.log", environment, until, head_agent, hosts.a.prefix)
        )
        cluster.address = f"{hosts.a.address}:{port}"
        second = [
            f"--address={cluster.address}",
            f"--node-ip-address={hosts.b.address}",
            f"--num-cpus={cpus}",
        ]
        cluster.nodes.append(
            start_node(second, temp / "second.log", environment, until, second_agent, hosts.b.prefix)
        )
        yield cluster
    finally:
        for node in reversed(cluster.nodes):
            node.kill()
        shutil.rmtree(temp, ignore_errors=True)


def test_a_batch_across_two_hosts_loses_no_question_when_the_second_is_cut_off(
    settings: SourceSettings, tmp_path: Path
) -> None:
    until = time.monotonic() + HOSTS_S
    queries = [QUESTIONS[number % 3] for number in range(40)]
    questions = write_questions(tmp_path, queries)
    out = tmp_path / "out"
    with two_hosts() as hosts, ray_across(hosts, until) as cluster:
        a, b, nodes = hosts.a, hosts.b, cluster.nodes
        command = (
            str(questions), "--out", str(out), "--engine", "ray", "--workers", "2",
            "--address", cluster.address, "--fleet-host", a.address,
            "--concurrency", "4", "--faults", "customers:latency=150ms,seed=1",
        )  # fmt: skip
        process = batch_command(settings, *command, environment=cluster.environment, prefix=a.prefix)
        try:
            while not nodes[1].workers():  # host B's worker, started for the batch
                assert process.poll() is None, process.communicate()[1]
                assert time.monotonic() < until, "no worker started on host B"
                time.sleep(0.1)
            (worker,) = nodes[1].workers()
            while not researched_on(out, worker):  # B answered a question over the pair
                assert process.poll() is None, process.communicate()[1]
                assert time.monotonic() < until, "host B answered no question in time"
                time.sleep(0.05)
            # Every socket of both hosts' processes, as the batch runs across them.
            processes = {each.pid: each for each in batch_processes(process.pid)}
            processes.update((each.pid, each) for node in nodes for each in node.processes())
            sockets = sockets_of(processes.values())
            fleet = Fleet(settings).urls()  # the batch's own, as it advertises them
            hosts.cut(b)  # mid-batch: B's processes live on, cut off
            at_cut = len(list((out / "reports").glob("*.json")))
            alive_after_cut = [each.pid for each in nodes[1].processes()]
            stdout, stderr = process.communicate(timeout=max(1.0, until - time.monotonic()))
        finally:
            if process.poll() is None:
                process.kill()
            Fleet(settings).down()
    assert namespaces_left(hosts) == []  # nothing of either host is left
    assert all(node.gone() for node in nodes)
    assert worker in alive_after_cut  # cut off, not killed
    assert process.returncode in (0, 3), stderr
    assert "Traceback" not in stderr and "questions by node" in stdout, stdout + stderr
    assert "asked again" in stdout, stdout
    commands = " ".join(each.command for each in sockets)
    for part in ("gcs_server", "raylet", "BatchWorker", "coordinator.cli", "sources.orders"):
        assert part in commands, commands  # the listing saw both hosts' processes and the fleet
    assert all(url.startswith(f"http://{a.address}:") for url in fleet.values()), fleet
    fleet_ends = {(a.address, int(urlsplit(url).port or 0)) for url in fleet.values()}
    dialled = [each for each in sockets if each.pid == worker and each.remote in fleet_ends]
    assert dialled, "\n".join(map(str, sockets))  # B's worker dialled the fleet on A, over the pair
    # No process it started reached past the two hosts and loopback.
    outside = off_loopback(sockets, hosts=hosts.addresses(), links=hosts.links())
    assert outside == [], "\n".join(map(str, outside))
    assert at_cut < len(queries)  # the batch went on without host B
    summary = json.loads((out / "summary.json").read_text())
    run = summary["this_run"]
    by_node = run["questions_by_node"]
    assert len(by_node) == 2 and all(count >= 1 for count in by_node.values()), run  # both nodes named
    assert run["asked_again"] >= 1 and len(run["questions_asked_again"]) >= 1, run
    assert run["questions"] == len(queries) == sum(by_node.values()), run  # each answered exactly once
    assert summary["answered"] + summary["partial"] == len(queries) and summary["failed"] == 0
    assert list((out / "failed").iterdir()) == []
    reports = sorted(path.stem for path in (out / "reports").glob("*.json"))
    assert reports == [f"q{number:03d}" for number in range(1, len(queries) + 1)]
    trace_ids = {
        ResearchReport.model_validate_json((out / "reports" / f"{id}.json").read_text()).trace_id
        for id in reports
    }
    assert len(trace_ids) == len(queries)
    assert summary["invariant_violations"] == 0
