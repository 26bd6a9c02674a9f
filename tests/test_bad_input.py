"""Bad input gets a validation error naming the field, the expected form and an example, and nothing breaks.

Every string argument of every tool, found from the tool's published input schema, is tried with
empty, blank, 10,000-character, SQL-metacharacter and invalid-UTF-8 values and with wrong types;
every required argument is left out. A property-based test then throws arbitrary arguments at every
tool over a JSON-RPC connection and checks that each answer is inside the contract.
"""

from __future__ import annotations

import json
import re
from collections.abc import Iterator
from typing import Any

import anyio
import pytest
from anyio.from_thread import BlockingPortal, start_blocking_portal
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from mcp import Client
from mcp.types import CallToolResult, Tool

from sources import arguments, orders
from sources.catalogue import TOOLS
from sources.contract import EmptyResult, ResultPage, ToolError, parse_tool_result
from sources.settings import SourceSettings
from tests.conftest import MODULES, wire
from tests.outcomes import VALID_CALLS

SQL = "' OR 1=1 --"
BAD_STRINGS = {
    "empty": "",
    "blank": "   \t ",
    "huge": "x" * 10_000,
    "sql": SQL,
    "surrogate": "abc\udc80def",
}
WRONG_TYPES = {"integer": 12345, "list": ["CUST-00042"], "object": {"value": "x"}, "boolean": True}
LEAKS = re.compile(
    r"Traceback|sqlite|OperationalError|syntax error|Error executing tool|pydantic", re.IGNORECASE
)


@pytest.fixture(scope="module")
def portal() -> Iterator[BlockingPortal]:
    with start_blocking_portal("asyncio") as running:
        yield running


@pytest.fixture(scope="module")
def clients(
    portal: BlockingPortal, settings: SourceSettings
) -> Iterator[dict[str, tuple[Client, list[Tool]]]]:
    """One JSON-RPC connection per source (the SDK's stream loop, in memory), kept for the module."""
    opened: dict[str, tuple[Client, list[Tool]]] = {}
    managers = []
    for source, module in MODULES.items():
        manager = portal.wrap_async_context_manager(
            Client(module.create_server(settings), mode="legacy", read_timeout_seconds=10)
        )
        client = manager.__enter__()
        managers.append(manager)
        opened[source] = (client, portal.call(_list_tools, client))
    yield opened
    for manager in reversed(managers):
        manager.__exit__(None, None, None)


async def _list_tools(client: Client) -> list[Tool]:
    with anyio.fail_after(10):
        return (await client.list_tools()).tools


async def _call(client: Client, tool: str, arguments: dict[str, Any]) -> CallToolResult:
    with anyio.fail_after(10):
        return await client.call_tool(tool, arguments, read_timeout_seconds=10)


def _string_fields(tool: Tool) -> list[str]:
    def is_string(schema: dict[str, Any]) -> bool:
        if schema.get("type") == "string" or "$ref" in schema:  # enums are $refs to string enums here
            return True
        return any(branch.get("type") == "string" for branch in schema.get("anyOf", []))

    return [name for name, schema in tool.input_schema["properties"].items() if is_string(schema)]


def _free_text(tool: Tool, field: str) -> bool:
    return "free text" in tool.input_schema["properties"][field].get("description", "")


def _all_tools() -> list[tuple[str, str]]:
    return sorted((source, tool) for source, tools in TOOLS.items() for tool in tools)


def _tool(clients: dict[str, tuple[Client, list[Tool]]], source: str, name: str) -> tuple[Client, Tool]:
    client, tools = clients[source]
    return client, next(tool for tool in tools if tool.name == name)


def _assert_validation(result: CallToolResult, tool: str, field: str, sent: dict[str, Any]) -> dict[str, Any]:
    payload = wire(result)
    assert result.is_error is True, payload
    assert payload["errorCategory"] == "validation" and payload["isRetryable"] is False
    description = payload["description"]
    assert f"Argument '{field}'" in description, description
    assert "Expected:" in description and "Example:" in description, description
    assert not LEAKS.search(description), description
    assert payload["attempted_query"]["tool"] == tool
    assert set(payload["attempted_query"]["arguments"]) == set(sent)
    assert "results" not in payload
    return payload


