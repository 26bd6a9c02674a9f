"""Every row of the policy table, against the real sources in memory, with time injected."""

from __future__ import annotations

import dataclasses
import random
import uuid
from collections.abc import AsyncIterator, Callable
from pathlib import Path
from typing import Any

import anyio
import pytest
from mcp.server import MCPServer
from mcp.server.mcpserver.exceptions import ToolError

from sources.faults import FaultSettings
from sources.settings import SourceSettings
from sources.store import Store
from sources.world import world_path
from subagents.breaker import Breakers, BreakerState
from subagents.broker import CredentialBroker, Grant
from subagents.classify import TextRule, contract_with_rules
from subagents.guard import LocalGuard
from subagents.policy import RecoveryPolicy
from subagents.sessions.connection import Connections
from subagents.subagent import Runtime, SubagentReport, Task, run_subagent
from subagents.writes import Approval
from tests.conftest import MODULES, TEST_KEY
from tests.fakes import FakeClock

pytestmark = pytest.mark.anyio

GRANTS = (Grant("billing:read", "refund research"), Grant("billing:refund", "refund research"))


@pytest.fixture
def clock() -> FakeClock:
    return FakeClock()


@pytest.fixture
async def runtime(settings: SourceSettings, clock: FakeClock) -> AsyncIterator[Callable[..., Runtime]]:
    """Build a runtime over in-memory sources; ``servers`` overrides a source's server."""
    opened: list[Any] = []

    async def build(servers: dict[str, Callable[[], MCPServer]] | None = None, **options: Any) -> Runtime:
        made = {source: module.create_server(settings) for source, module in MODULES.items()}
        targets = {source: (lambda server=server: server) for source, server in made.items()}
        targets.update(servers or {})
        manager = Connections.opened(targets)
        connections = await manager.__aenter__()
        opened.append(manager)
        options.setdefault("broker", CredentialBroker(TEST_KEY, grants=GRANTS))
        return Runtime(connections=connections, clock=clock, rng=random.Random(7), **options)

    yield build  # type: ignore[misc]
    for manager in reversed(opened):
        await manager.__aexit__(None, None, None)


async def run(
    runtime: Runtime,
    source: str,
    tool: str,
    arguments: dict[str, Any],
    *,
    purpose: str = "research",
    budget: float = 30.0,
) -> SubagentReport:
    task = Task(id=f"{source}.{tool}", source=source, tool=tool, arguments=arguments, purpose=purpose)
    return await run_subagent(task, runtime, deadline=runtime.clock.now() + budget)


def actions(report: SubagentReport) -> list[str]:
    return [decision.action for decision in report.decisions]


async def test_ok(runtime: Callable[..., Any]) -> None:
    report = await run(
        await runtime(), "customers", "customer_lookup", {"identifier": "jane.doe@example.com"}
    )
    assert report.state == "ok" and report.attempts == 1 and report.decisions == []
    assert report.results[0]["id"] == "CUST-00042"


async def test_valid_empty_is_accepted_and_never_retried(runtime: Callable[..., Any]) -> None:
    report = await run(await runtime(), "orders", "search_orders", {"customer_id": "CUST-00077"})
    assert report.state == "empty" and report.attempts == 1
    assert actions(report) == ["accept_empty"]
    assert "executed successfully" in (report.message or "")


async def test_transient_honours_retry_after_then_succeeds(
    runtime: Callable[..., Any], settings: SourceSettings, clock: FakeClock, tmp_path: Path
) -> None:
    fresh = dataclasses.replace(settings, data_dir=tmp_path, kb_warmup_ms=1500)  # its index is not built yet
    warming = MODULES["kb"].create_server(fresh, clock=clock)
    report = await run(await runtime({"kb": lambda: warming}), "kb", "search_policies", {"query": "refunds"})
    assert report.state == "ok" and report.attempts == 2
    assert actions(report) == ["retry"]
    assert report.decisions[0].backoff_ms == 1500 and report.decisions[0].category == "transient"
    assert clock.sleeps == [(1000.0, 1.5)]


async def test_transient_retries_are_bounded_with_full_jitter(
    runtime: Callable[..., Any], clock: FakeClock
) -> None:
    report = await run(
        await runtime(), "customers", "customer_lookup", {"identifier": "CUST-00042", "mode": "timeout"}
    )
    assert report.state == "escalated" and report.attempts == 4
    assert actions(report) == ["retry", "retry", "retry", "give_up"]
    assert [
        round(seconds, 6) <= ceiling for (_, seconds), ceiling in zip(clock.sleeps, [1, 2, 4], strict=True)
    ] == [True] * 3
    escalation = report.escalation
    assert escalation is not None
    assert escalation.error_category == "transient" and escalation.is_retryable is True
    assert escalation.attempted_query.arguments == {"identifier": "CUST-00042", "mode": "timeout"}
    assert escalation.partial_results == [] and escalation.attempts == 4


