"""The subagent against real source processes: killed mid-call, hung, gone, restarted, never started.

A stdio source is either spawned (``python -m sources.NAME``) or forked from the fork server
(``sources.processes.forked``, what `research ask` uses): each process scenario runs against both.
"""

from __future__ import annotations

import contextlib
import random
import socket
from collections.abc import Callable
from typing import Any

import anyio
import pytest

from sources.faults import FaultSettings
from sources.settings import SourceSettings
from subagents.broker import CredentialBroker
from subagents.policy import RecoveryPolicy
from subagents.sessions.connection import Connections, Target, forked_target, http_target, stdio_target
from subagents.subagent import Runtime, SubagentReport, Task, run_subagent
from tests.conftest import TEST_KEY, HttpSource
from tests.fakes import FakeClock

pytestmark = [pytest.mark.anyio, pytest.mark.subprocess]

BOUND_S = 60  # every scenario ends well within this, or the test fails rather than hangs


async def run_once(
    targets: dict[str, Target], task: Task, policy: RecoveryPolicy | None = None
) -> tuple[SubagentReport, Connections]:
    clock = FakeClock()  # back-off sleeps return at once; call timeouts stay real
    with anyio.fail_after(BOUND_S):
        async with Connections.opened(targets) as connections:
            runtime = Runtime(
                connections=connections, broker=CredentialBroker(TEST_KEY), policy=policy or RecoveryPolicy(),
                clock=clock, rng=random.Random(1),
            )  # fmt: skip
            report = await run_subagent(task, runtime, deadline=clock.now() + 30)
    return report, connections


def in_turn(*targets: Target) -> Target:
    """A target that is a different process each time it is (re)spawned: the last one stays."""
    remaining = list(targets)

    def next_target() -> Any:
        return (remaining.pop(0) if len(remaining) > 1 else remaining[0])()

    return next_target


def spawned(source: str, settings: SourceSettings, faults: FaultSettings | None = None) -> Target:
    return stdio_target(source, settings, *(("--faults", faults.spec()) if faults else ()))


def forked(source: str, settings: SourceSettings, faults: FaultSettings | None = None) -> Target:
    return forked_target(source, settings.with_faults(faults or FaultSettings()))


stdio_launches = pytest.mark.parametrize("launch", [spawned, forked], ids=["spawned", "forked"])


def actions(report: SubagentReport) -> list[str]:
    return [decision.action for decision in report.decisions]


@stdio_launches
async def test_a_source_killed_mid_call_is_respawned_and_the_retry_succeeds(
    settings: SourceSettings, launch: Callable[..., Target]
) -> None:
    target = in_turn(launch("orders", settings, FaultSettings(crash=1)), launch("orders", settings))
    task = Task("orders", "orders", "search_orders", {"customer_id": "CUST-00042"})
    report, connections = await run_once({"orders": target}, task)
    assert report.state == "ok" and report.attempts == 2, report
    assert actions(report) == ["retry"] and "connection_closed" in report.decisions[0].reason
    assert connections["orders"].opened == 2  # the dead process was replaced
    assert [order["id"] for order in report.results] == ["ORD-10031", "ORD-10023", "ORD-10008"]


@stdio_launches
async def test_a_hung_source_is_bounded_by_the_call_timeout(
    settings: SourceSettings, launch: Callable[..., Target]
) -> None:
    task = Task("kb", "kb", "search_policies", {"query": "refunds"})
    policy = RecoveryPolicy(call_timeout_s=0.5, max_retries=1)
    report, _ = await run_once({"kb": launch("kb", settings, FaultSettings(hang=1))}, task, policy)
    assert report.state == "escalated" and report.attempts == 2
    assert actions(report) == ["retry", "give_up"] and "timeout" in report.decisions[0].reason
    assert report.escalation is not None and report.escalation.error_category == "transient"
    assert report.escalation.partial_results == []


def _free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return int(probe.getsockname()[1])


