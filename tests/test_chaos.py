"""Chaos: a seeded subset with zero violations, and the checker catching deliberately broken parts."""

from __future__ import annotations

import contextlib
import dataclasses
import sqlite3
from collections.abc import Callable
from pathlib import Path

import anyio
import pytest

from coordinator import chaos
from coordinator.chaos import Scenario, run_scenario
from coordinator.planning.planner import plan_query
from sources.contract import ErrorCategory
from sources.settings import SourceSettings
from sources.world import ensure_world
from subagents.classify import Outcome
from subagents.claude import ClaudeSettings
from subagents.hooks import ToolCall
from subagents.policy import Recovery, RecoveryPolicy
from tests.fake_messages_api import (
    Conversations,
    FakeMessagesApi,
    Responder,
    obedient_subagent,
    plan_as_input,
    reckless_subagent,
    tool_use,
)

pytestmark = pytest.mark.anyio

STORY = chaos.QUERIES[0]
ERASED = chaos.QUERIES[4]


@pytest.fixture(scope="module")
def chaos_settings(tmp_path_factory: pytest.TempPathFactory) -> SourceSettings:
    """A world of its own: chaos refunds must not change what other tests read."""
    data_dir: Path = tmp_path_factory.mktemp("chaos")
    ensure_world(data_dir, 42)
    return SourceSettings(data_dir=data_dir, kb_warmup_ms=0, tickets_rate_per_second=1000, tickets_burst=1000)


async def run(scenario: Scenario, settings: SourceSettings, **options: object) -> chaos.ScenarioResult:
    with anyio.fail_after(60):
        return await run_scenario(scenario, settings, **options)  # type: ignore[arg-type]


async def test_a_seeded_subset_has_no_violations(chaos_settings: SourceSettings) -> None:
    for scenario in chaos.scenarios(12, seed=7):
        result = await run(scenario, chaos_settings)
        assert result.violations == [], (scenario, result.violations)


PROCESS_FAULTS = [
    ("orders", "kill_mid_call"), ("customers", "kill_during_initialize"), ("kb", "kill_before_initialize"),
    ("tickets", "truncated"), ("orders", "unknown_id"), ("kb", "garbage"), ("billing", "exit_mid_call"),
    ("orders", "restart_in_flight"), ("tickets", "flapping"),
]  # fmt: skip


@pytest.mark.subprocess
@pytest.mark.parametrize(("source", "fault"), PROCESS_FAULTS)
async def test_real_process_faults_have_no_violations(
    chaos_settings: SourceSettings, source: str, fault: str
) -> None:
    query = chaos.QUERIES[
        2
    ]  # names every source, with a CUST- id: only the customer's tasks wait for its lookup
    result = await run(
        Scenario(seed=11, query=query, faults={source: fault}, refund_amount=25.0), chaos_settings
    )
    assert result.violations == [], result.violations
    assert result.report is not None
    states = {task.source: task.state for task in result.report.tasks}
    if fault in ("restart_in_flight", "flapping"):
        assert states[source] == "ok"  # the respawned process answered
    else:
        assert states[source] in ("escalated", "deadline")  # a gap, annotated, not an abort
    # The customer's own tasks wait for its lookup: a failed lookup blocks them, and only them.
    waiting = {"orders", "tickets"} if states["customers"] != "ok" else set()
    assert all(states[other] == "blocked" for other in waiting)
    assert {s for s, state in states.items() if state == "ok"} >= set(states) - {source, "billing"} - waiting


async def test_a_policy_that_retries_business_errors_is_caught(chaos_settings: SourceSettings) -> None:
    broken = RecoveryPolicy(
        actions={**RecoveryPolicy().actions, ErrorCategory.BUSINESS: Recovery.RETRY},
        base_delay_s=0.01,
        call_timeout_s=0.5,
    )
    result = await run(
        Scenario(seed=3, query=ERASED, faults={}, refund_amount=None), chaos_settings, policy=broken
    )
    assert "no_blind_repeat" in {kind for kind, _ in result.violations}, result.violations


async def test_a_hook_that_drops_partial_results_is_caught(chaos_settings: SourceSettings) -> None:
    def drop_partials(call: ToolCall, outcome: Outcome) -> Outcome:
        error = outcome.error
        if error is None or not error.partial_results:
            return outcome
        return Outcome(
            outcome.kind, error.model_copy(update={"partial_results": []}), outcome.error_type, outcome.reopen
        )

    result = await run(
        Scenario(seed=4, query=STORY, faults={}, refund_amount=None),
        chaos_settings,
        post_call=(drop_partials,),
    )
    assert [kind for kind, _ in result.violations] == ["escalation_complete"], result.violations


