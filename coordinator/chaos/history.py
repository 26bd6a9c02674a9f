"""What a chaos run records of a scenario: every call with its outcome, and the scenario's result."""

from __future__ import annotations

from dataclasses import dataclass, field

from coordinator.chaos.catalogue import Scenario
from coordinator.planning.plan import Plan
from coordinator.reporting.report import ResearchReport
from sources.refund_ledger import LedgerRefund
from subagents.classify import Outcome
from subagents.hooks import PostCallHook, ToolCall
from subagents.policy import RecoveryPolicy
from subagents.writes import AskedWrite


@dataclass(frozen=True)
class Call(ToolCall):
    """One call a subagent made, and what came back, as the post-call hook saw it."""

    outcome: Outcome = field(kw_only=True)


@dataclass
class History:
    calls: list[Call] = field(default_factory=list)

    def recorder(self) -> PostCallHook:
        def record(call: ToolCall, outcome: Outcome) -> Outcome:
            self.calls.append(
                Call(call.source, call.tool, dict(call.arguments), call.attempt, call.task, outcome=outcome)
            )
            return outcome

        return record


@dataclass
class ScenarioResult:
    scenario: Scenario
    plan: Plan  # the plan that ran: the checker judges the report against it
    report: ResearchReport | None
    history: History
    elapsed_s: float
    refunds: list[LedgerRefund]  # billing's whole ledger after a scenario with a side refund, else none
    refund_key: str | None  # the side refund's idempotency key
    leaked_processes: list[int]
    leaked_sockets: int
    policy: RecoveryPolicy
    violations: list[tuple[str, str]] = field(default_factory=list)
    # The query's own deadline where it is not the scenario's (a question of a batch); None: the scenario's.
    query_deadline_s: float | None = None
    # The writes the query asks for, read where it was planned (a batch's driver); None: read from the plan's query.
    asked: tuple[AskedWrite, ...] | None = None

    @property
    def deadline_s(self) -> float:
        return self.scenario.deadline_s if self.query_deadline_s is None else self.query_deadline_s
