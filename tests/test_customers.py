"""customer_lookup and find_customers through the mcp Client: the reference exercise's six modes, the
real lookups with their near-miss suggestion, and the name search."""

from __future__ import annotations

import dataclasses
import re
import shutil
import sqlite3
from collections.abc import Callable
from contextlib import closing
from pathlib import Path
from typing import Any

import pytest
from mcp import Client
from mcp.server import MCPServer
from rapidfuzz.distance import Levenshtein

from sources.settings import SourceSettings
from sources.store import Store
from sources.toolkit import EMPTY_RESULT_NOTE
from sources.world import world_path
from tests.conftest import call, credential, empty_message, wire

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
        server,
        "customer_lookup",
        {"identifier": "vip@example.com"},
        credential("customers:restricted", source="customers"),
    )
    assert elevated.is_error is False
    assert wire(elevated)["results"][0]["id"] == "CUST-00001"


async def test_a_credential_without_the_scope_is_still_refused(server: MCPServer) -> None:
    result = await call(
        server,
        "customer_lookup",
        {"identifier": "CUST-00001"},
        credential("billing:read", source="customers"),
    )
    assert wire(result)["errorCategory"] == "permission"
    assert "research-agent" in wire(result)["description"]


@pytest.mark.parametrize(
    ("meta", "reason"),
    [
        (credential("customers:restricted", source="customers", now=0), "expired"),
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
    from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey

    from sources.security.auth import CREDENTIAL_META_KEY, issue_credential

    another_key = Ed25519PrivateKey.generate()
    forged = issue_credential(another_key, "intruder", ["customers:restricted"], source="customers")
    result = await call(
        server, "customer_lookup", {"identifier": "CUST-00001"}, {CREDENTIAL_META_KEY: forged}
    )
    payload = wire(result)
    assert payload["errorCategory"] == "permission" and "signature" in payload["description"]
    assert forged not in result.content[0].text  # type: ignore[union-attr]


# --- find_customers ------------------------------------------------------------------------------


def ids(payload: dict[str, Any]) -> list[str]:
    return [customer["id"] for customer in payload["results"]]


async def test_a_full_name_finds_the_one_customer(server: MCPServer) -> None:
    result = await call(server, "find_customers", {"name": "jane doe"})
    payload = wire(result)
    assert result.is_error is False
    assert ids(payload) == ["CUST-00042"] and payload["results"][0]["email"] == "jane.doe@example.com"
    assert ids(wire(await call(server, "find_customers", {"name": "DOE"}))) == ["CUST-00042"]


async def test_a_first_name_finds_several_by_name_then_id(server: MCPServer) -> None:
    payload = wire(await call(server, "find_customers", {"name": "Jane", "limit": 50}))
    assert {"CUST-00042", "CUST-00110"} <= set(ids(payload))  # Jane Doe, Jane Bates
    found = [(customer["name"], customer["id"]) for customer in payload["results"]]
    assert found == sorted(found) and payload["truncated"] is False
    assert all(any(word.lower().startswith("jane") for word in name.split()) for name, _ in found)

    page = wire(await call(server, "find_customers", {"name": "Jane", "limit": 2}))
    assert page["resultCount"] == 2 and page["truncated"] is True and "nextCursor" not in page
    assert page["results"] == payload["results"][:2]


async def test_a_word_matches_only_the_start_of_a_word(server: MCPServer) -> None:
    payload = wire(await call(server, "find_customers", {"name": "ane", "limit": 50}))
    assert payload["results"] == [] or "CUST-00042" not in ids(payload)
    assert all(
        any(word.lower().startswith("ane") for word in customer["name"].split())
        for customer in payload["results"]
    )


async def test_no_match_is_a_valid_empty_result(server: MCPServer) -> None:
    result = await call(server, "find_customers", {"name": "Zebedee Quux"})
    assert empty_message(result) == f"No customer has a name matching 'Zebedee Quux'. {EMPTY_RESULT_NOTE}"


async def test_an_erased_customer_never_matches(
    server_for: Callable[..., MCPServer], settings: SourceSettings, tmp_path: Path
) -> None:
    assert wire(await call(server_for("customers"), "find_customers", {"name": "erased"}))["results"] == []
    # A world in which Jane Doe was erased but her name was left behind: still no match.
    shutil.copytree(world_path(settings.data_dir, settings.seed), world_path(tmp_path, settings.seed))
    with closing(sqlite3.connect(world_path(tmp_path, settings.seed) / "customers.db")) as connection:
        connection.execute("UPDATE customers SET erased_on = '2026-10-30' WHERE id = 'CUST-00042'")
        connection.commit()
    server = server_for("customers", settings=dataclasses.replace(settings, data_dir=tmp_path))
    assert wire(await call(server, "find_customers", {"name": "jane doe"}))["results"] == []
    assert "CUST-00042" not in ids(wire(await call(server, "find_customers", {"name": "jane", "limit": 50})))


async def test_a_restricted_match_needs_the_restricted_scope(server: MCPServer) -> None:
    denied = await call(server, "find_customers", {"name": "victoria"})
    payload = wire(denied)
    assert denied.is_error is True
    assert payload["errorCategory"] == "permission" and payload["requiredScope"] == "customers:restricted"
    assert payload["attempted_query"] == {
        "tool": "find_customers",
        "arguments": {"name": "victoria", "limit": 10},
    }
    text = denied.content[0].text  # type: ignore[union-attr]
    assert "results" not in payload and "CUST-00001" not in text and "Ives" not in text

    elevated = await call(
        server, "find_customers", {"name": "victoria"}, credential("customers:restricted", source="customers")
    )
    assert elevated.is_error is False and "CUST-00001" in ids(wire(elevated))


@pytest.mark.parametrize("name", ["", "   ", "jane@example.com", "CUST-00042", "J4ne", "x" * 101])
async def test_a_name_that_is_not_a_name_is_a_validation_error(server: MCPServer, name: str) -> None:
    result = await call(server, "find_customers", {"name": name})
    payload = wire(result)
    assert result.is_error is True and payload["errorCategory"] == "validation"
    assert "Argument 'name'" in payload["description"] and 'Example: "Jane Doe"' in payload["description"]
    assert payload["attempted_query"]["arguments"]["name"] == name


# --- customer_lookup's near-miss suggestion -------------------------------------------------------


def near_emails(settings: SourceSettings, email: str) -> list[str]:
    """The shown customers' emails at most two edits from ``email``, read straight from the data."""
    store = Store(world_path(settings.data_dir, settings.seed) / "customers.db")
    rows = store.rows("SELECT email FROM customers WHERE erased_on IS NULL AND NOT restricted")
    return [row["email"] for row in rows if Levenshtein.distance(email, row["email"]) <= 2]


async def test_a_near_miss_email_suggests_the_one_close_email(server: MCPServer) -> None:
    result = await call(server, "customer_lookup", {"identifier": "jane.doe@exmaple.com"})
    assert empty_message(result) == (
        "No customer matches jane.doe@exmaple.com. Did you mean jane.doe@example.com? "
        "The query executed successfully and returned no matches."
    )
    assert "CUST-00042" not in result.content[0].text  # type: ignore[union-attr]  # a hint, never the record


@pytest.mark.parametrize(
    ("identifier", "close"),
    [
        ("someone.else@example.com", 0),  # nothing is close
        ("jade.hell@example.com", 2),  # jade.hill@ and jade.bell@ are as close: no guess between them
        ("vip@exampel.com", 0),  # only a restricted customer's email is close: never suggested
        ("erased.user@example.co", 0),  # only an erased customer's email is close: never suggested
    ],
)
async def test_no_suggestion_unless_exactly_one_shown_email_is_close(
    server: MCPServer, settings: SourceSettings, identifier: str, close: int
) -> None:
    assert len(near_emails(settings, identifier)) == close  # the premise, from the data itself
    result = await call(server, "customer_lookup", {"identifier": identifier})
    assert empty_message(result) == f"No customer matches {identifier}. {EMPTY_RESULT_NOTE}"


async def test_a_name_search_matches_every_name_as_sql_like_does(
    server: MCPServer, settings: SourceSettings
) -> None:
    """The names are searched in memory (``customers._NameIndex``): each result is exactly what
    ``' ' || replace(name, '-', ' ') LIKE '% word%'`` finds in the table, whatever the case of ASCII
    letters, for words that start, end or sit inside hyphenated and apostrophed names, and for words
    that start no word."""
    store = Store(world_path(settings.data_dir, settings.seed) / "customers.db")
    names = [row["name"] for row in store.rows("SELECT name FROM customers WHERE erased_on IS NULL")]
    words = {word for name in names for word in re.split(r"[\s.-]+", name) if word}
    queries = sorted({word[:3] for word in words} | {word.upper() for word in list(words)[:30]})
    queries += ["ane", "jane doe", "O'", "Mary-Jane", "Ann Smith", "D"]
    restricted = credential("customers:restricted", source="customers")
    async with Client(server) as client:
        for query in queries:
            words_of_query = [word for word in re.split(r"[\s.-]+", query) if word]
            clauses = " AND ".join(
                ["(' ' || replace(name, '-', ' ')) LIKE ? ESCAPE '\\'"] * len(words_of_query)
            )
            liked = store.rows(
                f"SELECT id FROM customers WHERE erased_on IS NULL AND {clauses} ORDER BY name, id LIMIT 50",  # noqa: S608  (literal clauses)
                ["% " + re.sub(r"[\\%_]", r"\\\g<0>", word) + "%" for word in words_of_query],
            )
            found = await call(client, "find_customers", {"name": query, "limit": 50}, restricted)
            assert found.is_error is False, (query, wire(found))
            assert ids(wire(found)) == [row["id"] for row in liked], query
    store.close()