def test_the_tool_table_covers_every_published_tool(clients: dict[str, tuple[Client, list[Tool]]]) -> None:
    published = {(source, tool.name) for source, (_, tools) in clients.items() for tool in tools}
    assert published == set(_all_tools())
    for source, name in published:
        assert _string_fields(_tool(clients, source, name)[1]), f"{name} has no string argument to test"


@pytest.mark.parametrize(("source", "name"), _all_tools())
@pytest.mark.parametrize("kind", sorted(BAD_STRINGS))
def test_bad_strings(
    portal: BlockingPortal, clients: dict[str, tuple[Client, list[Tool]]], source: str, name: str, kind: str
) -> None:
    client, tool = _tool(clients, source, name)
    for field in _string_fields(tool):
        sent = {**VALID_CALLS[name], field: BAD_STRINGS[kind]}
        result = portal.call(_call, client, name, sent)
        if kind == "sql" and _free_text(tool, field):
            # Apostrophes and dashes are ordinary text in a search: searched as words, never run as syntax.
            payload = wire(result)
            assert not LEAKS.search(json.dumps(payload)), payload
            assert result.is_error is False or payload["errorCategory"] != "validation", payload
            continue
        payload = _assert_validation(result, name, field, sent)
        echoed = payload["attempted_query"]["arguments"][field]
        if kind == "huge":
            assert len(echoed) < 300 and "10000 characters" in echoed
        elif kind == "surrogate":
            assert echoed == "abc\\udc80def"
        else:
            assert echoed == BAD_STRINGS[kind]


@pytest.mark.parametrize(("source", "name"), _all_tools())
@pytest.mark.parametrize("kind", sorted(WRONG_TYPES))
def test_wrong_types(
    portal: BlockingPortal, clients: dict[str, tuple[Client, list[Tool]]], source: str, name: str, kind: str
) -> None:
    client, tool = _tool(clients, source, name)
    for field in tool.input_schema["properties"]:
        sent = {**VALID_CALLS[name], field: WRONG_TYPES[kind]}
        if kind == "integer" and tool.input_schema["properties"][field].get("type") in ("integer", "number"):
            continue  # a number is the right type there
        payload = _assert_validation(portal.call(_call, client, name, sent), name, field, sent)
        assert "must be" in payload["description"]


@pytest.mark.parametrize(("source", "name"), _all_tools())
def test_missing_required_fields(
    portal: BlockingPortal, clients: dict[str, tuple[Client, list[Tool]]], source: str, name: str
) -> None:
    client, tool = _tool(clients, source, name)
    for field in tool.input_schema.get("required", []):
        sent = {key: value for key, value in VALID_CALLS[name].items() if key != field}
        payload = _assert_validation(portal.call(_call, client, name, sent), name, field, sent)
        assert "is required" in payload["description"]


def test_unknown_arguments_are_named_not_dropped(
    portal: BlockingPortal, clients: dict[str, tuple[Client, list[Tool]]]
) -> None:
    client, _ = _tool(clients, "orders", "search_orders")
    result = portal.call(_call, client, "search_orders", {"customerId": "CUST-00042"})
    payload = wire(result)
    assert payload["errorCategory"] == "validation"
    assert (
        "Unknown argument 'customerId'" in payload["description"] and "customer_id" in payload["description"]
    )


def _any_json() -> st.SearchStrategy[Any]:
    scalars = st.one_of(
        st.none(),
        st.booleans(),
        st.integers(),
        st.floats(allow_nan=False, allow_infinity=False),
        st.text(max_size=60),
    )
    return st.recursive(
        scalars,
        lambda inner: st.lists(inner, max_size=3) | st.dictionaries(st.text(max_size=5), inner, max_size=3),
        max_leaves=5,
    )


