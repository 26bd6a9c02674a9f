"""Claude as the lead agent, against a scripted Messages API on 127.0.0.1 and the real anthropic SDK."""

from __future__ import annotations

import json
import re
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import anyio
import pytest

from coordinator.core import Config, Coordinator
from coordinator.llm import ClaudeSettings, claude_plan
from coordinator.planning.plan import Ref
from coordinator.planning.planner import plan_query
from sources.settings import SourceSettings
from tests.conftest import MODULES, TESTING
from tests.fake_messages_api import Conversations, FakeMessagesApi, Reply, Silent, error, tool_use
from tests.fakes import FakeClock

pytestmark = pytest.mark.anyio

STORY = "Investigate jane.doe@example.com: recent orders, open tickets, and whether a £750 refund on ORD-10023 is allowed"
GOOD_PLAN = {
    "tasks": [
        {"id": "customer", "source": "customers", "tool": "customer_lookup", "arguments": {"identifier": "jane.doe@example.com"}},
        {"id": "orders", "source": "orders", "tool": "search_orders", "arguments": {"customer_id": "{customer.id}"}, "depends_on": ["customer"]},
        {"id": "refund", "source": "billing", "tool": "refund_eligibility", "arguments": {"order_id": "ORD-10023", "amount": 750},
         "depends_on": ["customer"], "purpose": "refund research"},
    ]
}  # fmt: skip
BAD_PLAN = {"tasks": [{"id": "orders", "source": "orders", "tool": "drop_orders", "arguments": {}}]}


@pytest.fixture
def fake_api() -> Iterator[Any]:
    started: list[FakeMessagesApi] = []

    def start(*replies: Reply | Conversations) -> FakeMessagesApi:
        api = FakeMessagesApi(replies[0] if isinstance(replies[0], Conversations) else list(replies))  # type: ignore[arg-type]
        started.append(api)
        return api

    yield start
    for api in started:
        api.close()


def settings_for(api: FakeMessagesApi) -> ClaudeSettings:
    return ClaudeSettings(api_key="test-key", base_url=api.base_url, max_retries=2, timeout_s=10)


async def plan_with(api: FakeMessagesApi) -> Any:
    with anyio.fail_after(30):
        return await claude_plan(STORY, settings_for(api))


async def test_claude_plans_and_the_plan_is_checked_like_any_other(fake_api: Any) -> None:
    api = fake_api(tool_use(GOOD_PLAN))
    plan, summary = await plan_with(api)
    assert [task.id for task in plan.order()] == ["customer", "orders", "refund"]
    assert plan.tasks["orders"].arguments == {"customer_id": Ref("customer", "id")}
    assert summary.planner == "claude" and [step.action for step in summary.steps] == ["plan"]
    assert (summary.input_tokens, summary.output_tokens) == (120, 80)
    (request,) = api.requests
    assert (
        request["tool_choice"] == {"type": "tool", "name": "submit_plan"}
        and request["messages"][0]["content"] == STORY
    )


async def test_an_invalid_plan_is_repaired_once_with_the_exact_error(fake_api: Any) -> None:
    api = fake_api(tool_use(BAD_PLAN), tool_use(GOOD_PLAN))
    plan, summary = await plan_with(api)
    assert [step.action for step in summary.steps] == ["repair", "plan"]
    assert "unknown tool 'drop_orders'" in summary.steps[0].reason
    repair_turn = api.requests[1]["messages"][-1]["content"][0]
    assert repair_turn["type"] == "tool_result" and repair_turn["is_error"] is True
    assert "unknown tool 'drop_orders'" in repair_turn["content"]
    assert len(plan.tasks) == 3


