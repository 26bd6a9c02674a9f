"""Under load, slow down instead of giving up: pushback, a lost connection, and the breaker's rate.

The fleet's rules on their own (``SourceState``, ``Breaker``, ``Bulkheads``: no source, the time given),
then the collapse they must survive, for real: a third-party server (``tests/dropping_server.py``, its
own process over stdio) that drops its session under eight calls in flight at once.
"""

from __future__ import annotations

import random
import sys
from pathlib import Path

import anyio
import mcp
import pytest
from hypothesis import given
from hypothesis import strategies as st

from subagents.breaker import Breaker, BreakerState
from subagents.broker import CredentialBroker
from subagents.guard import (
    DEFAULT_RETRY_SHARE,
    LIMIT_CEILING,
    LIMIT_DECREASE,
    Bulkheads,
    CallEnd,
    LocalGuard,
    RetryBudget,
    SourceState,
)
from subagents.sessions.connection import Connections
from subagents.sessions.recording import RecordingTransport, Tape
from subagents.subagent import Runtime, SubagentReport, Task, run_subagent
from subagents.writes import EffectsTable, ToolEffects
from tests.conftest import PROJECT_ROOT, TEST_KEY
from tests.fakes import FakeClock

START = 1000.0


def test_one_lost_connection_is_one_failure_however_many_calls_it_failed() -> None:
    state = SourceState()
    first = state.record("customers", CallEnd.FAILED, START, connection="1:7:3")
    for _ in range(19):  # twenty calls in flight on one session, all failed by its loss
        verdict = state.record("customers", CallEnd.FAILED, START, connection="1:7:3")
    assert not first.loss_counted and verdict.loss_counted  # the first pays for the loss; not the rest
    assert verdict.allowed and state.breakers["customers"].state is BreakerState.CLOSED
    assert [failed for _, failed in state.breakers["customers"].calls] == [True]
    for session in range(4, 8):  # four more sessions lost, one after another: five losses open it
        verdict = state.record("customers", CallEnd.FAILED, START + 1, connection=f"1:7:{session}")
    assert not verdict.allowed and state.breakers["customers"].state is BreakerState.OPEN


def test_a_call_cut_by_the_deadline_or_pushed_back_is_no_failure() -> None:
    state = SourceState()
    for _ in range(10):
        state.record("kb", CallEnd.CUT, START)
        assert state.record("kb", CallEnd.PUSHED_BACK, START).allowed
    assert state.breakers["kb"].state is BreakerState.CLOSED
    assert state.counts()["pushbacks"] == {"kb": 10}


@given(outcomes=st.lists(st.booleans(), min_size=1, max_size=60), spacing=st.floats(0.0, 3.0))
def test_the_breaker_opens_on_a_failure_rate_over_its_window(outcomes: list[bool], spacing: float) -> None:
    """Open exactly when the window holds at least five failures and they are at least half its calls;
    a half-open probe's failure opens it again."""
    breaker, window = Breaker(), []
    for number, failed in enumerate(outcomes):
        now = START + number * spacing
        if breaker.state is not BreakerState.CLOSED:
            return  # what an open breaker does is its own test (test_subagent)
        breaker.record(failed, now)
        window = [(at, f) for at, f in [*window, (now, failed)] if at > now - breaker.window_s]
        failures = sum(f for _, f in window)
        should_open = failed and failures >= 5 and failures >= 0.5 * len(window)
        assert (breaker.state is BreakerState.OPEN) == should_open, (number, window)


def test_a_flaky_source_that_mostly_answers_stays_closed() -> None:
    """Every third call failing, for a minute: a consecutive count of five never comes, nor a rate of half."""
    breaker = Breaker()
    for number in range(600):
        breaker.record(number % 3 == 0, START + number * 0.1)
    assert breaker.state is BreakerState.CLOSED


def test_pushback_lowers_the_limit_and_answers_raise_it_again() -> None:
    state = SourceState()
    assert state.limit("tickets") == LIMIT_CEILING
    for count in range(1, 11):  # a second apart: each one lowers it
        verdict = state.record("tickets", CallEnd.PUSHED_BACK, START + count)
        assert verdict.limit == max(1, int(LIMIT_CEILING * LIMIT_DECREASE**count))
    before = state.limit("tickets")
    for _ in range(50):  # a burst within the second after: one signal, already taken
        state.record("tickets", CallEnd.PUSHED_BACK, START + 10.5)
    assert state.limit("tickets") == before and state.counts()["pushbacks"] == {"tickets": 60}
    low = state.limit("tickets")
    for _ in range(low):  # one limit's worth of answers: one more call at once
        state.record("tickets", CallEnd.ANSWERED, START)
    assert state.limit("tickets") == low + 1
    assert state.counts()["limits"] == {"tickets": low + 1}


