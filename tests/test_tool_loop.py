"""Subagents as Claude tool loops: a scripted Messages API on 127.0.0.1, the real anthropic SDK and its
MCP helpers, the real sources in memory. The model decides; these tests check what the code keeps."""

from __future__ import annotations

import contextlib
import json
import random
import uuid
from collections.abc import AsyncIterator, Callable
from typing import Any

import anyio
import pytest

from sources.faults import FaultSettings
from sources.settings import SourceSettings
from sources.store import Store
from sources.world import world_path
from subagents.broker import CredentialBroker, Grant
from subagents.claude import ClaudeSettings, TokenBudget
from subagents.hooks import TrimResults
from subagents.policy import RecoveryPolicy
from subagents.sessions.connection import Connections
from subagents.subagent import MonotonicClock, Runtime, SubagentReport, Task, run_subagent
from subagents.tool_loop import ClaudeSubagents
from tests.conftest import MODULES, TEST_KEY
from tests.fake_messages_api import (
    Conversations,
    FakeMessagesApi,
    Reply,
    Silent,
    calls,
    error,
    last_tool_results,
    obedient_planner,
    says,
)
from tests.fakes import FakeClock

pytestmark = pytest.mark.anyio

GRANTS = (Grant("billing:read", "refund research"),)


@pytest.fixture
def fake_api(messages_api: Callable[..., FakeMessagesApi]) -> Callable[..., FakeMessagesApi]:
    """A fake Messages API scripted per subagent task."""
    return lambda **scripts: messages_api(subagents=scripts)


def claude_settings(api: FakeMessagesApi, **limits: Any) -> ClaudeSettings:
    return ClaudeSettings(api_key="test-key", base_url=api.base_url, max_retries=2, timeout_s=10, **limits)


@contextlib.asynccontextmanager
async def claude_runtime(
    settings: SourceSettings,
    api: FakeMessagesApi,
    *,
    faults: dict[str, FaultSettings] | None = None,
    budget: TokenBudget | None = None,
    policy: RecoveryPolicy | None = None,
    post_call: tuple[Any, ...] = (TrimResults(),),
    **limits: Any,
) -> AsyncIterator[Runtime]:
    servers = {
        name: module.create_server(settings.with_faults((faults or {}).get(name, FaultSettings())))
        for name, module in MODULES.items()
    }
    claude = claude_settings(api, **limits)
    async with (
        Connections.opened({name: (lambda s=server: s) for name, server in servers.items()}) as connections,
        claude.client() as client,
    ):
        yield Runtime(
            connections=connections,
            broker=CredentialBroker(TEST_KEY, grants=GRANTS),
            policy=policy or RecoveryPolicy(),
            post_call=post_call,
            clock=FakeClock(),
            rng=random.Random(7),
            model=ClaudeSubagents(claude, client, budget or TokenBudget(claude.token_budget)),
        )


async def run(
    runtime: Runtime,
    task_id: str,
    source: str,
    tool: str,
    arguments: dict[str, Any],
    purpose: str = "research",
) -> SubagentReport:
    task = Task(task_id, source, tool, arguments, purpose=purpose)
    with anyio.fail_after(30):
        return await run_subagent(task, runtime, deadline=runtime.clock.now() + 30)


def actions(report: SubagentReport) -> list[str]:
    return [decision.action for decision in report.decisions]


def seen_by_model(api: FakeMessagesApi, task: str) -> list[dict[str, Any]]:
    """Every tool result the model was sent, as (is_error, the contract JSON it carried)."""
    seen = []
    for request in api.requests_of(task)[1:]:
        for block in last_tool_results(request):
            text = "".join(part["text"] for part in block["content"]) if block.get("content") else "{}"
            seen.append({"is_error": bool(block.get("is_error")), **json.loads(text)})
    return seen