async def test_a_plan_that_researches_what_the_question_leaves_out_is_repaired_then_refused(
    fake_api: Any,
) -> None:
    """ "...; this is not about ORD-10134": a plan that researches ORD-10134 anyway (a model steered, or
    careless) is sent back once with the reason; planned so again, the deterministic planner's plan
    runs, which lists ORD-10134 as not researched."""
    query = "is a £20 refund on ORD-10023 allowed? this is not about ORD-10134"
    steered = {"tasks": [
        {"id": "check", "source": "billing", "tool": "refund_eligibility", "arguments": {"order_id": "ORD-10023", "amount": 20}},
        {"id": "other", "source": "orders", "tool": "get_order", "arguments": {"order_id": "ord-10134"}},
    ]}  # fmt: skip
    good = {"tasks": steered["tasks"][:1]}
    with anyio.fail_after(30):
        plan, summary = await claude_plan(query, settings_for(fake_api(tool_use(steered), tool_use(good))))
    assert [step.action for step in summary.steps] == ["repair", "plan"] and set(plan.tasks) == {"check"}
    assert (
        "task 'other' names ORD-10134: the question names it only to leave it out" in summary.steps[0].reason
    )
    assert [u.what for u in plan.unplanned] == ["ORD-10134"]
    with anyio.fail_after(30):
        plan, summary = await claude_plan(query, settings_for(fake_api(tool_use(steered), tool_use(steered))))
    assert [step.action for step in summary.steps] == ["repair", "fallback"]
    assert not any("ORD-10134" in str(task.arguments) for task in plan.tasks.values())
    assert "ORD-10134" in {u.what for u in plan.unplanned}


async def test_a_plan_still_invalid_after_repair_falls_back_and_says_so(fake_api: Any) -> None:
    api = fake_api(tool_use(BAD_PLAN), tool_use({"tasks": []}))
    plan, summary = await plan_with(api)
    assert [step.action for step in summary.steps] == ["repair", "fallback"]
    assert summary.steps[-1].category == "validation" and "deterministic planner" in summary.steps[-1].reason
    assert set(plan.tasks) == set(plan_query(STORY).tasks)


async def test_a_429_then_success_is_retried_by_the_sdk_alone(fake_api: Any) -> None:
    api = fake_api(error(429, "rate_limit_error", "slow down"), tool_use(GOOD_PLAN))
    _, summary = await plan_with(api)
    assert [step.action for step in summary.steps] == ["plan"] and len(api.requests) == 2


async def test_an_overloaded_api_falls_back_to_the_deterministic_planner(fake_api: Any) -> None:
    api = fake_api(error(529, "overloaded_error", "overloaded"))
    plan, summary = await plan_with(api)
    assert len(api.requests) == 3  # the SDK's own retries (2) are the one retry layer; nothing added above
    (step,) = summary.steps
    assert step.action == "fallback" and step.category == "transient" and "529" in step.reason
    assert set(plan.tasks) == set(plan_query(STORY).tasks)


async def test_a_bad_request_is_a_validation_failure(fake_api: Any) -> None:
    api = fake_api(error(400, "invalid_request_error", "max_tokens too large"))
    _, summary = await plan_with(api)
    assert summary.steps[-1].category == "validation" and len(api.requests) == 1


async def test_no_key_falls_back_without_a_call() -> None:
    plan, summary = await claude_plan(STORY, ClaudeSettings(api_key=None, base_url="http://127.0.0.1:9"))
    assert summary.steps[-1].action == "fallback" and summary.steps[-1].category == "permission"
    assert set(plan.tasks) == set(plan_query(STORY).tasks)


