"""Answers a person can read: every record as its sentence, never JSON; every task's why in English.

A generated set of questions touches every read-only tool of the demo sources (and a registered
source's records of unknown shapes); the report is rendered as `research ask` prints it, and no
printed line may hold a JSON object or list. Every corpus query's plan is checked for stilted whys:
an argument's raw name beside its value ("status open", "(customer id the customer"), a task id
("the customer_jane_doe_example_com"), the search words before their topic ("policies on time
refund").
"""

from __future__ import annotations

import json
import random
import re
import tomllib
from pathlib import Path
from typing import Any

import anyio
import pytest
from mcp.server import MCPServer
from mcp.types import ToolAnnotations
from rich.console import Console

from coordinator.core import DEFAULT_GRANTS, Config, Coordinator
from coordinator.planning.plan import Plan, PlannedTask
from coordinator.planning.planner import plan_query
from coordinator.planning.reading import QueryError
from coordinator.planning.tools import TOPIC_WORDS, tool_arguments
from coordinator.registered_tools import keep_tools, tools_at
from coordinator.registry import Registry, SourceEntry
from coordinator.reporting.render import print_report
from coordinator.reporting.report import ResearchReport
from coordinator.reporting.sentences import describe
from sources.catalogue import TOOLS
from sources.settings import SourceSettings
from subagents.broker import Grant
from subagents.sessions.connection import Target
from tests.conftest import PROJECT_ROOT
from tests.fakes import FakeClock
from tests.test_coordinator import in_memory

STORY = "Investigate jane.doe@example.com: recent orders, open tickets, and whether a £750 refund on ORD-10023 is allowed"
# Questions that, together, call every read-only demo tool: with billing:read granted, the invoices too.
QUESTIONS = (
    STORY,  # customer_lookup, search_orders, search_tickets, search_policies; refund_eligibility escalated
    "What has Jane Doe ordered",  # find_customers
    "what's going on with order 10023?",  # get_order, search_tickets of an order
    "invoices for order 10023 and who placed it",  # list_invoices of the order's customer
    "refund 45 quid on ORD-10031?",  # refund_eligibility that answers
    "which policies sit two steps from KB-RETURNS",  # related_policies
    "can ORD-10031 be refunded in full?",
    "Samuel Elliott and Ben Middleton - orders for both please",
    "cust 42 orders placed in october 2026 with SKU-4417-BLK",
    "espresso machine arrived cracked",  # tickets and policies searched by words
)
# And questions made from the demo world's ids: every customer-scoped tool, orders on their own, refunds.
_DRAWN = random.Random(27)
GENERATED = tuple(
    question
    for customer, order, amount, article in zip(
        _DRAWN.sample(range(1, 41), 4), _DRAWN.sample(range(10001, 10040), 4), _DRAWN.sample(range(5, 900), 4),
        _DRAWN.sample(["KB-REFUNDS", "KB-DAMAGED", "KB-SHIPPING", "KB-WARRANTY", "KB-VIP", "KB-GDPR"], 4),
        strict=True,
    )
    for question in (
        f"everything on CUST-{customer:05d}",
        f"what's going on with ORD-{order}?",
        f"can we refund £{amount} on ORD-{order}, and what sits two links from {article}?",
    )
)  # fmt: skip