async def test_the_model_calls_its_sources_tools_and_the_report_is_the_usual_one(
    fake_api: Any, settings: SourceSettings
) -> None:
    api = fake_api(orders=[calls(("search_orders", {"customer_id": "CUST-00042"})), says("Three orders.")])
    async with claude_runtime(settings, api) as runtime:
        report = await run(runtime, "orders", "orders", "search_orders", {"customer_id": "CUST-00042"})
    assert report.state == "ok" and report.attempts == 1 and report.decisions == []
    assert [order["id"] for order in report.results] == ["ORD-10031", "ORD-10023", "ORD-10008"]
    assert (report.model.turns, report.model.input_tokens, report.model.output_tokens) == (2, 700, 70)
    first = api.requests_of("orders")[0]
    assert {tool["name"] for tool in first["tools"]} == {
        "search_orders",
        "get_order",
    }  # the source's own MCP tools
    assert first["tools"][0]["input_schema"]["properties"]["customer_id"]["pattern"]  # its published schema
    (result,) = seen_by_model(api, "orders")
    assert result["is_error"] is False and result["resultCount"] == 3  # the contract, as JSON


async def test_the_model_sees_the_contract_trimmed_by_the_post_call_hook(
    fake_api: Any, settings: SourceSettings
) -> None:
    api = fake_api()
    faults = {"tickets": FaultSettings(oversize=1)}  # every answer carries an extra 2 MB text block
    async with claude_runtime(
        settings, api, faults=faults, post_call=(TrimResults(max_chars=40),)
    ) as runtime:
        report = await run(runtime, "tickets", "tickets", "search_tickets", {"customer_id": "CUST-00042"})
    assert report.state == "ok"
    (result,) = seen_by_model(api, "tickets")
    assert (
        result["results"][0]["body"].endswith("characters]")
        and "… [trimmed from" in result["results"][0]["body"]
    )
    assert len(json.dumps(api.requests_of("tickets")[1])) < 20_000  # not the 2 MB the source sent


async def test_transient_faults_are_retried_in_code_before_the_model_sees_them(
    fake_api: Any, settings: SourceSettings
) -> None:
    api = fake_api()  # an obedient model: the planned call, then done
    faults = {"tickets": FaultSettings(transient=0.5, seed=13)}  # the first call fails, the second works
    async with claude_runtime(settings, api, faults=faults) as runtime:
        report = await run(runtime, "tickets", "tickets", "search_tickets", {"customer_id": "CUST-00042"})
    assert actions(report) == ["retry"] and report.state == "ok" and report.attempts == 2
    (result,) = seen_by_model(api, "tickets")
    assert result["is_error"] is False  # the model never saw the fault
    assert len(api.requests_of("tickets")) == 2


async def test_a_validation_error_goes_to_the_model_and_its_repair_counts(
    fake_api: Any, settings: SourceSettings
) -> None:
    api = fake_api(orders=[
        calls(("search_orders", {"customer_id": "CUST-00042", "sku": "sku-4417-blk"})),
        calls(("search_orders", {"customer_id": "CUST-00042", "sku": "SKU-4417-BLK"})),
        says("One order with the espresso machine."),
    ])  # fmt: skip
    async with claude_runtime(settings, api) as runtime:
        report = await run(runtime, "orders", "orders", "search_orders", {"customer_id": "CUST-00042"})
    assert actions(report) == ["to_model", "repair"] and report.state == "ok"
    assert [order["id"] for order in report.results] == ["ORD-10023"]
    assert 'sku "sku-4417-blk" -> "SKU-4417-BLK"' in report.decisions[1].reason
    refused, repaired = seen_by_model(api, "orders")
    assert (
        refused["is_error"] and refused["errorCategory"] == "validation" and "sku" in refused["description"]
    )
    assert refused["attempted_query"]["arguments"]["sku"] == "sku-4417-blk"
    assert repaired["is_error"] is False


async def test_the_models_repairs_share_the_repair_budget(fake_api: Any, settings: SourceSettings) -> None:
    api = fake_api(orders=[
        calls(("search_orders", {"customer_id": "CUST-00042", "sku": "sku-1"})),
        calls(("search_orders", {"customer_id": "CUST-00042", "sku": "sku-2"})),
        calls(("search_orders", {"customer_id": "CUST-00042", "sku": "sku-3"})),
    ])  # fmt: skip
    async with claude_runtime(settings, api, policy=RecoveryPolicy(max_repairs=1)) as runtime:
        report = await run(runtime, "orders", "orders", "search_orders", {"customer_id": "CUST-00042"})
    assert actions(report) == ["to_model", "repair", "escalate"]
    assert report.state == "escalated" and report.decisions[-1].reason.startswith("1 repairs spent")
    assert report.escalation is not None and report.escalation.error_category == "validation"
    assert len(api.requests_of("orders")) == 2  # no third turn: the code ended the subagent