async def test_never_sleeps_past_the_deadline(runtime: Callable[..., Any], clock: FakeClock) -> None:
    slow = RecoveryPolicy(base_delay_s=100, max_delay_s=100)
    report = await run(
        await runtime(policy=slow), "customers", "customer_lookup", {"identifier": "CUST-00042", "mode": "timeout"},
        budget=0.5,
    )  # fmt: skip
    assert report.state == "escalated"
    assert all(start + seconds < 1000.5 for start, seconds in clock.sleeps)
    assert report.decisions[-1].action == "give_up" and "deadline" in report.decisions[-1].reason


async def test_validation_is_repaired_and_called_afresh(runtime: Callable[..., Any]) -> None:
    report = await run(
        await runtime(), "customers", "customer_lookup", {"identifier": " Jane.Doe@Example.com "}
    )
    assert report.state == "ok" and report.attempts == 2
    assert actions(report) == ["repair"] and "identifier" in report.decisions[0].reason
    assert report.attempted_query.arguments == {"identifier": "jane.doe@example.com"}


async def test_swapped_dates_and_a_lowercase_sku_are_repaired(runtime: Callable[..., Any]) -> None:
    arguments = {
        "customer_id": "cust-42",
        "sku": "sku-4417-blk",
        "placed_after": "2026-10-30",
        "placed_before": "01/10/2026",
    }
    report = await run(await runtime(), "orders", "search_orders", arguments)
    assert report.state == "ok", report
    assert report.attempted_query.arguments == {
        "customer_id": "CUST-00042", "sku": "SKU-4417-BLK", "placed_after": "2026-10-01", "placed_before": "2026-10-30",
    }  # fmt: skip
    assert [order["id"] for order in report.results] == ["ORD-10023"]


async def test_validation_without_a_repair_escalates(runtime: Callable[..., Any]) -> None:
    arguments = {"order_id": "ORD-10031", "amount": 45.001}
    report = await run(await runtime(), "billing", "refund_eligibility", arguments, purpose="refund research")
    assert report.state == "escalated" and actions(report)[-1] == "escalate"
    assert report.escalation is not None and report.escalation.error_category == "validation"
    assert "no repair applies" in report.decisions[-1].reason


async def test_business_escalates_at_once(runtime: Callable[..., Any]) -> None:
    report = await run(await runtime(), "customers", "customer_lookup", {"identifier": "CUST-00013"})
    assert report.state == "escalated" and report.attempts == 1 and actions(report) == ["escalate"]
    escalation = report.escalation
    assert (
        escalation is not None
        and escalation.error_category == "business"
        and escalation.is_retryable is False
    )
    assert escalation.partial_results == [] and escalation.source == "customers"
    wire = escalation.to_wire()
    assert wire["attempted_query"] == {
        "tool": "customer_lookup",
        "arguments": {"identifier": "CUST-00013", "mode": "success"},
    }


async def test_permission_is_elevated_by_the_broker_then_succeeds(runtime: Callable[..., Any]) -> None:
    report = await run(
        await runtime(),
        "billing",
        "refund_eligibility",
        {"order_id": "ORD-10023", "amount": 750},
        purpose="refund research",
    )
    # Elevated to billing:read, then the £750 is refused by the business rule, with the assessment kept.
    assert actions(report) == ["elevate", "escalate"] and report.attempts == 2
    escalation = report.escalation
    assert escalation is not None and escalation.error_category == "business"
    assert (
        escalation.partial_results[0]["id"] == "ORD-10023" and escalation.partial_results[0]["paid"] == 750.0
    )


async def test_permission_without_a_grant_escalates(runtime: Callable[..., Any]) -> None:
    report = await run(
        await runtime(), "billing", "list_invoices", {"customer_id": "CUST-00042"}, purpose="curiosity"
    )
    assert report.state == "escalated" and actions(report) == ["escalate"] and report.attempts == 1
    assert "deny by default" in report.decisions[0].reason
    assert report.escalation is not None and report.escalation.error_category == "permission"


async def test_the_refund_hook_blocks_before_the_call_leaves(
    runtime: Callable[..., Any], settings: SourceSettings
) -> None:
    key = f"hook-{uuid.uuid4().hex[:12]}"
    report = await run(
        await runtime(), "billing", "issue_refund", {"order_id": "ORD-10023", "amount": 750, "idempotency_key": key},
        purpose="refund research",
    )  # fmt: skip
    assert report.state == "escalated" and report.attempts == 0 and actions(report) == ["hook_blocked"]
    assert report.escalation is not None and report.escalation.error_category == "business"
    assert report.escalation.attempted_query.arguments["amount"] == 750
    billing = Store(world_path(settings.data_dir, settings.seed) / "billing.db")
    assert billing.rows("SELECT id FROM refunds WHERE idempotency_key = ?", (key,)) == []