# Each record kind's sentence: what every finding of the tool says (a generic reading would not).
SENTENCE = {
    "customer_lookup": r"^[^<>]+ <[^@ ]+@[^> ]+>, (standard|gold|vip) tier, customer since \d{4}-\d\d-\d\d$",
    "find_customers": r"^[^<>]+ <[^@ ]+@[^> ]+>, (standard|gold|vip) tier, customer since \d{4}-\d\d-\d\d$",
    "search_orders": r"^placed \d{4}-\d\d-\d\d, [a-z ]+, £[\d,]+\.\d\d: \d+ x .+ \(SKU-[\w-]+\)",
    "get_order": r"^placed \d{4}-\d\d-\d\d by CUST-\d{5}, [a-z ]+( on \d{4}-\d\d-\d\d)?, £[\d,]+\.\d\d: \d+ x ",
    "search_tickets": r"^(open|pending|closed) (low|normal|high)-priority ticket( about ORD-\d+)?, opened \d{4}-\d\d-\d\d: .+",
    "list_invoices": r"^invoice for ORD-\d+, (paid|void), £[\d,]+\.\d\d, refunded £[\d,]+\.\d\d$",
    "refund_eligibility": r"^£[\d,]+\.\d\d may (not )?be refunded( automatically)?: .+",
    "search_policies": r"^[A-Z][^:]+: [A-Z].+\.$",
    "related_policies": r"^[A-Z][^:]+: .+ \(\d links? away( via KB-[A-Z-]+(, KB-[A-Z-]+)*)?: [a-z ]+\)$",
}
READ_ONLY_TOOLS = {tool for tools in TOOLS.values() for tool in tools} - {"issue_refund"}

# JSON on a printed line: an object's first key, or a list of strings, numbers, objects or lists.
JSON = re.compile(r'\{\s*"[^"]*"\s*:|\[\s*(\{|\[|"|-?\d)|\{\s*\}|\[\s*\]')


def rendered(report: ResearchReport) -> list[str]:
    """The report as `research ask` prints it, one line per line (a wide terminal: nothing wraps)."""
    console = Console(record=True, width=400, color_system=None)
    print_report(report, console)
    return console.export_text().splitlines()


async def ask(
    settings: SourceSettings, query: str, targets: dict[str, Target] | None = None, plan: Plan | None = None,
    registry: Registry | None = None,
) -> ResearchReport:  # fmt: skip
    config = Config(
        settings, grants=(*DEFAULT_GRANTS, Grant("billing:read")), registry=registry or Registry(None)
    )
    with anyio.fail_after(60):
        async with Coordinator(
            config, targets=targets or in_memory(settings), clock=FakeClock()
        ) as coordinator:
            return await coordinator.research(query, seed=1, plan=plan)


@pytest.mark.anyio
async def test_every_record_kind_is_its_sentence_and_no_printed_line_is_json(
    settings: SourceSettings,
) -> None:
    seen: set[str] = set()
    kept = 0
    for query in (*QUESTIONS, *GENERATED):
        report = await ask(settings, query)
        for line in rendered(report):
            assert not JSON.search(line), f"{query!r} printed JSON: {line}"
        for finding in report.findings:
            if finding.record_id == "none":  # a valid empty result: the source's own words
                continue
            seen.add(finding.tool)
            assert re.search(SENTENCE[finding.tool], finding.text), (query, finding)
        answer = report.answer.splitlines()
        for task in report.tasks:  # each task that answered has its line, in its why's words
            answered = any(line.startswith(f"{task.why}: ") for line in answer)
            assert answered or task.state not in ("ok", "empty"), (query, task.why, answer)
        printed = "\n".join(rendered(report))
        for gap in report.gaps:  # what a gap kept is read out as sentences too
            for record in gap.partial_results:
                assert f"kept:  {record['id']}: {describe(gap.attempted_query.tool, record)}" in printed
                kept += 1
    assert seen == READ_ONLY_TOOLS and kept >= 1


@pytest.mark.anyio
async def test_each_task_of_one_tool_answers_with_its_own_records(settings: SourceSettings) -> None:
    """Two customers' lookups: each answer line leads with that customer's record, not the first's."""
    report = await ask(settings, "Samuel Elliott and Ben Middleton - orders for both please")
    answer = report.answer.splitlines()
    for name in ("Samuel Elliott", "Ben Middleton"):
        line = next(line for line in answer if line.startswith(f"customers named {name}: "))
        assert line.split(": ", 1)[1].split(" <")[0].endswith(name), line


