"""How the SDK runs a contract tool (``sources.toolkit.Source.tool``): it takes the arguments as the
argument guard checked them, and the result as the contract made it.

The SDK's server keeps, for each registered function, metadata (``FuncMetadata``) that parses the
arguments before the call and converts the result after it. Two of its steps only repeat, for a
contract tool, what has been done already, and the first of them harms:

* Arguments. The SDK reads a string given for any argument not typed plain ``str`` (``str | None``,
  an enum) as JSON first, for clients that send a list or an object as a JSON string. Behind the
  guard (``sources.arguments.ArgumentGuard``) every argument has matched the published schema, so a
  string is a string; pre-parsed, ``"null"`` became no value and ``'["damaged"]'`` a list, refused
  in pydantic's raw words. Types are still coerced by the SDK's argument model, as before.
* Results. The SDK validates a returned ``CallToolResult``'s structured content against the tool's
  output schema. A contract tool's result is made in one place (``to_call_tool_result``) from a
  contract model, validated when it was built, whose schema is that output schema
  (``ResultPage[record]``, the empty result included). The second check cost 15 to 25 us of a call
  of about a millisecond, timed in a serving source beside the bare SDK tool (CONTRIBUTING, issue
  46); a client that validates results, as the mcp SDK's ``Client`` does, still checks each one on
  arrival.

Nothing else changes: the input and output schemas a client lists are the SDK's, built as before.
"""

from __future__ import annotations

from typing import Any

from mcp.server import MCPServer
from mcp.server.mcpserver.utilities.func_metadata import FuncMetadata
from mcp.types import CallToolResult, InputRequiredResult

__all__ = ["ContractToolMetadata", "run_as_contract_tool"]


class ContractToolMetadata(FuncMetadata):
    """The SDK's metadata of a contract tool, less its JSON pre-parsing of arguments and its second
    validation of results (see the module's docstring)."""

    def pre_parse_json(self, data: dict[str, Any]) -> dict[str, Any]:
        return data

    def convert_result(self, result: Any) -> CallToolResult | InputRequiredResult:
        if isinstance(result, CallToolResult):  # what ``to_call_tool_result`` made: passed on as it is
            return result
        return super().convert_result(result)


def run_as_contract_tool(server: MCPServer, tool: str) -> None:
    """Have the SDK run the registered ``tool`` with ``ContractToolMetadata``."""
    registered = server._tool_manager.get_tool(tool)  # the SDK gives no public handle on a registered tool
    if registered is None:
        raise LookupError(f"no tool {tool!r} is registered on {server.name}")
    metadata = registered.fn_metadata  # every field carried over, whatever the SDK's version holds
    registered.fn_metadata = ContractToolMetadata(
        **{name: getattr(metadata, name) for name in type(metadata).model_fields}
    )