async def test_nothing_listening_is_a_transient_escalation() -> None:
    task = Task("tickets", "tickets", "search_tickets", {"query": "refund"})
    report, _ = await run_once({"tickets": http_target(f"http://127.0.0.1:{_free_port()}/mcp")}, task)
    assert report.state == "escalated" and report.attempts == 4
    assert actions(report) == ["retry", "retry", "retry", "give_up"]
    assert "connection_refused" in report.decisions[0].reason
    assert report.escalation is not None and "could not be reached" in report.escalation.message


@pytest.mark.parametrize(
    "target",
    [
        lambda settings: stdio_target("no_such_source", settings),
        lambda settings: forked_target("customers", settings.with_faults(FaultSettings(die_at="start"))),
    ],
    ids=["spawned-no-such-module", "forked-dies-at-start"],
)
async def test_a_source_that_cannot_start_is_a_transient_escalation(
    settings: SourceSettings, target: Callable[[SourceSettings], Target]
) -> None:
    task = Task("nowhere", "customers", "customer_lookup", {"identifier": "CUST-00042"})
    report, _ = await run_once({"customers": target(settings)}, task, RecoveryPolicy(max_retries=1))
    assert report.state == "escalated" and report.escalation is not None
    assert report.escalation.error_category == "transient" and actions(report) == ["retry", "give_up"]


async def test_a_forked_source_is_named_in_ps_and_leaves_when_its_session_closes(
    settings: SourceSettings,
) -> None:
    """Nothing outlives the session: the source reads the end of its input and exits, hung call or not."""
    import psutil

    task = Task("kb", "kb", "search_policies", {"query": "refunds"})
    policy = RecoveryPolicy(call_timeout_s=0.3, max_retries=0)
    with anyio.fail_after(BOUND_S):
        async with Connections.opened({"kb": forked("kb", settings, FaultSettings(hang=1))}) as connections:
            clock = FakeClock()
            runtime = Runtime(
                connections=connections, broker=CredentialBroker(TEST_KEY), policy=policy, clock=clock,
                rng=random.Random(1),
            )  # fmt: skip
            report = await run_subagent(task, runtime, deadline=clock.now() + 30)
            named = []
            for child in psutil.Process().children(recursive=True):
                with contextlib.suppress(psutil.Error):  # another test's process, gone meanwhile
                    if "research-source sources.kb" in " ".join(child.cmdline()):
                        named.append(child)
            assert report.state == "escalated" and len(named) == 1  # the hung call is still in the source
    _, alive = psutil.wait_procs(named, timeout=5)
    assert alive == []


async def test_a_session_dropped_mid_call_is_reopened_over_http(
    http_source: Callable[..., HttpSource],
) -> None:
    crashing = http_source("customers", "--faults", "crash=1", wait=False)
    healthy = http_source("customers", wait=False)  # the two start side by side
    target = in_turn(http_target(crashing.ready().url), http_target(healthy.ready().url))
    task = Task("customers", "customers", "customer_lookup", {"identifier": "CUST-00042"})
    report, connections = await run_once({"customers": target}, task)
    assert report.state == "ok" and report.attempts == 2 and actions(report) == ["retry"]
    assert "connection_closed" in report.decisions[0].reason
    assert connections["customers"].opened == 2


async def test_a_source_restarted_between_calls_is_used_again(http_source: Callable[..., HttpSource]) -> None:
    first = http_source("customers")
    task = Task("customers", "customers", "customer_lookup", {"identifier": "CUST-00042"})
    clock = FakeClock()
    with anyio.fail_after(BOUND_S):
        async with Connections.opened({"customers": http_target(first.url)}) as connections:
            runtime = Runtime(
                connections=connections, broker=CredentialBroker(TEST_KEY), clock=clock, rng=random.Random(1)
            )
            before = await run_subagent(task, runtime, deadline=clock.now() + 30)
            first.stop()
            http_source("customers", "--port", str(first.port))  # restarted where it was
            after = await run_subagent(task, runtime, deadline=clock.now() + 30)
    assert before.state == "ok" and after.state == "ok"
    assert after.results == before.results
