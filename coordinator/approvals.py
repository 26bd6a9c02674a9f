"""A person's yes to each write, asked before the run: at a prompt in a terminal, or given up front.

A write is sent only with an approval (``subagents.writes.Approval``), checked by the subagent as
the call is about to leave (its ``approved`` or ``not_approved`` decision is on the trace). The
approvals are collected here, before the run starts, so that no deadline runs while a person reads:

- ``--approve TOOL:ID`` (or ``TOOL``) given on the command line, in a batch or a service request:
  what a script, a batch or the service may write, and nothing else;
- in a terminal, one question per write the run may make (the plan's write tasks, and what the
  question asks for beyond them), showing the source, the tool, its arguments and why, default No.

What is neither approved up front nor at the prompt becomes a gap saying how to approve it.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass
from typing import Any

from coordinator.planning.plan import Plan, PlannedTask
from subagents.writes import Approval, AskedWrite, EffectsTable

__all__ = ["WriteRequest", "approvals_for", "write_requests"]


@dataclass(frozen=True)
class WriteRequest:
    """A write the run may make, as a person is asked about it."""

    source: str
    tool: str
    arguments: dict[str, Any]
    why: str
    approval: Approval  # what a yes approves: this tool on this target

    def question(self) -> str:
        shown = (
            json.dumps(self.arguments, default=str, ensure_ascii=False) if self.arguments else "(as asked)"
        )
        return f"Approve a write? {self.source} {self.tool} {shown}\n  why: {self.why}\n  Send it"


def write_requests(plan: Plan, asked: Sequence[AskedWrite], effects: EffectsTable) -> list[WriteRequest]:
    """The writes a run of ``plan`` may make: its tasks that write, then each asked write no task
    plans (a model may make it in Claude mode)."""
    planned = [task for task in plan.order() if effects.of(task.source, task.tool).writes]
    requests = [
        WriteRequest(
            task.source, task.tool, _shown(task.arguments), task.why or task.id, _approval(task, asked)
        )
        for task in planned
    ]
    for ask in asked:
        if any(task.tool == ask.tool and _planned_for(task, ask) for task in planned):
            continue
        source = next((s for s, tools in effects.tools.items() if ask.tool in tools), "?")
        why = f"the question asks for it: {ask.asked!r}" if ask.asked else "the question asks for it"
        approval = Approval(ask.tool, ask.target, "the prompt")
        requests.append(WriteRequest(source, ask.tool, {}, f"{ask.describe()}; {why}", approval))
    return requests


def approvals_for(
    requests: Iterable[WriteRequest], given: Sequence[Approval], confirm: Callable[[str], bool] | None
) -> tuple[tuple[Approval, ...], bool]:
    """The approvals a run has: those ``given`` up front, and a yes at ``confirm`` (a terminal's
    prompt; None without one) for each write they do not cover already; and whether anyone was asked."""
    approved, prompted = list(given), False
    for request in requests:
        covered = any(a.covers(request.tool, request.arguments or _target_of(request)) for a in approved)
        if covered or confirm is None:
            continue
        prompted = True
        if confirm(request.question()):
            approved.append(request.approval)
    return tuple(approved), prompted


def _approval(task: PlannedTask, asked: Sequence[AskedWrite]) -> Approval:
    """What a yes to a planned write approves: that very call, where the plan knows all its arguments;
    else (an amount an earlier task gives) the asked write's tool on its target."""
    if all(_plain(value) for value in task.arguments.values()):
        return Approval.of_call(task.tool, task.arguments, "the prompt")
    ask = next((a for a in asked if a.tool == task.tool), None)
    return Approval(task.tool, ask.target if ask is not None else None, "the prompt")


def _planned_for(task: PlannedTask, ask: AskedWrite) -> bool:
    """Whether ``task`` is the planned call of ``ask`` (its target named among its arguments)."""
    return ask.target is None or ask.target in {
        value for value in task.arguments.values() if isinstance(value, str)
    }


def _shown(arguments: dict[str, Any]) -> dict[str, Any]:
    """A task's arguments as a person reads them: a value an earlier task gives, by its reference."""
    return {name: value if _plain(value) else str(value) for name, value in arguments.items()}


def _target_of(request: WriteRequest) -> dict[str, Any]:
    return {"target": request.approval.target} if request.approval.target else {}


def _plain(value: Any) -> bool:
    return value is None or isinstance(value, str | int | float | bool)