async def test_a_lost_answer_is_retried_without_refunding_twice(
    runtime: Callable[..., Any], settings: SourceSettings
) -> None:
    """The refund runs, its answer is lost, the call times out; the retry carries the same key."""
    losing = MODULES["billing"].create_server(settings.with_faults(FaultSettings(lose=1)))
    healthy = MODULES["billing"].create_server(settings)
    sessions = iter([losing, healthy])
    key = f"lost-{uuid.uuid4().hex[:12]}"
    broker = CredentialBroker(TEST_KEY, base_scopes=frozenset({"billing:refund"}))
    rt = await runtime(
        {"billing": lambda: next(sessions)}, policy=RecoveryPolicy(call_timeout_s=0.5), broker=broker,
        approvals=(Approval("issue_refund", "ORD-10008"),),
    )  # fmt: skip
    report = await run(
        rt, "billing", "issue_refund", {"order_id": "ORD-10008", "amount": 1.25, "idempotency_key": key}
    )
    # Keyed, so safe to resend: billing replays the key and pays nothing twice.
    assert actions(report) == ["approved", "retry"] and report.state == "ok", report
    assert report.decisions[1].reason.startswith("retry 1/3 after timeout: ")
    assert report.results[0]["replayed"] is True
    billing = Store(world_path(settings.data_dir, settings.seed) / "billing.db")
    assert len(billing.rows("SELECT id FROM refunds WHERE idempotency_key = ?", (key,))) == 1


async def test_the_breaker_opens_fails_fast_and_probes(runtime: Callable[..., Any], clock: FakeClock) -> None:
    breakers = Breakers(failure_threshold=5, cooldown_s=30)
    rt = await runtime(guard=LocalGuard.of(breakers))
    timeout = {"identifier": "CUST-00042", "mode": "timeout"}
    first = await run(rt, "customers", "customer_lookup", timeout)  # 4 transient failures
    second = await run(rt, "customers", "customer_lookup", timeout)  # the 5th opens the circuit
    assert first.attempts == 4 and actions(first) == ["retry", "retry", "retry", "give_up"]
    assert second.attempts == 1 and actions(second) == ["breaker_open"]
    assert breakers["customers"].state is BreakerState.OPEN

    refused = await run(rt, "customers", "customer_lookup", {"identifier": "CUST-00042"})
    assert refused.attempts == 0 and actions(refused) == ["breaker_open"]
    assert refused.escalation is not None and refused.escalation.error_category == "transient"

    clock.advance(30)
    probe = await run(rt, "customers", "customer_lookup", {"identifier": "CUST-00042"})
    assert probe.state == "ok" and breakers["customers"].state is BreakerState.CLOSED
    assert breakers["customers"].transitions == [
        (BreakerState.CLOSED, BreakerState.OPEN), (BreakerState.OPEN, BreakerState.HALF_OPEN),
        (BreakerState.HALF_OPEN, BreakerState.CLOSED),
    ]  # fmt: skip


async def test_a_cancelled_probe_lets_the_next_caller_probe(
    runtime: Callable[..., Any], clock: FakeClock, settings: SourceSettings
) -> None:
    """A half-open breaker's one probe, cut off by the query's deadline, must not shut the source out."""
    hung = MODULES["customers"].create_server(settings.with_faults(FaultSettings(hang=1)))
    breakers = Breakers(failure_threshold=1, cooldown_s=30)
    rt = await runtime({"customers": lambda: hung}, guard=LocalGuard.of(breakers))
    breaker = breakers["customers"]
    breaker.record(source_failed=True, now=clock.now())
    clock.advance(30)  # the cool-down is over: the next call is the probe
    with anyio.move_on_after(0.5) as cancelled:  # the query's deadline, cutting the hung probe short
        await run(rt, "customers", "customer_lookup", {"identifier": "CUST-00042"})
    assert cancelled.cancelled_caught
    assert breaker.state is BreakerState.HALF_OPEN and not breaker.probing
    assert breaker.allow(clock.now())  # the next caller may probe


async def test_the_classifier_is_told_which_source_answered(runtime: Callable[..., Any]) -> None:
    """A source's own text rules decide its errors: the subagent names the source it called."""

    def third_party() -> MCPServer:
        server = MCPServer("kb")

        @server.tool()
        def search_policies(query: str) -> str:
            raise ToolError(f"ENOENT: no such file or directory, open '/srv/{query}.md'")

        return server

    classifier = contract_with_rules({"kb": (TextRule.of("ENOENT", "validation"),)})
    rt = await runtime(servers={"kb": third_party}, classifier=classifier)
    report = await run(rt, "kb", "search_policies", {"query": "refunds"})
    escalation = report.escalation
    assert escalation is not None and escalation.error_category == "validation"
    assert "the kb source's own rule /ENOENT/ made it validation" in escalation.message


@pytest.fixture(params=["asyncio", "trio"])
def anyio_backend(request: pytest.FixtureRequest) -> str:
    """The subagent is written for anyio, not asyncio: every test here runs on both backends."""
    return str(request.param)