@pytest.mark.anyio
async def test_a_process_holds_its_share_of_the_fleet_s_limit() -> None:
    bulkheads = Bulkheads(share=0.5)  # one of two workers
    bulkheads.limit_to("tickets", 4)
    inside, most = 0, 0

    async def call() -> None:
        nonlocal inside, most
        async with bulkheads.slot("tickets"):
            inside += 1
            most = max(most, inside)
            await anyio.sleep(0.01)
            inside -= 1

    with anyio.fail_after(5):
        async with anyio.create_task_group() as group:
            for _ in range(10):
                group.start_soon(call)
    assert most == 2
    bulkheads.limit_to("tickets", LIMIT_CEILING)  # recovered: no cap of its own left
    async with anyio.create_task_group() as group:
        for _ in range(10):
            group.start_soon(call)
    assert most == 10


# --- the collapse, for real ------------------------------------------------------------------------

SERVER = PROJECT_ROOT / "tests" / "dropping_server.py"
IN_FLIGHT = 8


async def _ask_while_it_drops(
    marker: Path, seed: int, recorded: bool
) -> tuple[list[SubagentReport], SourceState]:
    parameters = mcp.StdioServerParameters(
        command=sys.executable,
        args=[str(SERVER)],
        env={"DROP_UNDER": str(IN_FLIGHT), "DROP_MARKER": str(marker)},
    )
    # A fleet's budget with room for one retry: one lost session, one retry from it.
    state, clock = SourceState(budget=RetryBudget(DEFAULT_RETRY_SHARE, reserve_per_s=0.1)), FakeClock(START)
    effects = EffectsTable({"dropping": {"lookup": ToolEffects.of({"readOnlyHint": True})}})
    reports: list[SubagentReport] = []
    with anyio.fail_after(60):
        await _ask(parameters, state, clock, effects, seed, reports, recorded)
    return reports, state


async def _ask(
    parameters: object, state: SourceState, clock: FakeClock, effects: EffectsTable, seed: int,
    reports: list[SubagentReport], recorded: bool,
) -> None:  # fmt: skip
    async with Connections.opened({"dropping": lambda: parameters}) as connections:
        # A batch records every attempt (for its replays): a wrapper per call, over one session.
        transport = RecordingTransport(connections, Tape(clock)) if recorded else connections
        runtime = Runtime(
            connections=transport, broker=CredentialBroker(TEST_KEY), guard=LocalGuard(state), clock=clock,
            rng=random.Random(seed), effects=effects,
        )  # fmt: skip

        async def one(number: int) -> None:
            task = Task(f"lookup-{number}", "dropping", "lookup", {"key": f"k{number}"})
            reports.append(await run_subagent(task, runtime, deadline=clock.now() + 30))

        async with anyio.create_task_group() as group:
            for number in range(IN_FLIGHT):
                group.start_soon(one, number)


@pytest.mark.subprocess
@pytest.mark.parametrize("seed, recorded", [(1, False), (2, True), (3, True)])
def test_a_session_dropped_under_every_call_in_flight_opens_no_breaker(
    tmp_path: Path, seed: int, recorded: bool
) -> None:
    """Eight calls in flight when the server's process exits: all eight fail at once with the
    connection's loss, which the breaker counts once, so it stays closed, and the fleet's retry budget
    pays once (it has room for one retry); each call is retried on the source started again and
    answered. The same on every seed, with the batch's recording transport or without."""
    reports, state = anyio.run(_ask_while_it_drops, tmp_path / "dropped", seed, recorded)
    assert (tmp_path / "dropped").exists(), "the server never dropped its session"
    assert [report.state for report in reports] == ["ok"] * IN_FLIGHT
    assert all(report.attempts == 2 for report in reports)
    assert state.breakers["dropping"].state is BreakerState.CLOSED
    assert sum(failed for _, failed in state.breakers["dropping"].calls) == 1
    assert state.counts()["retries"] == {"dropping": 1} and state.counts()["retries_refused"] == {}
