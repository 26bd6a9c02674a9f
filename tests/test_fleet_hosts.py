"""The fleet on an address a cluster reaches (`research sources up --host`), seen from another host:
two network namespaces joined by a veth pair (``tests.hosts``), the fleet on host A, a client on host B.
Off loopback every request needs the coordinator's bearer token, a foreign Host is refused as on
loopback, and a coordinator's session (with the token it sends) is answered. Skipped where namespaces
cannot be made (not root)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from typing import Any

import pytest

from sources.processes.fleet import Fleet
from sources.security.keys import private_pem
from sources.settings import SIGNING_KEY_ENV, SourceSettings
from tests.conftest import PROJECT_ROOT, TEST_KEY
from tests.hosts import namespaces_left, two_hosts

pytestmark = pytest.mark.subprocess

CLI = "from coordinator.cli import app; app()"
# Run on host B: what each kind of request to the orders source on host A is answered.
PROBE = """
import json, sys
import anyio, httpx2
from mcp import Client
from sources.settings import SourceSettings
from subagents.sessions.bearer import BearerCredential
from subagents.sessions.bounded import opened_transport
from subagents.sessions.connection import http_target

url, base = sys.argv[1], sys.argv[1].removesuffix("/mcp")
initialize = {"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": {
    "protocolVersion": "2025-06-18", "capabilities": {}, "clientInfo": {"name": "probe", "version": "1"}}}
headers = {"Accept": "application/json, text/event-stream", "Content-Type": "application/json"}
credential = BearerCredential(SourceSettings.from_environment().signing_key(), "orders")

async def main():
    seen = {}
    async with httpx2.AsyncClient(timeout=10) as http:
        seen["anonymous"] = (await http.post(url, json=initialize, headers=headers)).status_code
        forged = {**headers, "Authorization": "Bearer not-a-credential"}
        seen["forged_token"] = (await http.post(url, json=initialize, headers=forged)).status_code
        foreign = {**headers, "Authorization": f"Bearer {credential.token()}", "Host": "rebound.example:80"}
        seen["foreign_host"] = (await http.post(url, json=initialize, headers=foreign)).status_code
        seen["health"] = (await http.get(base + "/health")).status_code
        seen["health_foreign_host"] = (await http.get(base + "/health", headers={"Host": "rebound.example"})).status_code
    with anyio.fail_after(20):
        async with Client(opened_transport(http_target(url, credential)())) as client:
            result = await client.call_tool("search_orders", {"customer_id": "CUST-00042"})
    seen["with_token"] = [result.is_error, json.loads(result.content[0].text)["resultCount"]]
    print(json.dumps(seen))

anyio.run(main)
"""


def test_a_fleet_on_a_chosen_address_answers_another_host_only_with_the_token(
    settings: SourceSettings,
) -> None:
    # The coordinator's key, as every node of a cluster is given it (the fleet derives the public key).
    environment = {**os.environ, **settings.child_environment(), SIGNING_KEY_ENV: private_pem(TEST_KEY)}
    with two_hosts() as hosts:
        try:
            up = subprocess.run(
                [*hosts.a.prefix, sys.executable, "-c", CLI, "sources", "up", "--host", hosts.a.address],
                env=environment, cwd=PROJECT_ROOT, capture_output=True, text=True, timeout=60, check=False,
            )  # fmt: skip
            assert up.returncode == 0, up.stderr
            urls = Fleet(settings).urls()
            probe = subprocess.run(
                [*hosts.b.prefix, sys.executable, "-c", PROBE, urls["orders"]],
                env=environment,
                cwd=PROJECT_ROOT, capture_output=True, text=True, timeout=60, check=False,
            )  # fmt: skip
            arguments = json.dumps({"identifier": "CUST-00042"})
            called = subprocess.run(
                [*hosts.b.prefix, sys.executable, "-c", CLI, "sources", "call", "customers", "customer_lookup",
                 arguments, "--url", urls["customers"]],
                env=environment, cwd=PROJECT_ROOT, capture_output=True, text=True, timeout=60, check=False,
            )  # fmt: skip
        finally:
            Fleet(settings).down()
    assert namespaces_left(hosts) == []
    assert sorted(urls) == ["billing", "customers", "kb", "orders", "tickets"]
    assert all(url.startswith(f"http://{hosts.a.address}:") for url in urls.values()), (
        urls
    )  # advertised there
    assert probe.returncode == 0, probe.stderr
    seen: dict[str, Any] = json.loads(probe.stdout)
    assert seen == {
        "anonymous": 401,  # on loopback an anonymous request is served; here it needs the token
        "forged_token": 401,
        "foreign_host": 421,  # DNS rebinding: a Host other than the address it listens on
        "health": 200,
        "health_foreign_host": 421,
        "with_token": [False, seen["with_token"][1]],
    }, seen
    assert seen["with_token"][1] >= 1  # the coordinator's session, its token sent, answered over the veth
    # `research sources call --url` on another host: the demo source dialled with its token, as a worker does
    assert called.returncode == 0, called.stderr
    assert json.loads(called.stdout)["resultCount"] == 1, called.stdout


def test_every_interface_is_refused_in_one_line() -> None:
    for given in ("0.0.0.0", "::", "fleet.example"):  # noqa: S104  (what is refused, not bound)
        done = subprocess.run(
            [sys.executable, "-c", CLI, "sources", "up", "--host", given],
            cwd=PROJECT_ROOT, capture_output=True, text=True, timeout=60, check=False,
        )  # fmt: skip
        assert done.returncode == 2 and "Traceback" not in done.stderr, done.stderr
        assert "e.g. 10.0.0.5" in done.stderr, done.stderr