async def test_a_business_error_goes_to_the_model_and_is_never_sent_again(
    fake_api: Any, settings: SourceSettings
) -> None:
    erased = {"identifier": "jane.doe@example.com", "mode": "business"}
    api = fake_api(
        customer=[calls(("customer_lookup", erased)), calls(("customer_lookup", erased)), says("Blocked.")]
    )
    async with claude_runtime(settings, api) as runtime:
        report = await run(runtime, "customer", "customers", "customer_lookup", erased)
    assert actions(report) == ["to_model", "refused", "escalate"]
    assert report.attempts == 1  # the identical repeat never left the process
    assert report.escalation is not None and report.escalation.error_category == "business"
    assert not report.escalation.is_retryable and report.escalation.attempted_query.arguments == erased
    first, repeat = seen_by_model(api, "customer")
    assert first == repeat and first["errorCategory"] == "business"


async def test_permission_is_elevated_in_code_when_the_broker_grants(
    fake_api: Any, settings: SourceSettings
) -> None:
    api = fake_api()
    async with claude_runtime(settings, api) as runtime:
        granted = await run(
            runtime, "invoices", "billing", "list_invoices", {"customer_id": "CUST-00042"}, "refund research"
        )
        refused = await run(runtime, "invoices", "billing", "list_invoices", {"customer_id": "CUST-00042"})
    assert actions(granted) == ["elevate"] and granted.state == "ok"
    assert actions(refused) == ["to_model", "escalate"] and refused.state == "escalated"
    assert refused.escalation is not None and refused.escalation.error_category == "permission"
    results = seen_by_model(api, "invoices")
    assert results[0]["is_error"] is False  # granted: the model saw the invoices
    assert results[1]["errorCategory"] == "permission" and results[1]["requiredScope"] == "billing:read"


async def test_a_refund_above_the_limit_is_blocked_whatever_the_model_asks(
    fake_api: Any, settings: SourceSettings
) -> None:
    key = f"model-{uuid.uuid4().hex[:12]}"
    refund = {"order_id": "ORD-10023", "amount": 750, "idempotency_key": key}
    api = fake_api(refund=[
        calls(("refund_eligibility", {"order_id": "ORD-10023", "amount": 750})),
        calls(("issue_refund", refund)),
        says("I could not refund it."),
    ])  # fmt: skip
    async with claude_runtime(settings, api) as runtime:
        report = await run(
            runtime, "refund", "billing", "refund_eligibility", {"order_id": "ORD-10023", "amount": 750},
            "refund research",
        )  # fmt: skip
    assert actions(report) == ["elevate", "to_model", "hook_blocked", "escalate"]
    assert report.state == "escalated" and report.escalation is not None
    assert report.escalation.error_category == "business"
    assert report.escalation.attempted_query.tool == "issue_refund"
    assert report.escalation.partial_results[0]["eligible"] is False  # the assessment is kept
    blocked = seen_by_model(api, "refund")[1]
    assert blocked["is_error"] and blocked["description"].startswith("Blocked before sending")
    billing = Store(world_path(settings.data_dir, settings.seed) / "billing.db")
    assert billing.rows("SELECT id FROM refunds WHERE idempotency_key = ?", (key,)) == []


async def test_an_overloaded_api_hands_the_task_back_to_the_code(
    fake_api: Any, settings: SourceSettings
) -> None:
    overloaded = error(529, "overloaded_error", "overloaded")
    api = fake_api(orders=[overloaded, overloaded, overloaded])
    async with claude_runtime(settings, api) as runtime:
        report = await run(runtime, "orders", "orders", "search_orders", {"customer_id": "CUST-00042"})
    assert len(api.requests_of("orders")) == 3  # the SDK's own retries (2) are the one retry layer
    assert actions(report) == ["stop_model", "fallback"] and report.state == "ok"
    assert report.decisions[0].category == "transient" and "529" in report.decisions[0].reason