def _plausible(field: str, example: Any) -> st.SearchStrategy[Any]:
    """Values near the valid form: the example itself, edited, cased, padded, or cut."""
    if not isinstance(example, str):
        return st.just(example)
    return st.one_of(
        st.just(example),
        st.sampled_from([example.lower(), example.upper(), f" {example} ", example[:-1], example + "0", SQL]),
        st.text(alphabet=st.characters(codec="utf-8"), max_size=40).map(lambda tail: example[:4] + tail),
    )


@st.composite
def arguments_for(draw: st.DrawFn, tool: Tool) -> dict[str, Any]:
    properties: dict[str, Any] = tool.input_schema["properties"]
    chosen: dict[str, Any] = {}
    for field, schema in properties.items():
        if not draw(st.booleans()) and field not in tool.input_schema.get("required", []):
            continue
        example = (schema.get("examples") or [None])[0]
        chosen[field] = draw(st.one_of(_plausible(field, example), _any_json()))
    if draw(st.integers(0, 9)) == 0:
        chosen[draw(st.text(min_size=1, max_size=8))] = draw(_any_json())
    return chosen


@pytest.mark.parametrize(("source", "name"), _all_tools())
@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(data=st.data())
def test_any_arguments_get_an_answer_inside_the_contract(
    portal: BlockingPortal,
    clients: dict[str, tuple[Client, list[Tool]]],
    source: str,
    name: str,
    data: st.DataObject,
) -> None:
    client, tool = _tool(clients, source, name)
    sent = data.draw(arguments_for(tool))
    result = portal.call(_call, client, name, sent)
    parsed = parse_tool_result(result)  # raises when the answer is outside the contract
    text = result.content[0].text  # type: ignore[union-attr]
    assert not LEAKS.search(text), text
    if isinstance(parsed, ToolError):
        assert parsed.attempted_query is not None and parsed.attempted_query.tool == name
        assert parsed.error_category.value in ("validation", "permission", "business", "transient")
        if parsed.error_category.value == "validation":
            assert "Argument '" in parsed.description or "Unknown argument" in parsed.description
        return
    assert isinstance(parsed, ResultPage | EmptyResult)
    records = parsed.results
    # Nothing it should not return: lookups stay within the customer or order that was asked for.
    if name == "customer_lookup":
        assert len(records) <= 1
        if records:
            assert sent["identifier"] in (records[0]["id"], records[0]["email"])
    for field in ("customer_id", "order_id"):
        if sent.get(field) is not None and name != "customer_lookup":  # null asks for no customer or order
            assert all(record.get(field, record.get("id")) == sent[field] for record in records), records


@pytest.mark.anyio
async def test_arguments_seen_before_keep_their_verdict_without_a_second_check(
    monkeypatch: pytest.MonkeyPatch, settings: SourceSettings
) -> None:
    """The argument guard walks the schema once for arguments it has seen (per source process); a
    refusal stays a refusal, and a long argument set is checked every time, never remembered."""
    checked: list[Any] = []

    def counted(tool: str, given: Any, validator: Any) -> ToolError | None:
        checked.append(given)
        return real(tool, given, validator)

    real = arguments.check_arguments
    monkeypatch.setattr(arguments, "check_arguments", counted)
    good, other, bad = {"customer_id": "CUST-00042"}, {"customer_id": "CUST-00077"}, {"customer_id": "42"}
    long = {"customer_id": "CUST-00042", "sku": "x" * 3000}
    async with Client(orders.create_server(settings)) as client:
        for given in (good, good, other, bad, bad, long, long):
            with anyio.fail_after(10):
                result = await client.call_tool("search_orders", given)
            assert result.is_error is (given in (bad, long)), (given, result)
            if given is bad:
                assert wire(result)["errorCategory"] == "validation"
    assert checked == [good, other, bad, long, long]