def registered_server() -> MCPServer:
    """A server outside the contract, as registered sources are: a structured record, JSON as text,
    a record nested in lists, and one whose text was cut short."""
    server = MCPServer("time")
    reads = ToolAnnotations(readOnlyHint=True)  # as the real time server says of its tools

    @server.tool(annotations=reads)
    def get_current_time(timezone: str) -> dict[str, Any]:
        return {"timezone": timezone, "datetime": "2026-11-01T18:00:00+09:00", "is_dst": False}

    @server.tool(annotations=reads)
    def as_text(timezone: str) -> str:
        return json.dumps(
            {"timezone": timezone, "offsets": [9, 10], "source": {"name": "tz", "version": 2}}, indent=2
        )

    @server.tool(annotations=reads)
    def cut_short(timezone: str) -> str:
        return json.dumps({"timezone": timezone, "zones": ["Asia/Tokyo", "Asia/Seoul"]})[:-2]

    return server


@pytest.mark.anyio
async def test_a_registered_sources_records_are_read_as_words_never_as_json(settings: SourceSettings) -> None:
    tools = ("get_current_time", "as_text", "cut_short")
    tasks = [
        PlannedTask(tool, "time", tool, {"timezone": "Asia/Tokyo"}, why=f"{tool} for Asia/Tokyo")
        for tool in tools
    ]
    server = registered_server()
    # Registered, its tools listed and kept as `research sources add` keeps them: the runtime reads
    # there that they only read (a source nobody listed would be taken to write).
    entry = SourceEntry(name="time", url="http://127.0.0.1:9/mcp")
    keep_tools(entry, settings.data_dir, await tools_at(server))
    report = await ask(
        settings,
        "what time is it in Asia/Tokyo",
        {"time": lambda: server},
        Plan.of("q", tasks, offered={**TOOLS, "time": tools}),
        Registry(None).added(entry),
    )
    assert [task.state for task in report.tasks] == ["ok", "ok", "ok"], report.gaps
    texts = {finding.tool: finding.text for finding in report.findings}
    assert texts["get_current_time"] == "timezone Asia/Tokyo, datetime 2026-11-01T18:00:00+09:00, is dst no"
    assert texts["as_text"] == "timezone Asia/Tokyo, offsets (9; 10), source (name tz, version 2)"
    assert "timezone Asia/Tokyo" in texts["cut_short"] and "Asia/Seoul" in texts["cut_short"]
    for line in rendered(report):
        uncited = re.sub(r"\[[\w.-]+:[\w.-]+:[^\]]*\]", "", line)  # the citations: [time:as_text:Asia/Tokyo]
        assert not JSON.search(line) and "{" not in uncited and "[" not in uncited, line


def test_a_record_of_any_shape_reads_as_words() -> None:
    assert describe("search_orders", {"id": "ORD-1", "status": "odd"}) == "status odd"  # not an order's shape
    assert describe("issue_refund", {"id": "ORD-10023", "requested": 750.0, "paid": 750.0, "eligible": False,
                                     "reason": "too much"}) == "£750.00 may not be refunded automatically: too much"  # fmt: skip
    assert describe("x", [1, {"a": "b", "c": None}]) == "1; a b"
    assert describe("x", {"text": "[a link](https://example.com) stays as written"}).startswith("[a link]")
    assert describe("x", {}) == "an empty record"


# --- the why of every task, over every query of the corpora ------------------------------------------

CORPORA = sorted((PROJECT_ROOT / "tests").glob("planner_*.toml"))
# Every demo argument's name in words ("customer id", "placed after"): never shown beside its value.
ARGUMENT_NAMES = {name.replace("_", " ") for arguments in tool_arguments().values() for name in arguments}


def corpus_plans() -> list[tuple[str, PlannedTask]]:
    tasks: list[tuple[str, PlannedTask]] = []
    for path in CORPORA:
        for case in tomllib.loads(Path(path).read_text(encoding="utf-8"))["case"]:
            try:
                plan = plan_query(case["query"])
            except QueryError:
                continue
            tasks.extend((case["query"], task) for task in plan.tasks.values())
    return tasks


