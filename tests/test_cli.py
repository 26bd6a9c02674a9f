"""The `research sources` commands, run as a user runs them: a real process spawning real sources."""

from __future__ import annotations

import json
import os
import subprocess
import sys

import pytest

from sources.settings import SourceSettings
from tests.conftest import PROJECT_ROOT

pytestmark = pytest.mark.subprocess


def research(settings: SourceSettings, *args: str) -> subprocess.CompletedProcess[str]:
    environment = {**os.environ, **settings.child_environment(), "COLUMNS": "200"}
    return subprocess.run(
        [sys.executable, "-c", "from coordinator.cli import app; app()", *args],
        env=environment, cwd=PROJECT_ROOT, capture_output=True, text=True, timeout=120,
    )  # fmt: skip


def test_list_shows_the_five_sources_and_their_tools(settings: SourceSettings) -> None:
    listed = research(settings, "sources", "list")
    assert listed.returncode == 0, listed.stderr
    for tool in ["customer_lookup", "search_orders", "issue_refund", "search_tickets", "related_policies"]:
        assert tool in listed.stdout


def test_call_prints_the_contract_and_exits_by_outcome(settings: SourceSettings) -> None:
    found = research(
        settings, "sources", "call", "customers", "customer_lookup", '{"identifier": "CUST-00042"}'
    )
    assert found.returncode == 0, found.stderr
    assert json.loads(found.stdout)["results"][0]["email"] == "jane.doe@example.com"

    refused = research(
        settings, "sources", "call", "billing", "refund_eligibility",
        '{"order_id": "ORD-10023", "amount": 750}', "--scope", "billing:read",
    )  # fmt: skip
    assert refused.returncode == 1
    payload = json.loads(refused.stdout)
    assert payload["isError"] is True and payload["errorCategory"] == "business"
    assert payload["partial_results"][0]["id"] == "ORD-10023"


@pytest.mark.parametrize(
    ("args", "fragment"),
    [
        (["sources", "call", "customers", "customer_lookup", "{not json"], "must be a JSON object"),
        (["sources", "call", "customers", "customer_lookup", "[1]"], "must be a JSON object"),
        (["sources", "call", "crm", "customer_lookup"], "unknown source 'crm'"),
    ],
)
def test_usage_errors_say_what_is_wrong(settings: SourceSettings, args: list[str], fragment: str) -> None:
    result = research(settings, *args)
    assert result.returncode == 2
    assert fragment in result.stderr and "Traceback" not in result.stderr
