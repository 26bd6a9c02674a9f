"""What the five sources offer and where a fleet of them listens: the facts a planner and a fleet share.

``TOOLS`` names each source's tools, and ``input_schemas()`` gives each tool's input schema exactly
as its server answers ``tools/list``, read from ``tools.json`` next to this module: a planner can
check arguments against them without starting a source. ``tool_annotations()`` gives what each tool
says it does (read-only or destructive, idempotent, open-world; its title), read from
``annotations.json``. Tests check both files, and ``records.json``, against what each server answers,
so they cannot drift. After changing a tool, its arguments or its annotations, regenerate them with

    python -m sources.catalogue --write

This module stays light to import: reading the catalogue never imports the mcp SDK or a source; only
the generator does.
"""

from __future__ import annotations

import argparse
import functools
import importlib
import json
import sys
import tempfile
from collections.abc import Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

from sources.deferred import deferred

# Loaded by the generator alone (see above).
if TYPE_CHECKING:
    import anyio
    import mcp

    from sources import settings as source_settings
    from sources.settings import SourceSettings
else:
    anyio = deferred("anyio")
    mcp = deferred("mcp")
    source_settings = deferred("sources.settings")

__all__ = [
    "ANNOTATIONS_FILE",
    "DEFAULT_PORTS",
    "INPUT_SCHEMAS_FILE",
    "RECORD_FIELDS_FILE",
    "SOURCES",
    "TOOLS",
    "input_schemas",
    "live_input_schemas",
    "live_record_fields",
    "live_tool_annotations",
    "record_fields",
    "tool_annotations",
]

SOURCES = ("customers", "orders", "billing", "tickets", "kb")

TOOLS: dict[str, frozenset[str]] = {
    "customers": frozenset({"customer_lookup", "find_customers"}),
    "orders": frozenset({"search_orders", "get_order"}),
    "billing": frozenset({"list_invoices", "refund_eligibility", "issue_refund"}),
    "tickets": frozenset({"search_tickets"}),
    "kb": frozenset({"search_policies", "related_policies"}),
}

# Where `research sources up` starts each source over HTTP unless `--port` moves it. No one dials
# these: `--transport http` and the coordinator service find each source in the fleet's state.
DEFAULT_PORTS = {"customers": 8101, "orders": 8102, "billing": 8103, "tickets": 8104, "kb": 8105}

INPUT_SCHEMAS_FILE = Path(__file__).with_name("tools.json")
# The fields of the record each tool returns, from its published outputSchema: what a question can ask
# of a source ("the status of ORD-10031") and what no source holds ("its tracking number").
RECORD_FIELDS_FILE = Path(__file__).with_name("records.json")
# Each tool's annotations as its server publishes them in ``tools/list``: what a host (and the
# coordinator) may take it to do.
ANNOTATIONS_FILE = Path(__file__).with_name("annotations.json")

InputSchemas = dict[str, dict[str, dict[str, Any]]]  # source -> tool -> the tool's inputSchema


@functools.cache
def _recorded() -> str:
    return INPUT_SCHEMAS_FILE.read_text(encoding="utf-8")


def input_schemas() -> InputSchemas:
    """Each source's tools and their input schemas, as recorded in ``tools.json``.

    The file is read once; each call returns a fresh copy, so what one caller changes (resolving a
    ``$ref`` in place, say) no other caller sees.
    """
    schemas: InputSchemas = json.loads(_recorded())
    return schemas


# A record's field: its title and description, and the values it takes where its schema lists them.
Field = dict[str, Any]
RecordFields = dict[str, dict[str, dict[str, Field]]]  # source -> tool -> field name -> Field


def record_fields() -> RecordFields:
    """Each tool's record fields (name -> its "about" and "values"), as recorded in ``records.json``."""
    fields: RecordFields = json.loads(RECORD_FIELDS_FILE.read_text(encoding="utf-8"))
    return fields


# source -> tool -> the tool's annotations as on the wire (readOnlyHint, destructiveHint,
# idempotentHint, openWorldHint, title)
ToolAnnotations = dict[str, dict[str, dict[str, Any]]]