async def test_a_model_that_never_makes_the_planned_call_is_covered_by_the_code(
    fake_api: Any, settings: SourceSettings
) -> None:
    api = fake_api(orders=[says("I would rather not.")])
    async with claude_runtime(settings, api) as runtime:
        report = await run(runtime, "orders", "orders", "search_orders", {"customer_id": "CUST-00042"})
    assert actions(report) == ["fallback"] and report.state == "ok" and len(report.results) == 3
    assert "ended without calling search_orders" in report.decisions[0].reason


def eligibility_then_invoices() -> list[Reply]:
    """The refund subagent's model: the planned eligibility check (refused), then the invoices."""
    return [
        calls(("refund_eligibility", {"order_id": "ORD-10023", "amount": 750})),
        calls(("list_invoices", {"customer_id": "CUST-00042"})),
        says("Not allowed automatically; here are the invoices."),
    ]


async def test_the_planned_tools_error_escalates_even_after_other_calls_worked(
    fake_api: Any, settings: SourceSettings
) -> None:
    api = fake_api(refund=eligibility_then_invoices())
    async with claude_runtime(settings, api) as runtime:
        report = await run(
            runtime, "refund", "billing", "refund_eligibility", {"order_id": "ORD-10023", "amount": 750},
            "refund research",
        )  # fmt: skip
    assert report.state == "escalated" and actions(report)[-1] == "escalate"
    assert report.escalation is not None and report.escalation.error_category == "business"
    assert report.escalation.attempted_query.tool == "refund_eligibility"
    assert [invoice["order_id"] for invoice in report.other_results["list_invoices"]][:1] == ["ORD-10031"]


async def test_a_tool_the_source_does_not_have_is_never_called(
    fake_api: Any, settings: SourceSettings
) -> None:
    api = fake_api(orders=[calls(("drop_orders", {"customer_id": "CUST-00042"})), says("It did not work.")])
    async with claude_runtime(settings, api) as runtime:
        report = await run(runtime, "orders", "orders", "search_orders", {"customer_id": "CUST-00042"})
    assert actions(report) == ["refused", "fallback"] and report.state == "ok" and report.attempts == 1
    assert "asked for drop_orders, which orders does not have" in report.decisions[0].reason
    (answer,) = last_tool_results(api.requests_of("orders")[1])
    assert answer["is_error"] is True  # the SDK told the model; nothing reached the source


async def test_the_turn_limit_ends_a_model_that_keeps_calling(
    fake_api: Any, settings: SourceSettings
) -> None:
    again = calls(("search_orders", {"customer_id": "CUST-00042"}))
    api = fake_api(orders=[again, again, again, again])
    async with claude_runtime(settings, api, max_turns=2) as runtime:
        report = await run(runtime, "orders", "orders", "search_orders", {"customer_id": "CUST-00042"})
    assert len(api.requests_of("orders")) == 2 and report.model.turns == 2
    assert actions(report) == ["stop_model"] and "used its 2 turns" in report.decisions[0].reason
    assert report.state == "ok"  # what it found before the limit stands


async def test_the_token_budget_is_shared_and_stops_the_model(
    fake_api: Any, settings: SourceSettings
) -> None:
    again = calls(("search_orders", {"customer_id": "CUST-00042"}))  # 340 tokens a turn
    api = fake_api(orders=[again, again])
    budget = TokenBudget(limit=300)
    async with claude_runtime(settings, api, budget=budget) as runtime:
        first = await run(runtime, "orders", "orders", "search_orders", {"customer_id": "CUST-00042"})
        second = await run(runtime, "tickets", "tickets", "search_tickets", {"customer_id": "CUST-00042"})
    assert actions(first) == ["stop_model", "fallback"] and first.state == "ok" and budget.used == 340
    assert (
        "token budget is spent (340 of 300 tokens used); its calls were not made" in first.decisions[0].reason
    )
    assert actions(second) == ["fallback"] and second.state == "ok" and second.model.turns == 0
    assert api.requests_of("tickets") == []  # no model call once the budget is spent


