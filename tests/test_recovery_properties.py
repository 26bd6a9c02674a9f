"""Property tests of the recovery loop over random sequences of outcomes, and of the refund hook."""

from __future__ import annotations

import random
import uuid
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Annotated, Any

import anyio
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from hypothesis.stateful import RuleBasedStateMachine, invariant, rule
from mcp.server import MCPServer
from mcp.server.mcpserver import Context
from mcp.types import CallToolResult, TextContent, ToolAnnotations
from pydantic import BaseModel

from sources import billing
from sources.contract import EmptyResult, ErrorCategory, ResultPage, ToolError
from sources.security.auth import CREDENTIAL_META_KEY
from sources.settings import SourceSettings
from sources.store import Store
from sources.tool_failure import to_call_tool_result
from sources.world import world_path
from subagents.breaker import Breakers, BreakerState
from subagents.broker import CredentialBroker, Grant
from subagents.guard import LocalGuard
from subagents.policy import RecoveryPolicy
from subagents.sessions.connection import Connections
from subagents.subagent import Runtime, SubagentReport, Task, run_subagent
from subagents.writes import EffectsTable, ToolEffects
from tests.conftest import TEST_KEY
from tests.fakes import FakeClock

OUTCOMES = [
    "ok",
    "empty",
    "transient",
    "transient_hint",
    "validation",
    "business",
    "permission",
    "permission_unnamed",
    "unstructured",
]
LEGAL_TRANSITIONS = {
    (BreakerState.CLOSED, BreakerState.OPEN),
    (BreakerState.OPEN, BreakerState.HALF_OPEN),
    (BreakerState.HALF_OPEN, BreakerState.CLOSED),
    (BreakerState.HALF_OPEN, BreakerState.OPEN),
}


class Record(BaseModel):
    id: str


@dataclass
class ScriptedSource:
    """A real MCP server whose answers follow a script; it records every call that reaches it."""

    script: list[str]
    calls: list[tuple[dict[str, Any], str | None]] = field(default_factory=list)
    on_hang: Callable[[], None] = lambda: None  # told when a call starts hanging (it is in flight)

    def server(self) -> MCPServer:
        server = MCPServer("scripted")
        # A lookup: it says it only reads, so a transient failure of it may be retried.

        @server.tool(annotations=ToolAnnotations(readOnlyHint=True))
        async def lookup(customer_id: str, ctx: Context) -> Annotated[CallToolResult, ResultPage[Record]]:
            """Answers from the script ("hang": never)."""
            meta = ctx.request_context.meta or {}
            self.calls.append(({"customer_id": customer_id}, meta.get(CREDENTIAL_META_KEY)))
            kind = self.script[min(len(self.calls), len(self.script)) - 1]
            if kind == "hang":
                self.on_hang()
                await anyio.sleep_forever()
            answer = _answer(kind, customer_id)
            return answer if isinstance(answer, CallToolResult) else to_call_tool_result(answer)

        return server


def _answer(kind: str, customer_id: str) -> ResultPage[Record] | EmptyResult | ToolError | CallToolResult:
    match kind:
        case "ok":
            return ResultPage[Record](result_count=1, results=[Record(id=customer_id)])
        case "empty":
            return EmptyResult(message="Nothing matches.")
        case "transient":
            return ToolError.of(ErrorCategory.TRANSIENT, "Timed out.")
        case "transient_hint":
            return ToolError.of(ErrorCategory.TRANSIENT, "Rate limited.", retry_after_ms=2500)
        case "validation":
            return ToolError.of(
                ErrorCategory.VALIDATION, "Argument 'customer_id' is not in the expected form."
            )
        case "business":
            return ToolError.of(
                ErrorCategory.BUSINESS, "A rule refused it.", partial_results=[{"id": "partial"}]
            )
        case "permission":
            return ToolError.of(ErrorCategory.PERMISSION, "Needs x:read.", required_scope="x:read")
        case "permission_unnamed":
            return ToolError.of(ErrorCategory.PERMISSION, "Access denied.")
    # "unstructured": the generic error of a server that does not speak the contract.
    return CallToolResult(content=[TextContent(type="text", text="Operation failed")], is_error=True)


