"""Chaos control refuses what a web page, a rebound DNS name or a caller without the secret can send.

Real HTTP requests to a real source process; after each refused request the faults are unchanged.
"""

from __future__ import annotations

import os
import stat
import subprocess
import sys
from collections.abc import Callable, Iterator
from pathlib import Path

import httpx2
import pytest

from sources.security.fleet_secret import FLEET_SECRET_HEADER, make_secret, read_secret
from sources.settings import SourceSettings
from tests.conftest import PROJECT_ROOT, HttpSource, child_environment

pytestmark = pytest.mark.subprocess

SECRET = "a-chaos-secret-for-the-tests"
HANG = '{"faults": "hang=1"}'


@pytest.fixture
def controlled(http_source: Callable[..., HttpSource]) -> str:
    """The base URL of a kb source started with chaos control and the secret."""
    return http_source("kb", "--chaos-control", RESEARCH_FLEET_SECRET=SECRET).url.removesuffix("/mcp")


@pytest.fixture(scope="module")
def refusing(settings: SourceSettings) -> Iterator[str]:
    """As ``controlled``, one source for the tests whose every request must be refused: each checks that
    the faults are still none after its request, so a request wrongly let through fails that test."""
    running = HttpSource(settings, "kb", "--chaos-control", RESEARCH_FLEET_SECRET=SECRET)
    try:
        yield running.url.removesuffix("/mcp")
    finally:
        running.stop()


def faults_in_force(base: str) -> str:
    return httpx2.get(f"{base}/health", timeout=10).json()["faults"]


@pytest.mark.parametrize(
    ("headers", "body", "status"),
    [
        # The "simple" cross-site request a page can send without a preflight: text/plain, from its origin.
        (
            {"Content-Type": "text/plain", "Origin": "http://evil.example", FLEET_SECRET_HEADER: SECRET},
            HANG,
            400,
        ),
        (
            {"Content-Type": "application/x-www-form-urlencoded", FLEET_SECRET_HEADER: SECRET},
            "faults=hang%3D1",
            400,
        ),
        (
            {
                "Content-Type": "application/json",
                "Origin": "http://evil.example",
                FLEET_SECRET_HEADER: SECRET,
            },
            HANG,
            403,
        ),
        (
            {"Content-Type": "application/json", "Host": "evil.example", FLEET_SECRET_HEADER: SECRET},
            HANG,
            421,
        ),
        ({"Content-Type": "application/json"}, HANG, 403),  # no secret
        ({"Content-Type": "application/json", FLEET_SECRET_HEADER: "a-guess-at-the-secret"}, HANG, 403),
    ],
    ids=["text-plain-cross-site", "form", "foreign-origin", "foreign-host", "no-secret", "wrong-secret"],
)
def test_chaos_control_refuses_and_changes_nothing(
    refusing: str, headers: dict[str, str], body: str, status: int
) -> None:
    assert faults_in_force(refusing) == ""  # as the source started: no earlier request changed them
    refused = httpx2.post(f"{refusing}/chaos", content=body, headers=headers, timeout=10)
    assert refused.status_code == status, refused.text
    assert faults_in_force(refusing) == ""


def test_chaos_control_with_the_secret_applies_the_faults(controlled: str) -> None:
    headers = {FLEET_SECRET_HEADER: SECRET}

    def post(body: dict[str, str]) -> httpx2.Response:
        return httpx2.post(f"{controlled}/chaos", json=body, headers=headers, timeout=10)

    applied = post({"faults": "latency=5ms"})
    assert applied.status_code == 200 and applied.json()["faults"] == "latency=5ms"
    assert faults_in_force(controlled) == "latency=5ms"
    # A merge changes only the faults it names; a plain POST replaces them all.
    assert post({"faults": "transient=0.3", "mode": "merge"}).json()["faults"] == "latency=5ms,transient=0.3"
    assert post({"faults": "latency=0ms", "mode": "merge"}).json()["faults"] == "transient=0.3"
    refused = post({"faults": "hang=1", "mode": "sideways"})
    assert refused.status_code == 400 and "mode" in refused.json()["error"]
    assert faults_in_force(controlled) == "transient=0.3"
    assert post({"faults": "hang=1"}).json()["faults"] == "hang=1.0"


def test_health_refuses_a_rebound_host(refusing: str) -> None:
    assert httpx2.get(f"{refusing}/health", headers={"Host": "evil.example"}, timeout=10).status_code == 421


def test_chaos_control_without_a_secret_does_not_start(settings: SourceSettings) -> None:
    done = subprocess.run(
        [sys.executable, "-m", "sources.kb", "--http", "--port", "0", "--chaos-control"],
        env={**os.environ, **child_environment(settings)}, cwd=PROJECT_ROOT, capture_output=True, text=True,
        timeout=60,
    )  # fmt: skip
    assert done.returncode != 0
    assert "RESEARCH_FLEET_SECRET" in done.stderr and "Traceback" not in done.stderr


def test_the_secret_file_is_made_private_and_a_readable_one_is_refused(tmp_path: Path) -> None:
    path = tmp_path / "fleet.secret"
    secret = make_secret(path)
    assert stat.S_IMODE(path.stat().st_mode) == 0o600
    assert read_secret(path) == secret and len(secret) >= 32
    assert make_secret(path) != secret  # each fleet gets a new one
    path.chmod(0o644)
    with pytest.raises(ValueError, match=r"open to other users.*chmod 600"):
        read_secret(path)
