"""A run kept beside its trace (``coordinator.recorded_run``) run again: the same decisions, or a diff.

``replay`` runs the coordinator on that plan against the recording
(``subagents.sessions.replaying``: the recorded answers, on the recorded clock, with the recorded jitter)
and compares the decisions it takes with the recorded ones. The classification, the policy, the
hooks and the guard are today's code, so a replay that differs means the code now decides
otherwise, or the recording was changed.

What a replay cannot give back, it says (``Replayed.caveats``): a run in Claude mode (the model's
turns are not recorded), a run whose breakers another query shared (a batch's, the service's),
a run under another classification boundary (a comparison's).
"""

from __future__ import annotations

import difflib
import re
from dataclasses import dataclass, field, replace

from coordinator import core
from coordinator.recorded_run import KeptOutcome, RecordedRun
from coordinator.registry import Registry
from coordinator.reporting.report import ResearchReport
from sources.settings import SourceSettings
from subagents.broker import Grant
from subagents.decisions import Decision
from subagents.sessions.replaying import RecordedJitter, ReplayClock, ReplayTransport
from subagents.writes import Approval

__all__ = ["Replayed", "replay"]


@dataclass
class Replayed:
    """A replay: its report, and every way its decisions differ from the recorded ones (none: the same)."""

    recorded: RecordedRun
    report: ResearchReport
    differences: list[str] = field(default_factory=list)
    caveats: list[str] = field(default_factory=list)


def caveats_of(run: RecordedRun) -> list[str]:
    said = []
    if run.mode == "claude":
        said.append(
            "recorded in Claude mode: the model's turns are not recorded; the code decides each step here"
        )
    if run.breakers == "shared":
        said.append("its breakers were shared with other queries; here they are this replay's own")
    if run.boundary == "other":
        said.append("it ran under another classification boundary; here the contract's classifies")
    return said


async def replay(run: RecordedRun, settings: SourceSettings, registry: Registry | None = None) -> Replayed:
    """Run ``run``'s plan against its recording and compare the decisions (``registry``: the sources
    in effect, whose rules classify the registered ones' answers; None: the demo sources alone)."""
    transport = ReplayTransport(run.attempts)
    jitters = {
        kept.id: RecordedJitter(d.backoff_ms / 1000 for d in kept.decisions if d.action == "retry")
        for kept in run.outcomes
    }
    grants = tuple(Grant(scope, purpose, source) for scope, purpose, source in run.grants)
    approvals = tuple(replace(Approval.parse(given), by=by) for given, by in run.approvals)
    config = core.Config.for_replay(settings, registry, run.policy.policy(), grants, approvals)
    async with core.Coordinator(config, transport=transport, clock=ReplayClock()) as coordinator:
        report = await coordinator.research(
            run.query, deadline_s=run.deadline_s, plan=run.plan(), record=False,
            jitter=lambda task_id: jitters.setdefault(task_id, RecordedJitter(())),
        )  # fmt: skip
    replayed = Replayed(run, report, differences(run.outcomes, report), caveats_of(run))
    for call in transport.missing:
        replayed.differences.append(
            f"{call.task}: attempt {call.attempt} ({call.source}.{call.tool}) was made, and the recording has none"
        )
    return replayed


# Figures that follow from when a call ended rather than from what it answered (a breaker's "probes
# again in 29.3 s"): compared as words, since a replay's clock stands where attempts ended.
_SECONDS = re.compile(r"\d+(\.\d+)? s\b")


def _said(decision: Decision) -> str:
    category = f" {decision.category}" if decision.category else ""
    backoff = f" after {decision.backoff_ms} ms" if decision.backoff_ms else ""
    return f"attempt {decision.attempt}: {decision.action}{category}{backoff}: {decision.reason}"


def differences(recorded: list[KeptOutcome], report: ResearchReport) -> list[str]:
    """Each way the report's tasks differ from the recorded ones, in words (a unified diff of decisions)."""
    now = {task.id: task for task in report.tasks}
    found: list[str] = []
    for kept in recorded:
        task = now.get(kept.id)
        if task is None:
            found.append(f"{kept.id}: recorded, and not in the replay")
            continue
        before = [_SECONDS.sub("N s", _said(d)) for d in kept.decisions] + [f"ended {kept.state}"]
        after = [_SECONDS.sub("N s", _said(d)) for d in task.decisions] + [f"ended {task.state}"]
        if before != after:
            diff = difflib.unified_diff(
                before, after, f"{kept.id} (recorded)", f"{kept.id} (replayed)", lineterm=""
            )
            found.append("\n".join(diff))
    for task_id in now.keys() - {kept.id for kept in recorded}:
        found.append(f"{task_id}: in the replay, and not recorded")
    return found