POLICY = RecoveryPolicy()
# The scripted source's lookup, as its listing would say of a read (the runtime knows the demo sources').
READS = EffectsTable({"scripted": {"lookup": ToolEffects(read_only=True, destructive=False)}})
MAX_CALLS = 1 + POLICY.max_retries + POLICY.max_repairs + POLICY.max_elevations


async def _run(
    source: ScriptedSource, budget: float, purpose: str, seed: int
) -> tuple[SubagentReport, FakeClock, Breakers]:
    clock = FakeClock()
    breakers = Breakers(failure_threshold=3, cooldown_s=10)
    server = source.server()
    with anyio.fail_after(30):
        async with Connections.opened({"scripted": lambda: server}) as connections:
            runtime = Runtime(
                connections=connections, broker=CredentialBroker(TEST_KEY, grants=(Grant("x:read", "granted"),)),
                policy=POLICY, guard=LocalGuard.of(breakers), clock=clock, rng=random.Random(seed),
                effects=READS,
            )  # fmt: skip
            task = Task("t", "scripted", "lookup", {"customer_id": "cust-42"}, purpose=purpose)
            # Opened before the run: its wait is real time, the budget is the fake clock's, so a loaded
            # machine could otherwise spend a small budget on the handshake and no call would be made.
            await connections["scripted"].session()
            report = await run_subagent(task, runtime, deadline=clock.now() + budget)
    return report, clock, breakers


@settings(max_examples=150, deadline=None)
@given(
    script=st.lists(st.sampled_from(OUTCOMES), min_size=1, max_size=9),
    budget=st.floats(min_value=0.2, max_value=40),
    purpose=st.sampled_from(["granted", "other"]),
    seed=st.integers(0, 2**16),
    backend=st.sampled_from(["asyncio", "trio"]),  # the subagent is written for anyio: both backends
)
def test_recovery_stays_within_its_bounds(
    script: list[str], budget: float, purpose: str, seed: int, backend: str
) -> None:
    source = ScriptedSource(script)
    report, clock, breakers = anyio.run(_run, source, budget, purpose, seed, backend=backend)
    calls = source.calls

    answered = [source.script[min(i, len(script) - 1)] for i in range(len(calls))]
    # A pushback (a transient answer saying when to call again) is waited out within the deadline,
    # apart from the retry bound: one more call for each.
    pushbacks = answered.count("transient_hint")
    assert report.attempts == len(calls) <= MAX_CALLS + pushbacks
    for i in range(len(calls) - 1):
        same_call = calls[i] == calls[i + 1]
        if answered[i] in ("transient", "transient_hint"):
            assert same_call, "a transient failure is retried with the identical call"
        else:
            # After a non-retryable error only a repaired or an elevated call may follow.
            assert not same_call, f"identical call repeated after {answered[i]}"
        assert answered[i] not in ("ok", "empty"), "nothing follows a result"
    for start, seconds in clock.sleeps:
        assert start + seconds < 1000.0 + budget, "a back-off sleep ended past the deadline"
    assert len(clock.sleeps) <= POLICY.max_retries + pushbacks
    actions = [decision.action for decision in report.decisions]
    assert actions.count("repair") <= POLICY.max_repairs and actions.count("elevate") <= POLICY.max_elevations
    if report.state == "escalated":
        escalation = report.escalation
        assert escalation is not None and isinstance(escalation.partial_results, list)
        wire = escalation.to_wire()
        assert {"attempted_query", "partial_results", "decisions", "attempts", "source"} <= set(wire)
        if calls:
            assert escalation.attempted_query.arguments == calls[-1][0]
        if "business" in answered:
            assert {"id": "partial"} in escalation.partial_results
    if report.state == "empty":
        assert answered[-1] == "empty" and actions[-1] == "accept_empty"
    assert set(breakers["scripted"].transitions) <= LEGAL_TRANSITIONS