def stilted(task: PlannedTask) -> list[str]:
    """What in a task's why is not English: the forms the old whys had, checked generally."""
    why, found = task.why, []
    opened = re.findall(r"\(\s*([a-z ]+)", why)
    found += [
        f"'(' before the argument name {name!r}"
        for name in opened
        if any(name.startswith(n) for n in ARGUMENT_NAMES)
    ]
    for name, value in task.arguments.items():
        if not isinstance(value, str | int | float):
            continue
        if re.search(rf"\b{re.escape(name.replace('_', ' '))} {re.escape(str(value))}", why):
            found.append(f"the argument's name beside its value: {name.replace('_', ' ')} {value}")
    if why.count("the customer") > 1 or "customer id" in why:
        found.append("the customer said twice, or its id's name")
    if re.search(r"\bthe \w+_\w+", why):
        found.append("a task id for what it looked up")
    if task.tool == "search_policies":
        topics = [word for word in str(task.arguments["query"]).split() if word in TOPIC_WORDS]
        if topics and not why.startswith(f"{topics[0]} policies"):
            found.append("the topic after the search words")
        if why.startswith("policies on "):
            found.append("'policies on' the search words")
    if task.tool == "refund_eligibility" and "£" not in why and "in full" not in why:
        found.append("an amount not in pounds")
    return found


def test_no_why_of_any_corpus_plan_is_stilted() -> None:
    tasks = corpus_plans()
    # every read tool, and the one write a question may ask for (a refund, planned after its check)
    assert len(tasks) > 1000 and {task.tool for _, task in tasks} == READ_ONLY_TOOLS | {"issue_refund"}
    bad = [(query[:80], task.why, problems) for query, task in tasks if (problems := stilted(task))]
    assert not bad, f"{len(bad)} stilted whys, e.g. {bad[:5]}"


@pytest.mark.parametrize(
    ("query", "whys"),
    [
        (
            "open tickets for jane.doe@example.com",
            {"who jane.doe@example.com is", "support tickets of the customer, open ones"},
        ),
        ("refund 45 quid on ORD-10031?", {"whether £45.00 may be refunded on ORD-10031", "refund policies"}),
        ("invoice for ORD-10023", {"order ORD-10023", "the invoices of ORD-10023's customer"}),
        (
            "can ORD-10023 be refunded in full?",
            {"order ORD-10023", "whether ORD-10023 may be refunded in full", "refund policies"},
        ),
        ("what's two hops from KB-RETURNS", {"policies linked to KB-RETURNS, up to 2 links away"}),
        (
            "cust 42 orders placed in october 2026 with SKU-4417-BLK",
            {
                "who CUST-00042 is",
                "the orders of CUST-00042, with SKU-4417-BLK, placed from 2026-10-01 to 2026-10-31",
            },
        ),
        (
            "cust 42 orders on 2026-10-20",
            {"who CUST-00042 is", "the orders of CUST-00042, placed on 2026-10-20"},
        ),
        (
            "Samuel Elliott and Ben Middleton - orders for both please",
            {
                "customers named Samuel Elliott",
                "customers named Ben Middleton",
                "the orders of Samuel Elliott",
                "the orders of Ben Middleton",
            },
        ),
        (
            "espresso machine arrived cracked",
            {
                'support tickets matching "espresso machine arrived cracked"',
                'policies matching "espresso machine arrived cracked"',
            },
        ),
        (
            "ORD-10023 arrived damaged, refund £750 ok?",
            {"whether £750.00 may be refunded on ORD-10023", 'refund policies matching "arrived damaged"'},
        ),
    ],
)
def test_a_why_reads_as_english(query: str, whys: set[str]) -> None:
    assert {task.why for task in plan_query(query).tasks.values()} == whys