# --- a whole query in Claude mode ----------------------------------------------------------------

STORY = "Investigate jane.doe@example.com: recent orders, open tickets, and whether a £750 refund on ORD-10023 is allowed"


async def research_story(
    settings: SourceSettings, claude: ClaudeSettings | None, deadline_s: float = 30.0, **wiring: Any
) -> Any:
    """The story in Claude mode (``claude``) on the sources in memory; ``wiring``: the coordinator's
    ``clock`` (a fake one unless given) and ``client_options``."""
    from coordinator.core import Config, Coordinator

    servers = {name: module.create_server(settings) for name, module in MODULES.items()}
    targets = {name: (lambda s=server: s) for name, server in servers.items()}
    wiring.setdefault("clock", FakeClock())
    with anyio.fail_after(60):
        async with Coordinator(Config(settings, claude=claude), targets=targets, **wiring) as coordinator:
            return await coordinator.research(STORY, deadline_s=deadline_s, seed=1)


def gap_shape(report: Any) -> list[tuple[Any, ...]]:
    return [
        (g.task, g.source, g.state, g.error_category, g.next_step, g.attempted_query) for g in report.gaps
    ]


def escalation_shape(report: Any) -> list[tuple[Any, ...]]:
    return [
        (
            e.source,
            e.error_category,
            e.is_retryable,
            e.attempted_query,
            e.partial_results,
            sorted(e.to_wire()),
        )
        for e in report.escalations
    ]


async def test_a_query_in_claude_mode_has_the_gaps_and_escalations_of_the_deterministic_one(
    fake_api: Any, settings: SourceSettings
) -> None:
    api = fake_api()  # Claude plans as the code would, its subagents make their planned calls, it cites
    by_claude = await research_story(settings, claude_settings(api))
    deterministic = await research_story(settings, None)
    assert gap_shape(by_claude) == gap_shape(deterministic) and gap_shape(by_claude)
    assert escalation_shape(by_claude) == escalation_shape(deterministic)
    assert [(t.id, t.state) for t in by_claude.tasks] == [(t.id, t.state) for t in deterministic.tasks]
    assert by_claude.findings == deterministic.findings
    assert (by_claude.planning.planner, by_claude.synthesis.writer) == ("claude", "claude")
    assert all(task.model.turns >= 1 and task.model.input_tokens > 0 for task in by_claude.tasks)
    assert all(task.model is None for task in deterministic.tasks)
    spent = sum(t.model.input_tokens + t.model.output_tokens for t in by_claude.tasks) + sum(
        part.input_tokens + part.output_tokens for part in (by_claude.planning, by_claude.synthesis)
    )
    assert by_claude.tokens is not None and by_claude.tokens.used == spent
    assert deterministic.tokens is None
    wire = json.loads(by_claude.to_json())
    assert wire["tokens"] == {"limit": 200_000, "used": spent} and "input_tokens" in wire["tasks"][0]["model"]


async def test_the_sdks_spans_join_the_query_trace(
    fake_api: Any, settings: SourceSettings, spans: Any
) -> None:
    api = fake_api()
    report = await research_story(settings, claude_settings(api), client_options={"mode": "legacy"})
    finished = spans.get_finished_spans()
    assert {format(span.context.trace_id, "032x") for span in finished} == {report.trace_id}
    by_id = {span.context.span_id: span for span in finished}

    def ancestors(span: Any) -> list[str]:
        names = []
        while span.parent is not None and span.parent.span_id in by_id:
            span = by_id[span.parent.span_id]
            names.append(span.name)
        return names

    sdk = [span for span in finished if span.instrumentation_scope.name == "com.anthropic.sdk.python"]
    runners = [span for span in sdk if span.name == "anthropic.messages.tool_runner"]
    assert len(runners) == len(report.tasks)  # one tool loop per subagent
    assert all(ancestors(span)[0].startswith("subagent ") for span in runners)
    calls_by_sdk = [span for span in sdk if span.kind.name == "CLIENT"]
    assert calls_by_sdk and all("research" in ancestors(span) for span in calls_by_sdk)
    mcp_calls = [span for span in finished if span.name.startswith("MCP send tools/call")]
    assert mcp_calls and all("anthropic.messages.tool_runner" in ancestors(span) for span in mcp_calls)
    subagent = next(span for span in finished if span.name == "subagent orders")
    assert subagent.attributes["gen_ai.usage.input_tokens"] == report.tasks[1].model.input_tokens > 0