@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(amount=st.decimals(min_value="500.01", max_value="100000", places=2).map(float))
def test_no_refund_above_the_limit_reaches_billing(amount: float, settings: SourceSettings) -> None:  # type: ignore[misc]
    key = f"prop-{uuid.uuid4().hex[:12]}"
    reached: list[str] = []

    async def scenario() -> SubagentReport:
        server = billing.create_server(settings)

        def target() -> MCPServer:
            reached.append("session")
            return server

        broker = CredentialBroker(TEST_KEY, base_scopes=frozenset({"billing:read", "billing:refund"}))
        with anyio.fail_after(30):
            async with Connections.opened({"billing": target}) as connections:
                runtime = Runtime(connections=connections, broker=broker, clock=FakeClock())
                task = Task(
                    "refund",
                    "billing",
                    "issue_refund",
                    {"order_id": "ORD-10023", "amount": amount, "idempotency_key": key},
                )
                return await run_subagent(task, runtime, deadline=runtime.clock.now() + 30)

    report = anyio.run(scenario)
    assert report.state == "escalated" and [d.action for d in report.decisions] == ["hook_blocked"]
    assert report.attempts == 0 and reached == []  # no session was even opened with billing
    store = Store(world_path(settings.data_dir, settings.seed) / "billing.db")
    assert store.rows("SELECT id FROM refunds WHERE idempotency_key = ?", (key,)) == []


class BreakerMachine(RuleBasedStateMachine):
    """Tasks against one scripted source, sharing one breaker, while time moves on."""

    def __init__(self) -> None:
        super().__init__()
        self.clock = FakeClock()
        self.breakers = Breakers(failure_threshold=3, cooldown_s=10)

    async def _run(self, script: list[str], cut_mid_call: bool = False) -> tuple[SubagentReport | None, int]:
        source = ScriptedSource(script)
        server = source.server()
        report = None
        with anyio.fail_after(30):
            async with Connections.opened({"scripted": lambda: server}) as connections:
                runtime = Runtime(
                    connections=connections, broker=CredentialBroker(TEST_KEY), policy=RecoveryPolicy(max_retries=1),
                    guard=LocalGuard.of(self.breakers), clock=self.clock, rng=random.Random(0), effects=READS,
                )  # fmt: skip
                task = Task("t", "scripted", "lookup", {"customer_id": "CUST-00042"})
                with anyio.CancelScope() as deadline:
                    if cut_mid_call:  # the query's deadline passes while the call hangs at the source
                        source.on_hang = deadline.cancel
                    report = await run_subagent(task, runtime, deadline=self.clock.now() + 60)
        return report, len(source.calls)

    @rule(script=st.lists(st.sampled_from(["ok", "transient", "business", "empty"]), min_size=1, max_size=3))
    def run_a_task(self, script: list[str]) -> None:
        breaker = self.breakers["scripted"]
        open_before = breaker.state is BreakerState.OPEN and breaker.retry_in_s(self.clock.now()) > 0
        report, calls = anyio.run(self._run, script)
        assert report is not None and report.attempts == calls
        if open_before:
            assert calls == 0 and [d.action for d in report.decisions] == ["breaker_open"]
            assert report.escalation is not None and report.escalation.error_category == "transient"

    @rule()
    def a_task_is_cut_short(self) -> None:
        """Its call hangs and the query's deadline cancels it mid-call (a probe, if the breaker was half-open)."""
        report, calls = anyio.run(self._run, ["hang"], True)
        # Cut while its call hung at the source, unless the open breaker kept the call from being sent.
        assert (calls, report) == (1, None) or (
            calls == 0 and report is not None and report.decisions[-1].action == "breaker_open"
        )

    @rule(seconds=st.floats(min_value=0, max_value=15))
    def time_passes(self, seconds: float) -> None:
        self.clock.advance(seconds)

    @invariant()
    def no_probe_outlives_its_call(self) -> None:
        assert not self.breakers["scripted"].probing, (
            "a probe ended (or was cancelled) but still holds the breaker"
        )

    @invariant()
    def transitions_are_legal(self) -> None:
        breaker = self.breakers["scripted"]
        assert set(breaker.transitions) <= LEGAL_TRANSITIONS
        for (_, to), (start, _) in zip(breaker.transitions, breaker.transitions[1:], strict=False):
            assert to is start, "each transition starts where the last one ended"


TestBreakerMachine = BreakerMachine.TestCase
TestBreakerMachine.settings = settings(max_examples=40, stateful_step_count=12, deadline=None)