async def test_the_report_of_a_claude_plan_has_the_same_gaps_as_the_deterministic_one(
    fake_api: Any, settings: SourceSettings
) -> None:
    api = fake_api(tool_use({"tasks": [*GOOD_PLAN["tasks"], {"id": "tickets", "source": "tickets", "tool": "search_tickets",
                    "arguments": {"customer_id": "{customer.id}", "status": "open"}, "depends_on": ["customer"]},
                    {"id": "policies", "source": "kb", "tool": "search_policies", "arguments": {"query": "refund"}}]}))  # fmt: skip
    plan, summary = await plan_with(api)

    async def run(chosen: Any, planning: Any = None) -> Any:
        servers = {name: module.create_server(settings) for name, module in MODULES.items()}
        targets = {name: (lambda s=server: s) for name, server in servers.items()}
        with anyio.fail_after(60):
            async with Coordinator(Config(settings), targets=targets, clock=FakeClock()) as coordinator:
                return await coordinator.research(STORY, seed=1, plan=chosen, planning=planning)

    by_claude, deterministic = await run(plan, summary), await run(plan_query(STORY))
    shape = lambda report: [(g.task, g.source, g.state, g.error_category, g.next_step) for g in report.gaps]  # noqa: E731
    assert (
        shape(by_claude)
        == shape(deterministic)
        == [("refund", "billing", "escalated", "business", "escalate to a manager")]
    )
    assert [e.to_wire().keys() for e in by_claude.escalations] == [
        e.to_wire().keys() for e in deterministic.escalations
    ]
    assert json.loads(by_claude.to_json())["planning"]["planner"] == "claude"
    assert json.loads(deterministic.to_json())["planning"]["planner"] == "deterministic"


async def test_an_id_no_tool_looks_up_is_held_to_the_planners_rule_in_a_plan_claude_makes(
    fake_api: Any, settings: SourceSettings
) -> None:
    """ "what about TCK-... for CUST-00042?": no tool looks a ticket up by its id. A plan Claude makes
    that only looks her up lists the id as not researched; one that searches her tickets looks for it
    among them, and the report lists it when it is not there. Her own ticket's id, found there, leaves
    the report complete. (Claude's plans dropped such an id silently: complete, never mentioned.)"""
    lookup = {
        "id": "customer",
        "source": "customers",
        "tool": "customer_lookup",
        "arguments": {"identifier": "CUST-00042"},
    }
    tickets = {"id": "tickets", "source": "tickets", "tool": "search_tickets", "arguments": {"customer_id": "CUST-00042"}}  # fmt: skip

    async def research(query: str, *tasks: dict[str, Any]) -> Any:
        api = fake_api(tool_use({"tasks": list(tasks)}))
        with anyio.fail_after(30):
            plan, summary = await claude_plan(query, settings_for(api))
        servers = {name: module.create_server(settings) for name, module in MODULES.items()}
        targets = {name: (lambda s=server: s) for name, server in servers.items()}
        with anyio.fail_after(60):
            async with Coordinator(Config(settings), targets=targets, clock=FakeClock()) as coordinator:
                return await coordinator.research(query, seed=1, plan=plan, planning=summary)

    listed = await research("tickets of CUST-00042", tickets)
    held = next(f.record_id for f in listed.findings if f.record_id.startswith("TCK-"))
    found = await research(f"what about {held} for CUST-00042?", lookup, tickets)
    assert found.status == "complete" and not found.unplanned, found.unplanned
    for absent in ("TCK-99999", "TCK-12"):
        query = f"what about {absent} for CUST-00042?"
        only_her = await research(query, lookup)
        (item,) = [u for u in only_her.unplanned if u.what == absent]
        assert "no tool looks a record up by an id of this kind" in item.why and only_her.status == "partial"
        searched = await research(query, lookup, tickets)
        assert absent not in {f.record_id for f in searched.findings}
        (item,) = [u for u in searched.unplanned if u.what == absent]
        assert "not among the records found" in item.why and searched.status == "partial"