async def test_every_page_the_model_reads_is_in_the_report(fake_api: Any, settings: SourceSettings) -> None:
    def paging_model(request: dict[str, Any]) -> Reply:
        if len(request["messages"]) == 1:
            return calls(("search_orders", {"customer_id": "CUST-00042", "limit": 2}))
        (page,) = last_tool_results(request)
        cursor = json.loads(page["content"][0]["text"]).get("nextCursor")
        if cursor:
            return calls(("search_orders", {"customer_id": "CUST-00042", "limit": 2, "cursor": cursor}))
        return says("Three orders over two pages.")

    api = FakeMessagesApi(Conversations(default_subagent=paging_model))
    try:
        async with claude_runtime(settings, api) as runtime:
            report = await run(runtime, "orders", "orders", "search_orders", {"customer_id": "CUST-00042"})
    finally:
        api.close()
    assert report.state == "ok" and report.attempts == 2 and report.model.turns == 3
    assert [order["id"] for order in report.results] == ["ORD-10031", "ORD-10023", "ORD-10008"]


async def test_the_call_budget_bounds_a_model_that_calls_too_often(
    fake_api: Any, settings: SourceSettings
) -> None:
    lookup = ("customer_lookup", {"identifier": "jane.doe@example.com"})
    api = fake_api(customer=[calls(*[lookup] * 9), says("Done.")])
    async with claude_runtime(settings, api) as runtime:
        report = await run(runtime, "customer", "customers", "customer_lookup", dict(lookup[1]))
    assert report.attempts == 7  # 1 + 3 retries + 2 repairs + 1 elevation: the deterministic bound
    assert actions(report) == ["refused", "refused"] and "calls are spent" in report.decisions[0].reason
    assert len(api.requests_of("customer")) == 1  # the loop ended: the model was asked nothing more
    assert report.state == "ok" and report.results[0]["id"] == "CUST-00042"


async def test_when_the_code_stops_a_subagent_what_it_found_is_kept(
    fake_api: Any, settings: SourceSettings
) -> None:
    found = {"identifier": "jane.doe@example.com"}
    api = fake_api(customer=[
        calls(("customer_lookup", found)),
        calls(("customer_lookup", {**found, "mode": "timeout"})),  # transient every time: retries run out
    ])  # fmt: skip
    async with claude_runtime(settings, api) as runtime:
        report = await run(runtime, "customer", "customers", "customer_lookup", found)
    assert actions(report) == ["retry", "retry", "retry", "give_up"] and report.state == "escalated"
    assert report.escalation is not None and report.escalation.error_category == "transient"
    assert [record["id"] for record in report.escalation.partial_results] == ["CUST-00042"]
    assert len(api.requests_of("customer")) == 2


async def test_the_deadline_bounds_every_model_in_the_query(fake_api: Any, settings: SourceSettings) -> None:
    """The subagents' models and the brief writer stop answering: the query still ends by its deadline."""
    silent = Silent()
    api = fake_api()
    # The lead's answer is made before the query's clock starts: the fake makes it with the
    # deterministic planner, whose first call in a process is slow (1.7 s measured, bytecode cold,
    # under load): the fake's own cold start, not the lead's, and not the 0.5 s share's to pay.
    planned = obedient_planner({"messages": [{"role": "user", "content": STORY}]})
    api.respond = lambda request: planned if Conversations.route(request) == "planner" else silent(request)
    try:
        with anyio.fail_after(20):  # the deadline under test is 2 s (+1 s grace); this only stops a hang
            report = await research_story(
                settings, claude_settings(api), deadline_s=2.0, clock=MonotonicClock()
            )
    finally:
        silent.released.set()
    assert report.planning.steps[0].action == "plan", report.planning.steps
    (stop,) = report.planning.steps[1:]  # the lead's next round: the deadline ends the rounds
    assert stop.action == "stop" and ("deadline" in stop.reason or "did not answer within" in stop.reason)
    ran = [task for task in report.tasks if task.state != "blocked"]
    assert ran and all(task.state == "deadline" for task in ran)
    for task in ran:
        assert task.decisions[0].action == "stop_model", task
        assert task.decisions[0].reason == "the deadline came while the model was working"
    assert {gap.next_step for gap in report.gaps} == {"retry later"}
    (step,) = report.synthesis.steps
    assert step.action == "fallback" and step.reason.startswith("the brief writer did not answer within")


