"""customer_lookup through the mcp Client: the reference exercise's six modes and the real lookups."""

from __future__ import annotations

from collections.abc import Callable

import pytest
from mcp.server import MCPServer

from tests.conftest import call, credential, wire

pytestmark = pytest.mark.anyio

EXPECTED_MODES = {
    "timeout": ("transient", True),
    "invalid": ("validation", False),
    "business": ("business", False),
    "permission": ("permission", False),
}


@pytest.fixture
def server(server_for: Callable[..., MCPServer]) -> MCPServer:
    return server_for("customers")


@pytest.mark.parametrize("mode", sorted(EXPECTED_MODES))
async def test_simulated_errors_carry_exactly_three_fields(server: MCPServer, mode: str) -> None:
    result = await call(server, "customer_lookup", {"identifier": "CUST-00042", "mode": mode})
    payload = wire(result)
    assert result.is_error is True
    assert set(payload) == {"errorCategory", "isRetryable", "description"}
    assert (payload["errorCategory"], payload["isRetryable"]) == EXPECTED_MODES[mode]
    assert isinstance(payload["description"], str) and payload["description"]


async def test_simulated_not_found_is_a_valid_empty_result(server: MCPServer) -> None:
    result = await call(
        server, "customer_lookup", {"identifier": "jane.doe@example.com", "mode": "not_found"}
    )
    payload = wire(result)
    assert result.is_error is False
    assert payload["resultCount"] == 0 and payload["results"] == []
    assert "executed successfully" in payload["message"] and "no matches" in payload["message"]


async def test_invalid_mode_names_the_identifier_it_was_given(server: MCPServer) -> None:
    payload = wire(await call(server, "customer_lookup", {"identifier": "CUST-00042", "mode": "invalid"}))
    assert "CUST-00042" in payload["description"] and "CUST-NNNNN" in payload["description"]


@pytest.mark.parametrize("identifier", ["jane.doe@example.com", "CUST-00042"])
async def test_success_is_a_real_lookup(server: MCPServer, identifier: str) -> None:
    result = await call(server, "customer_lookup", {"identifier": identifier})
    payload = wire(result)
    assert result.is_error is False
    assert payload["resultCount"] == 1 and payload["truncated"] is False
    (customer,) = payload["results"]
    assert customer["id"] == "CUST-00042" and customer["email"] == "jane.doe@example.com"
    assert customer["name"] == "Jane Doe"


async def test_default_mode_is_success(server: MCPServer) -> None:
    payload = wire(await call(server, "customer_lookup", {"identifier": "new.customer@example.com"}))
    assert payload["results"][0]["id"] == "CUST-00077"


async def test_unknown_customer_is_a_valid_empty_result(server: MCPServer) -> None:
    result = await call(server, "customer_lookup", {"identifier": "nobody@example.com"})
    payload = wire(result)
    assert result.is_error is False
    assert payload == {
        "resultCount": 0,
        "results": [],
        "message": "No customer matches nobody@example.com. The query executed successfully and returned no matches.",
    }


@pytest.mark.parametrize("identifier", ["CUST-00013", "erased.user@example.com"])
async def test_erased_customer_is_refused_by_a_business_rule(server: MCPServer, identifier: str) -> None:
    result = await call(server, "customer_lookup", {"identifier": identifier})
    payload = wire(result)
    assert result.is_error is True
    assert payload["errorCategory"] == "business" and payload["isRetryable"] is False
    assert "KB-GDPR" in payload["description"]
    assert payload["attempted_query"] == {
        "tool": "customer_lookup",
        "arguments": {"identifier": identifier, "mode": "success"},
    }
    assert "erased.user" not in str(payload.get("partial_results", ""))


async def test_restricted_customer_needs_the_restricted_scope(server: MCPServer) -> None:
    denied = await call(server, "customer_lookup", {"identifier": "vip@example.com"})
    payload = wire(denied)
    assert denied.is_error is True
    assert payload["errorCategory"] == "permission" and payload["isRetryable"] is False
    assert "customers:restricted" in payload["description"]
    assert "results" not in payload and "Victoria" not in denied.content[0].text  # type: ignore[union-attr]

    elevated = await call(
        server, "customer_lookup", {"identifier": "vip@example.com"}, credential("customers:restricted")
    )
    assert elevated.is_error is False
    assert wire(elevated)["results"][0]["id"] == "CUST-00001"


async def test_a_credential_without_the_scope_is_still_refused(server: MCPServer) -> None:
    result = await call(server, "customer_lookup", {"identifier": "CUST-00001"}, credential("billing:read"))
    assert wire(result)["errorCategory"] == "permission"
    assert "research-agent" in wire(result)["description"]


@pytest.mark.parametrize(
    ("meta", "reason"),
    [
        (credential("customers:restricted", now=0), "expired"),
        ({"research-coordinator/credential": "not-a-token"}, "malformed"),
        ({"research-coordinator/credential": 42}, "not a token"),
    ],
)
async def test_a_bad_credential_is_rejected_without_being_echoed(
    server: MCPServer, meta: dict[str, object], reason: str
) -> None:
    result = await call(server, "customer_lookup", {"identifier": "CUST-00042"}, meta)
    payload = wire(result)
    assert payload["errorCategory"] == "permission" and reason in payload["description"]
    token = str(next(iter(meta.values())))
    assert token not in result.content[0].text  # type: ignore[union-attr]


async def test_a_credential_signed_with_another_key_is_rejected(server: MCPServer) -> None:
    from sources.auth import CREDENTIAL_META_KEY, issue_credential

    forged = issue_credential("another-key-" + "1" * 52, "intruder", ["customers:restricted"])
    result = await call(
        server, "customer_lookup", {"identifier": "CUST-00001"}, {CREDENTIAL_META_KEY: forged}
    )
    payload = wire(result)
    assert payload["errorCategory"] == "permission" and "signature" in payload["description"]
    assert forged not in result.content[0].text  # type: ignore[union-attr]