@pytest.mark.subprocess
def test_research_ask_with_llm_claude_against_the_fake_api(fake_api: Any, settings: SourceSettings) -> None:
    import os
    import subprocess
    import sys

    from tests.conftest import PROJECT_ROOT

    api = fake_api(Conversations(  # the subagents' models make their planned calls
        planner=[tool_use(GOOD_PLAN)],
        writer=[brief(("Jane Doe is a gold-tier customer.", ["customers:customer_lookup:CUST-00042"]))],
    ))  # fmt: skip
    environment = {
        **os.environ,
        **settings.child_environment(),
        "ANTHROPIC_API_KEY": "test-key",
        "ANTHROPIC_BASE_URL": api.base_url,
    }
    done = subprocess.run(
        [sys.executable, "-c", "from coordinator.cli import app; app()", "ask", STORY, "--llm", "claude", "--json", "--seed", "1"],
        env=environment, cwd=PROJECT_ROOT, capture_output=True, text=True, timeout=120,
    )  # fmt: skip
    assert done.returncode == 3, done.stderr
    report = json.loads(done.stdout)
    # The plan, then the lead reading the first round's findings (it adds nothing): 120 input tokens each.
    assert report["planning"]["planner"] == "claude" and report["planning"]["input_tokens"] == 120 + 120
    assert [step["action"] for step in report["planning"]["steps"]] == ["plan", "stop"]
    assert [task["id"] for task in report["tasks"]] == ["customer", "orders", "refund"]
    assert [gap["task"] for gap in report["gaps"]] == ["refund"]
    assert report["synthesis"]["writer"] == "claude", report["synthesis"]
    assert report["answer"].startswith(
        "Jane Doe is a gold-tier customer. [customers:customer_lookup:CUST-00042]"
    )
    assert all(
        task["model"]["turns"] == 2 and task["model"]["input_tokens"] == 700 for task in report["tasks"]
    )  # each a tool loop
    assert report["tokens"]["used"] == 200 + 3 * 770 + 200 + 200  # plan, subagents, the lead's round, brief
    assert [d["action"] for d in report["tasks"][2]["decisions"]] == ["elevate", "to_model", "escalate"]
    task = subprocess.run(  # one subagent from the CLI, driven by Claude
        [sys.executable, "-c", "from coordinator.cli import app; app()", "task", "orders", "search_orders",
         '{"customer_id": "CUST-00042"}', "--llm", "claude"],
        env=environment, cwd=PROJECT_ROOT, capture_output=True, text=True, timeout=60,
    )  # fmt: skip
    assert task.returncode == 0, task.stderr
    single = json.loads(task.stdout)
    assert single["state"] == "ok" and single["model"]["turns"] == 2 and len(single["results"]) == 3
    bad = subprocess.run(
        [sys.executable, "-c", "from coordinator.cli import app; app()", "ask", STORY, "--llm", "gpt"],
        env=environment, cwd=PROJECT_ROOT, capture_output=True, text=True, timeout=60,
    )  # fmt: skip
    assert bad.returncode == 2 and "'gpt' is not one of 'auto', 'claude', 'none'" in bad.stderr


def brief(*claims: tuple[str, list[str]]) -> Reply:
    reply = tool_use({"claims": [{"text": text, "citations": cites} for text, cites in claims]})
    reply.body["content"][0]["name"] = "submit_brief"
    return reply


async def story_report(settings: SourceSettings) -> Any:
    servers = {name: module.create_server(settings) for name, module in MODULES.items()}
    targets = {name: (lambda s=server: s) for name, server in servers.items()}
    with anyio.fail_after(60):
        async with Coordinator(Config(settings), targets=targets, clock=FakeClock()) as coordinator:
            return await coordinator.research(STORY, seed=1)


