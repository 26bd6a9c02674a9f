"""A local Ray batch's network namespace (``coordinator.batch.loopback``): when a batch may use one,
and the loopback it brings up there. The batch in it, socket by socket, is tests/test_batch_ray.py's."""

from __future__ import annotations

import dataclasses
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from coordinator.batch import loopback
from coordinator.batch.run import Batch
from sources.settings import SourceSettings
from subagents.claude import ClaudeSettings

ARGV = ["research", "batch"]  # sys.argv as `research batch ...` gives it


def test_a_batch_that_needs_nothing_outside_may_run_in_one(settings: SourceSettings, tmp_path: Path) -> None:
    if shutil.which("unshare") is None:
        pytest.skip("no unshare (util-linux) here")
    assert loopback.obstacle(Batch(tmp_path / "q", tmp_path / "out", "ray"), settings, ARGV) is None


@pytest.mark.parametrize(
    ("changed", "argv", "reason"),
    [
        (
            {"urls": {"orders": "http://127.0.0.1:8102/mcp"}},
            ARGV,
            "the sources given by --url are outside it",
        ),
        ({"claude": ClaudeSettings()}, ARGV, "Claude is reached over the network"),
        ({}, ["pytest"], "it was not started as the `research batch` command"),
    ],
)
def test_a_batch_that_needs_what_is_outside_says_why_it_runs_without_one(
    settings: SourceSettings, tmp_path: Path, changed: dict[str, object], argv: list[str], reason: str
) -> None:
    asked = Batch(tmp_path / "q", tmp_path / "out", "ray", **changed)  # type: ignore[arg-type]  # the fields varied
    assert loopback.obstacle(asked, settings, argv) == reason


def test_traces_sent_over_otlp_keep_a_batch_out_of_one(settings: SourceSettings, tmp_path: Path) -> None:
    otlp = dataclasses.replace(settings, trace_exporters=("file", "otlp"))
    reason = loopback.obstacle(Batch(tmp_path / "q", tmp_path / "out", "ray"), otlp, ARGV)
    assert reason == "its traces go to an OTLP collector outside it"


# In a new network namespace loopback is down: a connection to 127.0.0.1 fails until `up()`.
_CONNECT = """
import socket, sys
from coordinator.batch import loopback
if sys.argv[1] == "up":
    loopback.up()
with socket.socket() as server:
    server.bind(("127.0.0.1", 0)); server.listen()
    with socket.create_connection(server.getsockname(), timeout=5):
        print("connected")
"""


@pytest.mark.parametrize("bring_up", [True, False])
def test_up_brings_the_namespace_loopback_up(bring_up: bool) -> None:
    if shutil.which("unshare") is None:
        pytest.skip("no unshare (util-linux) here")
    done = subprocess.run(
        [shutil.which("unshare") or "unshare", "--net", "--map-root-user", "--", sys.executable, "-c", _CONNECT,
         "up" if bring_up else "down"],
        capture_output=True, text=True, timeout=60, check=False,
    )  # fmt: skip
    if bring_up:
        assert done.returncode == 0 and done.stdout.strip() == "connected", done.stderr
    else:
        assert done.returncode != 0 and "connected" not in done.stdout, done.stdout
