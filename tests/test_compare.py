"""`research compare`: the generic mode is the real coordinator with one substitution, and each figure
is right on scenarios whose right value is known by hand."""

from __future__ import annotations

import json
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import anyio
import pytest
from mcp.types import CallToolResult, TextContent

from coordinator.chaos.catalogue import Scenario, scenario_from
from coordinator.chaos.history import History, ScenarioResult
from coordinator.chaos.runner import run_scenario
from coordinator.compare.boundary import GENERIC_MESSAGE, Boundary
from coordinator.compare.figures import Figures, figures_of
from coordinator.compare.runner import MODES, run_mode, worlds
from coordinator.planning.planner import plan_query
from sources.contract import EmptyResult, ErrorCategory, ResultPage, ToolError
from sources.settings import SourceSettings
from sources.tool_failure import to_call_tool_result
from subagents.classify import Outcome
from subagents.claude import ClaudeSettings
from subagents.hooks import ToolCall
from subagents.policy import RecoveryPolicy
from tests.conftest import PROJECT_ROOT
from tests.fake_messages_api import Conversations, FakeMessagesApi, last_tool_results

pytestmark = pytest.mark.anyio
CLI = "from coordinator.cli import app; app()"  # `research`, as a user runs it

BUSINESS_REFUSAL = "Investigate CUST-00013: orders and tickets"  # a closed account: customer_lookup refuses
NOBODY = "Who is new.customer@example.com? Any orders or open tickets?"  # a valid empty result
REFUND_750 = "Investigate jane.doe@example.com: recent orders, open tickets, and whether a £750 refund on ORD-10023 is allowed"
INVOICES = "Investigate CUST-00042: recent orders, open tickets, invoices, and whether a £45 refund on ORD-10031 is allowed"


@pytest.fixture(scope="module")
def mode_worlds() -> Iterator[dict[str, SourceSettings]]:
    with worlds() as settings:
        yield settings[0]


async def figures(
    query: str, mode: str, settings: dict[str, SourceSettings], refund: float | None = None
) -> Figures:
    chosen = Scenario(seed=5, query=query, faults={}, refund_amount=refund)
    with anyio.fail_after(30):
        return await run_mode(mode, chosen, settings[mode])


def test_the_generic_boundary_passes_results_and_says_operation_failed_for_anything_else() -> None:
    boundary = Boundary(generic=True)
    page = ResultPage[dict](result_count=1, results=[{"id": "x"}])  # type: ignore[type-var]
    assert boundary.result(to_call_tool_result(page)).kind == "ok"
    for answer in (
        to_call_tool_result(EmptyResult(message="nothing matched")),
        to_call_tool_result(ToolError.of(ErrorCategory.BUSINESS, "closed", partial_results=[{"id": 1}])),
        CallToolResult(content=[TextContent(type="text", text="boom")], is_error=True),
    ):
        seen = boundary.result(answer)
        assert seen.error is not None and seen.error.description == GENERIC_MESSAGE
        assert seen.error.partial_results is None and seen.error.attempted_query is None
    assert boundary.exception(ConnectionResetError("gone")).reopen  # the transport's knowledge stays
    assert [truth.kind for truth in boundary.truths] == ["ok", "empty", "error", "error", "error"]
    assert (
        boundary.truths[2].error is not None
        and boundary.truths[2].error.error_category is ErrorCategory.BUSINESS
    )


async def test_a_business_refusal_is_sent_once_by_the_contract_and_retried_blindly_by_generic(
    mode_worlds: dict[str, SourceSettings],
) -> None:
    structured = await figures(BUSINESS_REFUSAL, "structured", mode_worlds)
    generic = await figures(BUSINESS_REFUSAL, "generic", mode_worlds)
    # customer_lookup refuses; orders and tickets are blocked on it. The policy allows 3 retries.
    assert (structured.calls_sent, structured.calls_wasted) == (1, 0)
    assert (generic.calls_sent, generic.calls_wasted) == (4, 3)
    assert (structured.escalations, structured.escalations_routed) == (1, 1)  # escalate to a manager
    assert (generic.escalations, generic.escalations_routed) == (1, 0)  # "retry later": wrong
    assert structured.tasks_answered == generic.tasks_answered == 0


async def test_a_valid_empty_result_is_an_answer_not_a_failure(
    mode_worlds: dict[str, SourceSettings],
) -> None:
    structured = await figures(NOBODY, "structured", mode_worlds)
    generic = await figures(NOBODY, "generic", mode_worlds)
    assert (structured.questions_answered, structured.tasks_answered, structured.calls_sent) == (1, 3, 3)
    assert structured.empties_reported_as_failures == structured.calls_wasted == 0
    # Two of the three lookups truly find nothing: generic retries each 3 times and reports both as failed.
    assert (generic.empties_reported_as_failures, generic.calls_wasted, generic.calls_sent) == (2, 6, 9)
    assert generic.questions_answered == 0