async def test_claude_writes_the_brief_and_uncited_claims_are_removed(
    fake_api: Any, settings: SourceSettings
) -> None:
    from coordinator.llm import claude_brief

    report = await story_report(settings)
    api = fake_api(brief(
        ("Jane Doe is a gold-tier customer.", ["customers:customer_lookup:CUST-00042"]),
        ("Her espresso machine arrived damaged.", ["tickets:search_tickets:TCK-20042", "orders:search_orders:ORD-10023"]),
        ("She is entitled to £750 at once.", []),
        ("She has filed eleven complaints.", ["tickets:search_tickets:TCK-99999"]),
    ))  # fmt: skip
    written = await claude_brief(report, settings_for(api))
    assert written.synthesis.writer == "claude"
    assert written.answer.splitlines()[:2] == [
        "Jane Doe is a gold-tier customer. [customers:customer_lookup:CUST-00042]",
        "Her espresso machine arrived damaged. [tickets:search_tickets:TCK-20042, orders:search_orders:ORD-10023]",
    ]
    assert "entitled" not in written.answer and "eleven" not in written.answer
    removed = [step.reason for step in written.synthesis.steps if step.action == "remove_claim"]
    assert len(removed) == 2 and "cites nothing" in removed[0] and "TCK-99999" in removed[1]
    assert written.gaps == report.gaps and written.escalations == report.escalations  # the code's, untouched
    assert "GAP refund" in written.answer  # the gaps stay in the answer as the code wrote them
    prompt = api.requests[0]["messages"][0]["content"]
    assert "[customers:customer_lookup:CUST-00042]" in prompt


async def test_an_unreachable_writer_keeps_the_deterministic_brief(
    fake_api: Any, settings: SourceSettings
) -> None:
    from coordinator.llm import claude_brief

    report = await story_report(settings)
    api = fake_api(error(529, "overloaded_error", "overloaded"))
    written = await claude_brief(report, settings_for(api))
    assert written.answer == report.answer
    (step,) = written.synthesis.steps
    assert step.action == "fallback" and step.category == "transient"


@pytest.mark.subprocess
def test_research_ask_in_both_modes_gives_the_same_gaps_for_the_same_faults(
    fake_api: Any, settings: SourceSettings
) -> None:
    """The done-when of Claude mode, through the real CLI: same faults, same gaps and escalations."""
    import os
    import subprocess
    import sys

    from tests.conftest import PROJECT_ROOT

    api = fake_api(Conversations())  # Claude plans, its subagents make their calls, it cites
    environment = {
        **os.environ,
        **settings.child_environment(),
        "ANTHROPIC_BASE_URL": api.base_url,
        **TESTING,
    }

    def ask(llm: str) -> dict[str, Any]:  # tickets spends every retry: back-offs of 0 s
        done = subprocess.run(
            [sys.executable, "-c", "from coordinator.cli import app; app()", "ask", STORY, "--llm", llm, "--json",
             "--faults", "tickets:transient=1"],
            env={**environment, "ANTHROPIC_API_KEY": "test-key"} if llm == "claude" else environment,
            cwd=PROJECT_ROOT, capture_output=True, text=True, timeout=120,
        )  # fmt: skip
        assert done.returncode == 3, done.stderr
        return json.loads(done.stdout)

    by_claude, deterministic = ask("claude"), ask("none")
    gap_fields = (
        "task",
        "source",
        "state",
        "errorCategory",
        "next_step",
        "attempted_query",
        "partial_results",
    )
    escalation_fields = ("source", "errorCategory", "isRetryable", "attempted_query", "partial_results")

    def shape(report: dict[str, Any], key: str, fields: tuple[str, ...]) -> list[Any]:
        return [{name: item[name] for name in fields} for item in report[key]]

    assert shape(by_claude, "gaps", gap_fields) == shape(deterministic, "gaps", gap_fields)
    assert [gap["task"] for gap in by_claude["gaps"]] == ["refund", "tickets"]
    assert shape(by_claude, "escalations", escalation_fields) == shape(
        deterministic, "escalations", escalation_fields
    )
    assert [sorted(e) for e in by_claude["escalations"]] == [sorted(e) for e in deterministic["escalations"]]
    assert (
        by_claude["planning"]["planner"] == "claude"
        and deterministic["planning"]["planner"] == "deterministic"
    )
    assert all(task["model"]["turns"] > 0 for task in by_claude["tasks"]) and by_claude["tokens"]["used"] > 0


