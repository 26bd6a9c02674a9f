"""The SDK runs every tool of the five sources as a contract tool (``sources.registered``)."""

from __future__ import annotations

import pytest
from mcp.types import CallToolResult, TextContent

from sources.contract import ResultPage
from sources.registered import ContractToolMetadata
from sources.settings import SourceSettings
from sources.tool_failure import to_call_tool_result
from tests.conftest import MODULES


@pytest.mark.parametrize("source", sorted(MODULES))
def test_every_tool_of_a_source_runs_as_a_contract_tool(settings: SourceSettings, source: str) -> None:
    server = MODULES[source].create_server(settings)
    tools = server._tool_manager.list_tools()
    assert tools
    for tool in tools:
        assert isinstance(tool.fn_metadata, ContractToolMetadata), tool.name


def test_a_contract_tools_result_is_passed_on_as_the_contract_made_it(settings: SourceSettings) -> None:
    """Its structured content was validated as the contract model it was made from: the SDK does not
    validate it a second time (a client that checks results, as the mcp ``Client`` does, still does)."""
    server = MODULES["customers"].create_server(settings)
    (lookup,) = [tool for tool in server._tool_manager.list_tools() if tool.name == "customer_lookup"]
    made = to_call_tool_result(ResultPage(result_count=0, results=[]))
    assert lookup.fn_metadata.convert_result(made) is made
    # Not checked again here, whatever it holds: the output schema would refuse this one.
    unchecked = CallToolResult(content=[TextContent(type="text", text="{}")], structured_content={"x": 1})
    assert lookup.fn_metadata.convert_result(unchecked) is unchecked
    # What is not a CallToolResult still goes through the SDK's conversion.
    converted = lookup.fn_metadata.convert_result({"resultCount": 0, "results": []})
    assert isinstance(converted, CallToolResult) and converted.structured_content is not None
    assert converted.structured_content["resultCount"] == 0