async def test_partial_results_are_kept_only_by_the_contract(mode_worlds: dict[str, SourceSettings]) -> None:
    structured = await figures(REFUND_750, "structured", mode_worlds)
    generic = await figures(REFUND_750, "generic", mode_worlds)
    assert structured.partial_results_kept == 1  # the eligibility assessment billing refused with
    assert generic.partial_results_kept == 0
    assert (structured.calls_wasted, generic.calls_wasted) == (0, 3)


async def test_permission_is_elevated_by_the_contract_and_wasted_by_generic(
    mode_worlds: dict[str, SourceSettings],
) -> None:
    structured = await figures(INVOICES, "structured", mode_worlds)
    generic = await figures(INVOICES, "generic", mode_worlds)
    assert (structured.questions_answered, structured.tasks_answered, structured.calls_wasted) == (1, 6, 0)
    assert generic.calls_wasted == 3 and generic.tasks_answered == 4 and generic.escalations_routed == 0


async def test_generic_abort_abandons_the_question_at_the_first_failed_branch(
    mode_worlds: dict[str, SourceSettings],
) -> None:
    aborted = await figures(REFUND_750, "generic-abort", mode_worlds)
    assert (aborted.questions_answered, aborted.tasks_answered, aborted.escalations) == (0, 0, 0)
    assert aborted.calls_sent >= 1


async def test_no_refund_above_the_limit_reaches_billing_in_any_mode(
    mode_worlds: dict[str, SourceSettings],
) -> None:
    for mode in MODES:
        assert (await figures(NOBODY, mode, mode_worlds, refund=750.0)).refunds_above_limit_attempted == 0


@pytest.mark.parametrize("seed", [11, 23, 42, 97, 1234])
async def test_both_modes_see_the_same_faults_until_their_decisions_diverge(
    seed: int, mode_worlds: dict[str, SourceSettings]
) -> None:
    """Same seed, same calls with the same true outcomes, up to the first failure only the contract
    tells apart (the modes decide alike on results and on transient faults: report, or retry)."""
    chosen = scenario_from(seed)
    chosen = Scenario(
        chosen.seed,
        chosen.query,
        {s: f for s, f in chosen.faults.items() if f in ("flaky", "lost_answer", "oversized")},
        None,
    )
    runs = {}
    for mode in ("structured", "generic"):
        boundary = Boundary(generic=mode == "generic")
        with anyio.fail_after(30):
            result = await run_scenario(chosen, mode_worlds[mode], classifier=boundary)
        runs[mode] = [
            (
                call.task,
                call.tool,
                call.arguments,
                truth.kind,
                truth.error.error_category if truth.error else None,
            )
            for call, truth in zip(result.history.calls, boundary.truths, strict=True)
        ]
    for task in {call[0] for call in runs["structured"]}:
        structured = [call for call in runs["structured"] if call[0] == task]
        generic = [call for call in runs["generic"] if call[0] == task]
        alike = 0
        for call in structured:
            alike += 1
            if call[3] == "empty" or call[4] not in (None, ErrorCategory.TRANSIENT):
                break  # from here on the modes decide differently
        assert generic[:alike] == structured[:alike], f"seed {seed}, task {task}"


def test_research_compare_prints_json_and_draws_its_chart(tmp_path: Path) -> None:
    chart = tmp_path / "compare.png"
    done = subprocess.run(
        [sys.executable, "-c", CLI, "compare", "--scenarios", "2", "--seed", "3", "--json", "--plot", str(chart)],
        cwd=PROJECT_ROOT, capture_output=True, text=True, timeout=120,
    )  # fmt: skip
    assert done.returncode == 0, done.stderr
    figures = json.loads(done.stdout)
    assert (figures["scenarios"], figures["seed"], set(figures["modes"])) == (2, 3, set(MODES))
    for mode in MODES:
        assert {
            "tasks_answered",
            "calls_wasted",
            "partial_results_kept",
            "escalations_routed",
            "questions_answered",
        } <= set(figures["modes"][mode])
    assert chart.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"


def test_a_plot_that_is_not_png_is_a_usage_error() -> None:
    done = subprocess.run(
        [sys.executable, "-c", CLI, "compare", "--plot", "chart.jpg"],
        cwd=PROJECT_ROOT, capture_output=True, text=True, timeout=60,
    )  # fmt: skip
    assert (
        done.returncode == 2 and "--plot takes a .png file" in done.stderr and "Traceback" not in done.stderr
    )