async def test_records_from_the_sources_other_tools_become_findings(
    fake_api: Any, settings: SourceSettings
) -> None:
    api = fake_api(refund=eligibility_then_invoices())
    report = await research_story(settings, claude_settings(api))
    invoices = [f for f in report.findings if f.tool == "list_invoices"]
    assert invoices and all(f.citation.startswith("billing:list_invoices:") for f in invoices)
    assert "invoice for ORD-10023" in " ".join(f.text for f in invoices)
    assert [gap.task for gap in report.gaps] == ["refund"]  # the refund itself is still a gap


class _BrokenHook:
    """A post-call hook with a bug: our own code failing under the SDK's tool runner."""

    def __call__(self, call: Any, outcome: Any) -> Any:
        raise ZeroDivisionError("a bug in a hook")


async def test_a_bug_in_our_own_code_under_the_model_is_raised_not_turned_into_a_stop(
    fake_api: Any, settings: SourceSettings
) -> None:
    """The SDK's runner hands any exception of a tool to the model as an error result; ours is not
    hidden so: the loop ends and the bug reaches the caller, as it would in the deterministic mode."""
    api = fake_api(orders=[calls(("search_orders", {"customer_id": "CUST-00042"})), says("Done.")])
    async with claude_runtime(settings, api, post_call=(_BrokenHook(),)) as runtime:
        with pytest.raises(ZeroDivisionError, match="a bug in a hook"):
            await run(runtime, "orders", "orders", "search_orders", {"customer_id": "CUST-00042"})
    assert len(api.requests_of("orders")) == 1  # the model was not asked again with the bug as data


async def test_a_model_steered_to_refund_another_order_is_blocked(
    fake_api: Any, settings: SourceSettings
) -> None:
    """Claude mode with the refund scope granted and every refund approved: the question asks
    whether a refund on ORD-10031 is allowed, and the refund subagent's model, steered (as by text a
    source returned), refunds ORD-10134. The write guard blocks it before it leaves (the question
    asked for no write at all); the refund research itself is answered, and billing paid nothing."""
    from coordinator.core import Config, Coordinator
    from subagents.broker import Grant
    from subagents.writes import Approval

    key = f"steered-{uuid.uuid4().hex[:12]}"
    steered = {"order_id": "ORD-10134", "amount": 20, "idempotency_key": key}
    api = fake_api(refund=[calls(("issue_refund", steered)), says("Refunded.")])
    servers = {name: module.create_server(settings) for name, module in MODULES.items()}
    config = Config(
        settings,
        claude=claude_settings(api),
        grants=(Grant("billing:read", None), Grant("billing:refund", None)),
        approvals=(Approval("issue_refund"),),
    )
    targets = {name: (lambda s=server: s) for name, server in servers.items()}
    with anyio.fail_after(60):
        async with Coordinator(config, targets=targets, clock=FakeClock()) as coordinator:
            report = await coordinator.research("can we refund £20 on ORD-10031?", seed=1)
    seen = seen_by_model(api, "refund")
    assert (
        seen and seen[0]["is_error"] and "the question did not ask for this write" in seen[0]["description"]
    )
    billing = Store(world_path(settings.data_dir, settings.seed) / "billing.db")
    assert billing.rows("SELECT id FROM refunds WHERE idempotency_key = ?", (key,)) == []
    assert {task.id for task in report.tasks} >= {"refund"}