def test_limits_come_from_the_environment_and_bad_ones_are_named(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("RESEARCH_CLAUDE_MAX_TURNS", "3")
    monkeypatch.setenv("RESEARCH_CLAUDE_TOKEN_BUDGET", "5000")
    settings = ClaudeSettings.from_environment()
    assert (settings.max_turns, settings.token_budget, settings.max_tokens) == (3, 5000, 2048)
    monkeypatch.setenv("RESEARCH_CLAUDE_MAX_TURNS", "many")
    with pytest.raises(
        ValueError,
        match=re.escape("RESEARCH_CLAUDE_MAX_TURNS must be a positive whole number, e.g. 6; got 'many'"),
    ):
        ClaudeSettings.from_environment()


async def test_a_silent_lead_agent_is_bounded_by_its_share_of_the_deadline(fake_api: Any) -> None:
    silent = Silent()
    api = fake_api(Conversations(planner=[]))
    api.respond = silent
    try:
        with anyio.fail_after(10):  # the bound under test is 0.5 s; this only keeps a failure from hanging
            plan, summary = await claude_plan(STORY, settings_for(api), within_s=0.5)
    finally:
        silent.released.set()
    (step,) = summary.steps
    assert step.action == "fallback" and step.category == "transient"
    assert step.reason == "the lead agent did not answer within 0.5 s; used the deterministic planner"
    assert set(plan.tasks) == set(plan_query(STORY).tasks)


# --- a cold model SDK: loaded off the event loop, within the bound of whoever waits for it -------

# In a fresh process (the SDK not loaded yet): a watcher on the event loop notes whether the SDK is
# loaded, each time the loop lets it run, while the lead agent plans within a bound; then a
# coordinator opens in Claude mode and says whether the SDK (its MCP helpers too) is loaded already.
_COLD_SDK = """
import sys, anyio
from pathlib import Path
from coordinator.core import Config, Coordinator
from coordinator.llm import claude_plan
from sources.settings import SourceSettings
from subagents.claude import ClaudeSettings

def loaded():
    return hasattr(sys.modules.get("anthropic"), "AsyncAnthropic")

async def plan_cold(claude):
    seen, done = [], anyio.Event()
    async def watch():
        while not done.is_set():
            seen.append(loaded())
            await anyio.sleep(0)
    async with anyio.create_task_group() as group:
        group.start_soon(watch)
        await anyio.sleep(0)
        await claude_plan("What is our refund policy?", claude, within_s=60)
        done.set()
    return seen

async def main():
    mode = sys.argv[1]
    claude = ClaudeSettings(api_key="test-key", base_url="http://127.0.0.1:9", max_retries=0, timeout_s=5)
    if mode == "plan":
        seen = await plan_cold(claude)
        print(seen.count(False))  # the watcher's turns while the SDK was not loaded
    else:
        config = Config(SourceSettings(data_dir=Path(sys.argv[2])), claude=claude)
        async with Coordinator(config, targets={}):
            print("anthropic.lib.tools.mcp" in sys.modules)

anyio.run(main)
"""


def _cold(*arguments: str) -> str:
    done = subprocess.run(
        [sys.executable, "-c", _COLD_SDK, *arguments],
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    assert done.returncode == 0, done.stderr
    return done.stdout.strip()


@pytest.mark.subprocess
def test_a_cold_model_sdk_loads_while_the_event_loop_runs() -> None:
    """Loaded at the first attribute read, the SDK blocked the loop for seconds (up to 12 s measured
    under load) outside the planning bound: the deadline was spent before any subagent ran."""
    assert int(_cold("plan")) > 1  # besides its first turn, before planning: the loop ran on


@pytest.mark.subprocess
def test_a_coordinator_in_claude_mode_loads_the_sdk_as_it_opens(tmp_path: Path) -> None:
    """So a coordinator's queries (a service's, a batch's, each chaos scenario) do not pay it from their deadlines."""
    assert _cold("open", str(tmp_path)) == "True"
