"""Bad input gets a validation error that names the field, the expected form and an example.

``ArgumentGuard`` is server middleware: it checks every ``tools/call`` against the input schema the
tool publishes, before the SDK's own argument parsing runs, so a malformed call never reaches a tool
body and never comes back as pydantic's raw text. The schema is the one the client sees, so what is
enforced and what is advertised cannot drift apart.

``invalid_argument`` builds the error, here and in tool bodies that find a deeper problem.
"""

from __future__ import annotations

import functools
import json
import math
import re
from collections.abc import Callable, Mapping
from typing import Any

from jsonschema import Draft202012Validator
from jsonschema.exceptions import ValidationError as SchemaError
from mcp.server import MCPServer
from mcp.server.context import CallNext, HandlerResult, ServerRequestContext

from sources.contract import AttemptedQuery, ErrorCategory, ToolError
from sources.tool_failure import to_call_tool_result

__all__ = ["MISSING", "ArgumentGuard", "echo_arguments", "invalid_argument"]

# How many argument sets' verdicts the guard remembers, and the longest (as JSON) it remembers at all.
_REMEMBERED_CHECKS = 1024
_REMEMBERED_CHARACTERS = 2048
_ECHO_LIMIT = 200  # characters of a received string echoed back in attempted_query and messages

_JSON_TYPE_NAMES = {
    "string": "a string",
    "integer": "an integer",
    "number": "a number",
    "boolean": "true or false",
    "object": "an object",
    "array": "a list",
    "null": "null",
}


def _json_type_of(value: Any) -> str:
    match value:
        case None:
            return "null"
        case bool():
            return "a boolean"
        case int():
            return "an integer"
        case float():
            return "a number"
        case str():
            return "a string"
        case list():
            return "a list"
        case dict():
            return "an object"
    return type(value).__name__


def _echo(value: Any) -> Any:
    """A received value made safe to send back: valid UTF-8, long strings cut with their length said."""
    if isinstance(value, str):
        safe = value.encode("utf-8", "backslashreplace").decode("utf-8")
        if len(safe) > _ECHO_LIMIT:
            return f"{safe[:_ECHO_LIMIT]}… ({len(value)} characters in all)"
        return safe
    if isinstance(value, dict):
        return {str(_echo(key)): _echo(item) for key, item in value.items()}
    if isinstance(value, list):
        return [_echo(item) for item in value]
    if _not_finite(value):
        return str(value)  # "nan", "inf": JSON has no such numbers
    return value


def echo_arguments(arguments: Mapping[str, Any]) -> dict[str, Any]:
    """The arguments as received, made safe to echo in ``attempted_query``."""
    return {str(_echo(key)): _echo(value) for key, value in arguments.items()}


def _describe_received(value: Any) -> str:
    echoed = json.dumps(_echo(value), ensure_ascii=False)
    if isinstance(value, str):
        return f"{echoed} ({len(value)} characters)" if len(value) > _ECHO_LIMIT else echoed
    if value is None:
        return "null"
    return f"{_json_type_of(value)} {echoed}"


MISSING: Any = object()  # "no value was received" (None is a value: JSON null)


def invalid_argument(
    field: str,
    problem: str,
    expected: str,
    example: Any,
    *,
    received: Any = MISSING,
    attempted_query: AttemptedQuery | None = None,
) -> ToolError:
    """A validation error in the one form every source uses.

    ``problem`` completes "Argument 'field' ...", ``expected`` says the form ("Expected: ..."), and
    ``example`` is a value that would have been accepted. ``received`` is left out for a missing field.
    """
    sentence = f"Argument '{field}' {problem}."
    if expected:
        sentence += f" {expected}"
    sentence += f" Example: {json.dumps(example, ensure_ascii=False)}."
    if received is not MISSING:
        sentence += f" Received: {_describe_received(received)}."
    sentence += " Correct the argument and call again."
    return ToolError.of(ErrorCategory.VALIDATION, sentence, attempted_query=attempted_query)


def _schema_problem(
    tool: str, arguments: Mapping[str, Any], schema: Mapping[str, Any], field: str, problem: str
) -> ToolError:
    prop = schema.get("properties", {}).get(field, {})
    return invalid_argument(
        field,
        problem,
        prop.get("description", ""),
        prop.get("examples", [""])[0],
        received=arguments.get(field, MISSING),
        attempted_query=AttemptedQuery(tool=tool, arguments=echo_arguments(arguments)),
    )


_SURROGATE = re.compile(r"[\ud800-\udfff]")  # the code points UTF-8 cannot encode


def _unencodable(value: Any) -> bool:
    """Text that is not valid UTF-8 (an unpaired surrogate escape)."""
    return isinstance(value, str) and _SURROGATE.search(value) is not None


def _not_finite(value: Any) -> bool:
    """NaN or an infinity: JSON has no such numbers, and every bound compares false against NaN."""
    return isinstance(value, float) and not math.isfinite(value)


def _first_argument(arguments: Mapping[str, Any], bad: Callable[[Any], bool]) -> str | None:
    """The first argument holding a value (or key), at any depth, that ``bad`` refuses."""

    def holds(value: Any) -> bool:
        if isinstance(value, dict):
            return any(holds(key) or holds(item) for key, item in value.items())
        if isinstance(value, list):
            return any(holds(item) for item in value)
        return bad(value)

    return next((name for name, value in arguments.items() if bad(name) or holds(value)), None)