def tool_annotations() -> ToolAnnotations:
    """Each tool's annotations (camelCase, as on the wire), as recorded in ``annotations.json``."""
    annotations: ToolAnnotations = json.loads(ANNOTATIONS_FILE.read_text(encoding="utf-8"))
    return annotations


def _fields_of(output_schema: dict[str, Any] | None) -> dict[str, Field]:
    """The fields of the record in a ``ResultPage``'s ``results`` (nested records' fields too)."""
    if not output_schema:
        return {}
    defs = output_schema.get("$defs", {})
    fields: dict[str, Field] = {}
    for model in defs.values():
        for name, prop in model.get("properties", {}).items():
            referred = defs.get(str(prop.get("$ref", "")).rsplit("/", 1)[-1], {})
            values = referred.get("enum") or prop.get("enum") or []
            about = " ".join(filter(None, [prop.get("title", ""), prop.get("description", "")]))
            fields[name] = {"about": about, "values": list(values)}
    return fields


async def _listed(settings: SourceSettings) -> dict[str, list[Any]]:
    """What each source answers to ``tools/list`` (in memory)."""
    listed: dict[str, list[Any]] = {}
    for source in SOURCES:
        server = importlib.import_module(f"sources.{source}").create_server(settings)
        async with mcp.Client(server) as client:
            listed[source] = list((await client.list_tools()).tools)
    return listed


async def live_record_fields(settings: SourceSettings) -> RecordFields:
    """Each tool's record fields as its server publishes them in ``tools/list`` (in memory)."""
    return {
        source: {tool.name: _fields_of(tool.output_schema) for tool in tools}
        for source, tools in (await _listed(settings)).items()
    }


async def live_tool_annotations(settings: SourceSettings) -> ToolAnnotations:
    """Each tool's annotations as its server answers ``tools/list`` (in memory); ``{}`` for none."""
    return {
        source: {
            tool.name: tool.annotations.model_dump(mode="json", by_alias=True, exclude_none=True)
            if tool.annotations is not None
            else {}
            for tool in tools
        }
        for source, tools in (await _listed(settings)).items()
    }


async def live_input_schemas(settings: SourceSettings) -> InputSchemas:
    """Each source's tools and their input schemas as its server answers ``tools/list`` (in memory)."""
    return {
        source: {tool.name: tool.input_schema for tool in tools}
        for source, tools in (await _listed(settings)).items()
    }


def main(argv: Sequence[str] | None = None) -> None:
    parser = argparse.ArgumentParser(
        prog="python -m sources.catalogue",
        description="Ask every source for its tools' input schemas, record fields and annotations "
        "and print them as JSON.",
    )
    parser.add_argument(
        "--write",
        action="store_true",
        help=f"write them to {INPUT_SCHEMAS_FILE.name}, {RECORD_FIELDS_FILE.name} and "
        f"{ANNOTATIONS_FILE.name} in {INPUT_SCHEMAS_FILE.parent} instead",
    )
    arguments = parser.parse_args(argv)

    async def ask(settings: SourceSettings) -> tuple[InputSchemas, RecordFields, ToolAnnotations]:
        with anyio.fail_after(60):
            return (
                await live_input_schemas(settings),
                await live_record_fields(settings),
                await live_tool_annotations(settings),
            )

    with tempfile.TemporaryDirectory() as data_dir:  # the servers need a world; a private one leaves no trace
        schemas, fields, annotations = anyio.run(ask, source_settings.SourceSettings(data_dir=Path(data_dir)))
    recorded_files = (
        (INPUT_SCHEMAS_FILE, schemas),
        (RECORD_FIELDS_FILE, fields),
        (ANNOTATIONS_FILE, annotations),
    )
    for path, recorded in recorded_files:
        text = json.dumps(recorded, sort_keys=True, indent=2) + "\n"
        if arguments.write:
            path.write_text(text, encoding="utf-8")
            print(f"wrote {path}")
        else:
            sys.stdout.write(text)


if __name__ == "__main__":
    main()