async def test_a_missing_refund_hook_is_caught(chaos_settings: SourceSettings) -> None:
    result = await run(
        Scenario(seed=5, query=ERASED, faults={}, refund_amount=750.0), chaos_settings, pre_call=()
    )
    assert "refunds" in {kind for kind, _ in result.violations}, result.violations


async def test_a_refund_issued_outside_the_window_is_caught(
    chaos_settings: SourceSettings, tmp_path: Path
) -> None:
    """As if billing had broken the rule: a refund on ORD-12460 on the world's today, 101 days after delivery."""
    own = dataclasses.replace(chaos_settings, data_dir=tmp_path)  # a world of its own: the row stays here
    with contextlib.closing(sqlite3.connect(ensure_world(tmp_path, own.seed) / "billing.db")) as db:
        db.execute(
            "INSERT INTO refunds (id, order_id, amount, idempotency_key, issued_by, issued_on) "
            "VALUES ('RFD-59999', 'ORD-12460', 10.0, 'broken-billing', 'research-agent', '2026-11-01')"
        )
        db.commit()
    result = await run(Scenario(seed=6, query=ERASED, faults={}, refund_amount=5.0), own)
    assert result.violations == [
        (
            "refunds",
            "refunds issued outside the 60-day window after delivery: "
            "['RFD-59999 on ORD-12460 (2026-11-01, delivered 2026-07-23)']",
        )
    ]


async def test_the_same_seed_gives_the_same_scenarios() -> None:
    assert chaos.scenarios(30, seed=9) == chaos.scenarios(30, seed=9)
    assert chaos.scenarios(30, seed=9) != chaos.scenarios(30, seed=10)
    one = chaos.scenarios(5, seed=9)[3]
    assert chaos.scenario_from(one.seed) == one  # the replay command rebuilds exactly this scenario


# --- Claude mode: the same invariants whoever decides -------------------------------------------


@pytest.fixture
def claude_for(messages_api: Callable[..., FakeMessagesApi]) -> Callable[[Responder], ClaudeSettings]:
    """Claude's settings against a fake Messages API whose subagents answer as ``subagent`` does."""

    def start(subagent: Responder) -> ClaudeSettings:
        api = messages_api(default_subagent=subagent)
        return ClaudeSettings(api_key="test-key", base_url=api.base_url, max_retries=1, timeout_s=5)

    return start


async def test_a_seeded_subset_in_claude_mode_has_no_violations(
    chaos_settings: SourceSettings, claude_for: Callable[[Responder], ClaudeSettings]
) -> None:
    claude = claude_for(obedient_subagent)
    for scenario in chaos.scenarios(12, seed=7):
        result = await run(scenario, chaos_settings, claude=claude)
        assert result.violations == [], (scenario, result.violations)
        assert result.report is not None and result.report.planning.planner == "claude"
        assert any(
            task.model is not None and task.model.turns > 0 for task in result.report.tasks
        ), [  # the model drove the subagents; if not, how each task ended says why
            (task.id, task.state, task.model, task.decisions[-1:]) for task in result.report.tasks
        ]


async def test_the_checker_judges_the_plan_that_ran(chaos_settings: SourceSettings) -> None:
    """A lead agent that names its tasks its own way: each reported once, and no invariant broken."""
    query = chaos.QUERIES[0]
    renamed = tool_use(plan_as_input(plan_query(query), rename=lambda task: f"my_{task}"))
    api = FakeMessagesApi(Conversations(planner=[renamed]))
    try:
        claude = ClaudeSettings(api_key="test-key", base_url=api.base_url, max_retries=1, timeout_s=5)
        result = await run(
            Scenario(seed=5, query=query, faults={}, refund_amount=None), chaos_settings, claude=claude
        )
    finally:
        api.close()
    assert result.violations == [], result.violations
    assert result.report is not None and result.report.planning.planner == "claude"
    assert {task.id for task in result.report.tasks} == {f"my_{task}" for task in plan_query(query).tasks}


async def test_a_reckless_model_cannot_break_the_invariants(
    chaos_settings: SourceSettings, claude_for: Callable[[Responder], ClaudeSettings]
) -> None:
    """A model that repeats failed calls and tries a £900 refund in every billing subagent."""
    claude = claude_for(reckless_subagent)
    seen: list[str] = []
    # 1574527462: the side refund fails with partial results while the query's own refund subagent's
    # model tries issue_refund too; each escalation keeps its own task's partial results.
    chosen = [
        *chaos.scenarios(6, seed=3),
        Scenario(11, STORY, {"orders": "flaky"}, 900.0),
        chaos.scenario_from(1574527462),
    ]
    for scenario in chosen:
        result = await run(scenario, chaos_settings, claude=claude)
        assert result.violations == [], (scenario, result.violations)
        assert result.report is not None
        seen += [d.action for task in result.report.tasks for d in task.decisions]
    assert "hook_blocked" in seen and "refused" in seen  # the reckless calls were made, and stopped in code
