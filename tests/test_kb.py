"""The kb source through the mcp Client: search, the link graph, and the warm-up window."""

from __future__ import annotations

import dataclasses
from collections.abc import Callable
from pathlib import Path

import pytest
from mcp.server import MCPServer

from sources.settings import SourceSettings
from tests.conftest import call, wire
from tests.test_tickets import ManualClock

pytestmark = pytest.mark.anyio


@pytest.fixture
def server(server_for: Callable[..., MCPServer]) -> MCPServer:
    return server_for("kb")


async def test_search_policies(server: MCPServer) -> None:
    payload = wire(await call(server, "search_policies", {"query": "damaged refund"}))
    ids = [policy["id"] for policy in payload["results"]]
    assert ids[0] == "KB-DAMAGED" and "KB-REFUNDS" in ids


async def test_no_match_is_a_valid_empty_result(server: MCPServer) -> None:
    result = await call(server, "search_policies", {"query": "zeppelin"})
    assert result.is_error is False and wire(result)["resultCount"] == 0


async def test_the_story_policies_are_linked_as_a_graph(server: MCPServer) -> None:
    payload = wire(await call(server, "related_policies", {"article_id": "KB-DAMAGED"}))
    neighbours = {policy["id"]: policy for policy in payload["results"]}
    assert {"KB-REFUNDS", "KB-ESCALATION"} <= set(neighbours)
    assert (
        neighbours["KB-REFUNDS"]["relation"] == "refund_rules" and neighbours["KB-REFUNDS"]["distance"] == 1
    )
    deeper = wire(await call(server, "related_policies", {"article_id": "KB-GDPR", "depth": 2}))
    by_id = {policy["id"]: policy for policy in deeper["results"]}
    assert by_id["KB-ESCALATION"]["distance"] == 1
    assert by_id["KB-REFUNDS"]["path"] == ["KB-GDPR", "KB-ESCALATION", "KB-REFUNDS"]


async def test_an_unknown_article_is_a_valid_empty_result(server: MCPServer) -> None:
    result = await call(server, "related_policies", {"article_id": "KB-UNKNOWN"})
    assert result.is_error is False and wire(result)["resultCount"] == 0


async def test_calls_during_warm_up_are_transient_with_retry_after(
    settings: SourceSettings, tmp_path: Path
) -> None:
    from sources import kb

    clock = ManualClock()
    fresh = dataclasses.replace(
        settings, data_dir=tmp_path, kb_warmup_ms=1500
    )  # a world whose index is not built
    server = kb.create_server(fresh, clock=clock)
    clock.now += 0.3
    for tool, arguments in [
        ("search_policies", {"query": "refunds"}),
        ("related_policies", {"article_id": "KB-REFUNDS"}),
    ]:
        result = await call(server, tool, arguments)
        payload = wire(result)
        assert payload["errorCategory"] == "transient" and payload["isRetryable"] is True
        assert payload["retryAfterMs"] == 1200
    clock.now += 1.2
    assert (await call(server, "search_policies", {"query": "refunds"})).is_error is False
    restarted = kb.create_server(fresh, clock=clock)  # the index was kept: a new process is warm at once
    assert (await call(restarted, "search_policies", {"query": "refunds"})).is_error is False


async def test_a_warm_index_is_not_looked_for_again_on_each_call(
    server: MCPServer, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Once the index is known to be built, a call costs no look at the data folder (a stat each)."""
    looked: list[Path] = []
    exists = Path.exists

    def counted(path: Path) -> bool:
        looked.append(path)
        return exists(path)

    monkeypatch.setattr(Path, "exists", counted)
    for _ in range(3):
        assert (await call(server, "search_policies", {"query": "refunds"})).is_error is False
    assert [path for path in looked if path.name == "kb-index.built"] == []
