"""Real third-party MCP servers: every error the docs' table lists, sent for real and classified.

The table in docs/guides/your-servers.md ("Third-party servers: their errors, classified") is the one
list of cases: each row is a call, the error text it brings back (… where elided), the category and what
decided it. Each row is checked twice: against the classifier alone, from the table's own text (fast, no
server), and against the real server, started once per module as its users start it
(``tests/third_party.py``): the real text must read as the table shows it and classify the same.
"""

from __future__ import annotations

import json
import re
from collections.abc import AsyncIterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import anyio
import pytest
from mcp import Client, StdioServerParameters
from mcp.shared.exceptions import MCPError
from mcp.types import CallToolResult, TextContent

from sources.contract import ErrorCategory, result_text
from subagents.classify import CONTRACT, Classifier, Outcome, TextRule, contract_with_rules
from tests.conftest import PROJECT_ROOT
from tests.third_party import filesystem_server, time_server

GUIDE = PROJECT_ROOT / "docs" / "guides" / "your-servers.md"
SECTION = "## Third-party servers: their errors, classified"
DOCS = "DOCS"  # the table's name for the directory the filesystem server is allowed
BOUND_S = 20.0  # every start and call ends well within this, or the test fails rather than hangs

# The overrides the guide states (its test checks it states these): one per server.
OVERRIDES = {
    "filesystem": (TextRule.of("ENOENT|EISDIR|ENOTDIR", "validation"),),
    "time": (TextRule.of("^Unknown tool", "business"),),
}
WITH_OVERRIDES = contract_with_rules(OVERRIDES)


@dataclass(frozen=True)
class Row:
    """One row of the guide's table."""

    server: str
    tool: str
    arguments: dict[str, Any]
    code: int | None  # the JSON-RPC error's code when the server raised one; None for an isError result
    shown: str  # the error text, … where the table elides
    category: ErrorCategory
    decided_by: str

    @property
    def classifier(self) -> Classifier:
        return WITH_OVERRIDES if self.decided_by == "override" else CONTRACT

    def __str__(self) -> str:
        return f"{self.server}.{self.tool}-{self.decided_by.split(':')[0]}"


def readme_rows() -> list[Row]:
    lines = GUIDE.read_text(encoding="utf-8").splitlines()
    after = lines[lines.index(SECTION) :]
    start = next(number for number, line in enumerate(after) if line.startswith("| server |"))
    table = []
    for line in after[start + 2 :]:  # past the header and its rule
        if not line.startswith("|"):
            break
        table.append([cell.strip().strip("`") for cell in line.strip().strip("|").split("|")])
    return [_row(*cells) for cells in table]


def _row(server: str, call: str, answer: str, shown: str, category: str, decided_by: str) -> Row:
    tool, _, arguments = call.partition(" ")
    code = None if answer == "isError" else int(answer.removeprefix("JSON-RPC "))
    return Row(server, tool, json.loads(arguments), code, shown, ErrorCategory(category), decided_by)


ROWS = readme_rows()


def decided_by(outcome: Outcome) -> str:
    """What the description says decided: the table's last column."""
    assert outcome.error is not None
    description = outcome.error.description
    if "own rule /" in description:
        return "override"
    if (built_in := re.search(r"the built-in rule for (.+?) made it", description)) is not None:
        return f"built-in: {built_in[1]}"
    if "no rule matched, so business (never retried blindly)" in description:
        return "default"
    code = re.search(r"\(JSON-RPC (-?\d+)\)", description)
    assert code is not None, description
    return f"JSON-RPC code {code[1]}"


def check(row: Row, outcome: Outcome, text: str) -> None:
    """The outcome is the row's: its category, what decided it, and the whole text kept."""
    assert outcome.error is not None, f"{row}: {outcome}"
    assert (outcome.error.error_category, decided_by(outcome)) == (row.category, row.decided_by), row
    assert outcome.error.is_retryable is (row.category is ErrorCategory.TRANSIENT)
    assert outcome.error_type == ("unstructured_error" if row.code is None else f"jsonrpc_{row.code}")
    assert text in outcome.error.description


# The table, against the classifier alone.


@pytest.mark.parametrize("row", ROWS, ids=str)
def test_the_readme_table_agrees_with_the_classifier(row: Row) -> None:
    text = " ".join(piece.strip() for piece in row.shown.split("…")).strip()
    if row.code is None:
        result = CallToolResult(content=[TextContent(type="text", text=text)], is_error=True)
        check(row, row.classifier.result(result, source=row.server), text)
    else:
        check(row, row.classifier.exception(MCPError(row.code, text), source=row.server), text)


