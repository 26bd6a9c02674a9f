"""The catalogue cannot drift from the sources: the input schemas recorded in sources/tools.json and
the annotations in sources/annotations.json are exactly what every server answers to tools/list, and
reading them stays light."""

from __future__ import annotations

import json
import subprocess
import sys
from typing import Any

import anyio
import pytest

from sources.catalogue import (
    SOURCES,
    TOOLS,
    input_schemas,
    live_input_schemas,
    live_record_fields,
    live_tool_annotations,
    record_fields,
    tool_annotations,
)
from sources.settings import SourceSettings
from tests.conftest import PROJECT_ROOT

REGENERATE = (
    "run `python -m sources.catalogue --write` and commit sources/tools.json, sources/records.json "
    "and sources/annotations.json"
)


def _differing(live: dict[str, dict[str, Any]], recorded: dict[str, dict[str, Any]]) -> list[str]:
    """Each SOURCE.TOOL whose recorded entry is not what its server answers (or is on one side only)."""
    return sorted(
        f"{source}.{tool}"
        for source in live.keys() | recorded.keys()
        for tool in live.get(source, {}).keys() | recorded.get(source, {}).keys()
        if live.get(source, {}).get(tool) != recorded.get(source, {}).get(tool)
    )


@pytest.mark.anyio
async def test_recorded_input_schemas_are_what_the_servers_answer(settings: SourceSettings) -> None:
    with anyio.fail_after(30):
        live = await live_input_schemas(settings)
    stale = _differing(live, input_schemas())
    assert not stale, f"sources/tools.json differs from tools/list for {', '.join(stale)}: {REGENERATE}"


@pytest.mark.anyio
async def test_recorded_annotations_are_what_the_servers_answer(settings: SourceSettings) -> None:
    with anyio.fail_after(30):
        live = await live_tool_annotations(settings)
    stale = _differing(live, tool_annotations())
    assert not stale, f"sources/annotations.json differs from tools/list for {', '.join(stale)}: {REGENERATE}"


def test_the_annotations_say_what_each_tool_does() -> None:
    """issue_refund moves money (destructive, idempotent by its key); every other tool only reads;
    none reaches outside the shop's own data; each has a title."""
    recorded = tool_annotations()
    assert {source: frozenset(tools) for source, tools in recorded.items()} == TOOLS, REGENERATE
    for source, tools in recorded.items():
        for tool, hints in tools.items():
            writes = (source, tool) == ("billing", "issue_refund")
            assert hints["readOnlyHint"] is not writes and hints["destructiveHint"] is writes, (source, tool)
            assert hints["idempotentHint"] is True and hints["openWorldHint"] is False, (source, tool)
            assert hints["title"].strip(), (source, tool)


def test_the_error_pages_annotations_table_is_the_recorded_one() -> None:
    """docs/reference/errors.md shows each tool's annotations in a table: the recorded ones, every tool."""
    page = (PROJECT_ROOT / "docs" / "reference" / "errors.md").read_text(encoding="utf-8")
    hints = ("readOnlyHint", "destructiveHint", "idempotentHint", "openWorldHint")
    shown: dict[str, dict[str, dict[str, object]]] = {}
    for line in page.splitlines():
        cells = [cell.strip().strip("`*") for cell in line.strip().strip("|").split("|")]
        if len(cells) == 7 and cells[0] in SOURCES:
            source, tool, title, *flags = cells
            shown.setdefault(source, {})[tool] = {
                "title": title,
                **dict(zip(hints, map(json.loads, flags), strict=True)),
            }
    assert shown == tool_annotations(), (
        "docs/reference/errors.md's annotations table differs from the catalogue"
    )


@pytest.mark.anyio
async def test_recorded_record_fields_are_what_the_servers_publish(settings: SourceSettings) -> None:
    with anyio.fail_after(30):
        live = await live_record_fields(settings)
    assert live == record_fields(), f"sources/records.json differs from the output schemas: {REGENERATE}"
    assert {"tracking", "courier", "phone"}.isdisjoint(
        word
        for tools in live.values()
        for fields in tools.values()
        for name in fields
        for word in name.split("_")
    )
    assert "cancelled" in live["orders"]["get_order"]["status"]["values"]  # the values a field takes


def test_the_recorded_tools_are_the_catalogue() -> None:
    recorded = input_schemas()
    assert list(recorded) == sorted(SOURCES), REGENERATE
    assert {source: frozenset(tools) for source, tools in recorded.items()} == TOOLS, REGENERATE


def test_each_reader_gets_its_own_copy() -> None:
    input_schemas()["customers"]["customer_lookup"]["properties"].clear()
    assert input_schemas()["customers"]["customer_lookup"]["properties"]


def test_reading_the_catalogue_imports_no_sdk_and_no_source() -> None:
    probe = (
        "import sys; from sources.catalogue import input_schemas, tool_annotations; "
        "input_schemas(); tool_annotations(); "
        "print(sorted(m for m in sys.modules if m.split('.')[0] in ('mcp', 'pydantic', 'faker') "
        "or m.startswith('sources.') and m not in ('sources.catalogue', 'sources.deferred')))"
    )
    result = subprocess.run(
        [sys.executable, "-c", probe],
        cwd=PROJECT_ROOT,
        capture_output=True,
        text=True,
        timeout=30,
        check=True,
    )
    assert result.stdout.strip() == "[]"


def test_every_demo_tool_has_one_card_and_every_card_names_what_its_tool_takes() -> None:
    """The planner's and the brief's facts about a tool are one card each, held to the published schemas."""
    import string

    from coordinator.planning.tools import ASKED_ONLY, CARDS, tool_arguments

    published = {f"{source}.{tool}" for source, tools in TOOLS.items() for tool in tools}
    assert published == set(tool_arguments())
    assert set(CARDS) == published - ASKED_ONLY and published >= ASKED_ONLY
    for key, card in CARDS.items():
        assert card.key == key
        named = {name for _, name, _, _ in string.Formatter().parse(card.why) if name}
        assert named <= set(card.arguments) | {"topic"}, (key, named)
        assert set(card.why_looked_up) <= set(card.arguments), key
        assert not card.gives or card.looks_up, key  # only a lookup's record is handed on


def test_every_data_file_of_the_sources_is_shipped_in_the_wheel() -> None:
    """The catalogue's files are read at run time: one left out of the package data makes an
    installed `research` fail at its first question (`pip install .` outside the checkout)."""
    import tomllib

    from tests.conftest import PROJECT_ROOT

    # The package data is given by kind, for every package (tests/test_wheel.py builds the wheel and
    # looks in it): each data file of the four packages must be of a kind it names.
    shipped = tomllib.loads((PROJECT_ROOT / "pyproject.toml").read_text(encoding="utf-8"))["tool"][
        "setuptools"
    ]["package-data"]["*"]
    data_files = [
        path
        for package in ("coordinator", "sources", "subagents", "traces")
        for path in (PROJECT_ROOT / package).rglob("*")
        if path.is_file() and path.suffix not in (".py", ".pyc")
    ]
    assert {"tools.json", "records.json", "annotations.json"} <= {path.name for path in data_files}
    assert [path for path in data_files if not any(path.match(kind) for kind in shipped)] == []