def _problem(error: SchemaError, property_schema: Mapping[str, Any]) -> str:
    """Complete the sentence "Argument 'x' ..." for one schema violation."""
    if error.validator == "anyOf" and error.context:
        # An optional argument is anyOf [its form, null]: explain the mismatch with its form, not with null.
        branches = [e for e in error.context if not (e.validator == "type" and e.validator_value == "null")]
        if branches:
            error = branches[0]
    match error.validator:
        case "type":
            expected = property_schema.get("type", error.validator_value)
            names = " or ".join(
                _JSON_TYPE_NAMES.get(t, t) for t in ([expected] if isinstance(expected, str) else expected)
            )
            return f"must be {names}, not {_json_type_of(error.instance)}"
        case "pattern":
            return (
                "is not in the expected form" if str(error.instance).strip() else "must not be empty or blank"
            )
        case "minLength":
            return "must not be empty"
        case "maxLength":
            return f"is too long: at most {error.validator_value} characters are accepted"
        case "enum":
            choices = ", ".join(json.dumps(choice) for choice in error.validator_value)
            return f"must be one of {choices}"
        case "minimum" | "exclusiveMinimum":
            return f"must be {'at least' if error.validator == 'minimum' else 'greater than'} {error.validator_value}"
        case "maximum" | "exclusiveMaximum":
            return f"must be {'at most' if error.validator == 'maximum' else 'less than'} {error.validator_value}"
    return f"is not valid: {error.message}"


def check_arguments(tool: str, arguments: Any, validator: Draft202012Validator) -> ToolError | None:
    """The first problem with these arguments against the tool's input schema, or None."""
    schema: Mapping[str, Any] = validator.schema
    if not isinstance(arguments, dict):
        return ToolError.of(
            ErrorCategory.VALIDATION,
            f"The arguments of '{tool}' must be a JSON object of named arguments, not {_json_type_of(arguments)}.",
            attempted_query=AttemptedQuery(tool=tool, arguments={}),
        )
    properties: Mapping[str, Any] = schema.get("properties", {})
    unknown = [name for name in arguments if name not in properties]
    if unknown:
        accepted = ", ".join(properties) or "no arguments"
        return ToolError.of(
            ErrorCategory.VALIDATION,
            f"Unknown argument '{_echo(unknown[0])}': '{tool}' accepts {accepted}. Correct the argument and call again.",
            attempted_query=AttemptedQuery(tool=tool, arguments=echo_arguments(arguments)),
        )
    for name in schema.get("required", []):
        if name not in arguments:
            return _schema_problem(tool, arguments, schema, name, "is required")
    if (name := _first_argument(arguments, _unencodable)) is not None:
        return _schema_problem(
            tool, arguments, schema, name, "is not valid UTF-8 text (it holds an unpaired surrogate escape)"
        )
    if (name := _first_argument(arguments, _not_finite)) is not None:
        return _schema_problem(
            tool, arguments, schema, name, "must be a finite number, not NaN or an infinity"
        )
    order = list(properties)
    errors = sorted(
        validator.iter_errors(arguments),
        key=lambda e: order.index(e.path[0]) if e.path and e.path[0] in properties else len(order),
    )
    if not errors:
        return None
    error = errors[0]
    name = str(error.path[0]) if error.path else next(iter(properties), "arguments")
    return _schema_problem(tool, arguments, schema, name, _problem(error, properties.get(name, {})))


class ArgumentGuard:
    """Server middleware: every ``tools/call`` is checked against the tool's published input schema.

    A check is a pure function of the tool and its arguments' JSON, and walking a schema with
    ``jsonschema`` is the most a valid call spends here (25 to 60 us of a 1.3 ms call): so the verdict
    on arguments seen before is remembered, for a bounded number of short argument sets (a long one is
    checked afresh, not kept). A subagent repeats a call's arguments on a retry, and a batch asks
    about the same customers and orders again and again.
    """

    def __init__(self, server: MCPServer) -> None:
        self._server = server
        self._validators: dict[str, Draft202012Validator] = {}  # by tool, loaded at the first call
        self._remembered = functools.lru_cache(maxsize=_REMEMBERED_CHECKS)(self._check)

    async def _input_validators(self) -> dict[str, Draft202012Validator]:
        if not self._validators:
            self._validators = {
                tool.name: Draft202012Validator(tool.input_schema) for tool in await self._server.list_tools()
            }
        return self._validators

    def _check(self, tool: str, arguments_json: str) -> ToolError | None:
        return check_arguments(tool, json.loads(arguments_json), self._validators[tool])

    def _problem(self, tool: str, arguments: Any) -> ToolError | None:
        text = json.dumps(arguments)  # the order the caller gave: a message names the first unknown name
        if len(text) > _REMEMBERED_CHARACTERS:
            return check_arguments(tool, arguments, self._validators[tool])
        return self._remembered(tool, text)

    async def __call__(self, ctx: ServerRequestContext[Any, Any], call_next: CallNext) -> HandlerResult:
        if ctx.method != "tools/call" or ctx.params is None:
            return await call_next(ctx)
        validators = await self._input_validators()
        tool = ctx.params.get("name")
        if not isinstance(tool, str) or tool not in validators:
            offered = ", ".join(sorted(validators))
            return to_call_tool_result(
                ToolError.of(
                    ErrorCategory.VALIDATION,
                    f"Unknown tool {json.dumps(_echo(tool))}: this source offers {offered}.",
                    attempted_query=AttemptedQuery(tool=str(_echo(tool)), arguments={}),
                )
            )
        problem = self._problem(tool, ctx.params.get("arguments") or {})
        if problem is not None:
            return to_call_tool_result(problem)
        return await call_next(ctx)