def test_the_readme_states_the_overrides_the_table_uses() -> None:
    section = GUIDE.read_text(encoding="utf-8").split(SECTION)[1]
    for server, rules in OVERRIDES.items():
        for rule in rules:
            assert f"{server} `{rule.pattern.pattern}` → {rule.category.value}" in section


def test_the_table_covers_both_servers_and_every_kind_of_decision() -> None:
    assert {row.server for row in ROWS} == {"filesystem", "time"}
    kinds = {row.decided_by.split(":")[0] for row in ROWS}
    assert kinds == {"default", "override", "built-in", "JSON-RPC code -32602"}
    assert {row.category for row in ROWS} >= {ErrorCategory.BUSINESS, ErrorCategory.VALIDATION}


# The table, against the real servers.


@pytest.fixture(scope="module")
def anyio_backend() -> str:
    return "asyncio"  # module-wide, so that each server's session can be opened once for the module


@pytest.fixture(scope="module")
def docs(tmp_path_factory: pytest.TempPathFactory) -> Path:
    root = tmp_path_factory.mktemp("docs").resolve()  # the server compares resolved paths
    (root / "a.md").write_text("# A\n", encoding="utf-8")
    (root / "sub").mkdir()
    return root


async def _session(server: StdioServerParameters) -> AsyncIterator[Client]:
    async with Client(server, read_timeout_seconds=BOUND_S) as client:
        yield client


@pytest.fixture(scope="module")
async def filesystem_client(docs: Path) -> AsyncIterator[Client]:
    async for client in _session(filesystem_server(docs)):
        yield client


@pytest.fixture(scope="module")
async def time_client() -> AsyncIterator[Client]:
    async for client in _session(time_server()):
        yield client


async def answer(client: Client, row: Row, docs: Path) -> tuple[str, Outcome]:
    """Make the row's call for real: the text that came back, and the outcome the classifier gives it."""
    arguments = json.loads(json.dumps(row.arguments).replace(DOCS, str(docs)))
    with anyio.fail_after(BOUND_S):
        try:
            result = await client.call_tool(row.tool, arguments, read_timeout_seconds=BOUND_S)
        except MCPError as raised:
            assert raised.error.code == row.code, row
            return raised.error.message, row.classifier.exception(raised, source=row.server)
    assert row.code is None and result.is_error, f"{row}: {result}"
    return result_text(result).strip(), row.classifier.result(result, source=row.server)


def reads_as(shown: str, text: str) -> bool:
    """``text`` is what the table shows, each … standing for anything."""
    return (
        re.fullmatch(".*".join(re.escape(piece.strip()) for piece in shown.split("…")), text, re.S)
        is not None
    )


@pytest.mark.subprocess
@pytest.mark.anyio
@pytest.mark.parametrize("row", [row for row in ROWS if row.server == "filesystem"], ids=str)
async def test_the_filesystem_server_sends_what_the_table_says(
    filesystem_client: Client, docs: Path, row: Row
) -> None:
    text, outcome = await answer(filesystem_client, row, docs)
    assert reads_as(row.shown.replace(DOCS, str(docs)), text), text
    check(row, outcome, text)


@pytest.mark.subprocess
@pytest.mark.anyio
@pytest.mark.parametrize("row", [row for row in ROWS if row.server == "time"], ids=str)
async def test_the_time_server_sends_what_the_table_says(time_client: Client, docs: Path, row: Row) -> None:
    text, outcome = await answer(time_client, row, docs)
    assert reads_as(row.shown, text), text
    check(row, outcome, text)


def kept_as_one_record(result: CallToolResult, says: str) -> None:
    """A third-party success, outside the contract, is kept whole as one record, rules or none."""
    outcome = WITH_OVERRIDES.result(result)
    assert outcome.kind == "ok" and outcome.error is None
    assert says in json.dumps(outcome.result.results)  # type: ignore[union-attr]


@pytest.mark.subprocess
@pytest.mark.anyio
async def test_a_filesystem_success_is_kept_as_one_record(filesystem_client: Client, docs: Path) -> None:
    with anyio.fail_after(BOUND_S):
        read = await filesystem_client.call_tool("read_text_file", {"path": str(docs / "a.md")})
    kept_as_one_record(read, "# A")


@pytest.mark.subprocess
@pytest.mark.anyio
async def test_a_time_success_is_kept_as_one_record(time_client: Client) -> None:
    with anyio.fail_after(BOUND_S):
        now = await time_client.call_tool("get_current_time", {"timezone": "UTC"})
    kept_as_one_record(now, '"timezone": "UTC"')