@pytest.mark.parametrize("where", ["missing/deeper/compare.png", "a-folder.png"])
def test_a_plot_it_would_have_to_make_a_folder_for_or_that_is_a_folder_is_refused(
    tmp_path: Path, where: str
) -> None:
    """--plot writes into a folder that is there: a missing one is never created (a typo'd path, a
    folder somewhere it should not be), and a folder is no file to write."""
    (tmp_path / "a-folder.png").mkdir()
    done = subprocess.run(
        [sys.executable, "-c", CLI, "compare", "--scenarios", "1", "--plot", str(tmp_path / where)],
        cwd=PROJECT_ROOT, capture_output=True, text=True, timeout=120,
    )  # fmt: skip
    assert done.returncode == 2 and done.stdout == "", done.stderr
    (line,) = done.stderr.strip().splitlines()
    assert line.startswith("error: --plot ") and "Traceback" not in done.stderr, line
    assert sorted(path.name for path in tmp_path.iterdir()) == ["a-folder.png"]  # no folder made
    assert list((tmp_path / "a-folder.png").iterdir()) == []


async def test_in_claude_mode_only_the_contract_tells_the_model_what_failed(
    mode_worlds: dict[str, SourceSettings],
) -> None:
    """The scripted Messages API plays the model. Structured: the refusal reaches it as a business
    error it must not repeat. Generic: "Operation failed" is all there is, so the code retries it to
    the cap and gives up, as the generic policy does; the model never learns why."""
    import anthropic.lib.tools.mcp  # noqa: F401  (loaded before the clock runs: it takes seconds, once)

    seen: dict[str, list[dict[str, object]]] = {}
    calls: dict[str, int] = {}
    for mode in ("generic", "structured"):
        api = FakeMessagesApi(Conversations())
        try:
            claude = ClaudeSettings(api_key="test-key", base_url=api.base_url, max_retries=1, timeout_s=5)
            chosen = Scenario(seed=5, query=BUSINESS_REFUSAL, faults={}, refund_amount=None)
            with anyio.fail_after(30):
                calls[mode] = (await run_mode(mode, chosen, mode_worlds[mode], claude)).calls_sent
            assert api.script_errors == []
            replies = [
                block for request in api.requests_of("customer") for block in last_tool_results(request)
            ]
            seen[mode] = [json.loads(block["content"][0]["text"]) for block in replies]
        finally:
            api.close()
    assert calls == {"generic": 4, "structured": 1}
    assert seen["structured"] and seen["structured"][0]["errorCategory"] == "business"
    assert not any("errorCategory" in reply for reply in seen["generic"])


def test_a_generic_failure_reads_to_a_model_as_the_anti_pattern_sends_it() -> None:
    answer = ToolError.of(ErrorCategory.TRANSIENT, GENERIC_MESSAGE)
    shown = Boundary(generic=True).for_model(answer)
    assert shown.is_error and json.loads(shown.content[0].text) == {
        "isError": True,
        "message": "Operation failed",
    }
    contract = Boundary(generic=False).for_model(answer)
    assert json.loads(contract.content[0].text)["errorCategory"] == "transient"


def test_a_refund_above_the_limit_that_reached_billing_is_counted() -> None:
    """Fed by hand: the figure counts issue_refund calls above the limit in the history, nothing else."""
    plan = plan_query(NOBODY)
    history = History()
    record = history.recorder()
    ok = Outcome("ok", ResultPage[dict](result_count=1, results=[{"id": "RFD-1"}]))  # type: ignore[type-var]
    for amount, tool in ((750.0, "issue_refund"), (45.0, "issue_refund"), (900.0, "refund_eligibility")):
        record(ToolCall("billing", tool, {"order_id": "ORD-10008", "amount": amount}, 1, "refund"), ok)
    result = ScenarioResult(
        scenario=Scenario(seed=1, query=NOBODY, faults={}, refund_amount=750.0), plan=plan, report=None,
        history=history, elapsed_s=0.5, refunds=[], refund_key=None, leaked_processes=[], leaked_sockets=0,
        policy=RecoveryPolicy(),
    )  # fmt: skip
    counted = figures_of(result, [ok, ok, ok], [])
    assert (counted.refunds_above_limit_attempted, counted.calls_sent, counted.calls_wasted) == (1, 3, 0)
    assert counted.questions_answered == counted.tasks_answered == 0 and counted.wall_s == 0.5
