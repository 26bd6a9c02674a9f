"""A run kept beside its trace, ``<traces>/recordings/<trace id>.json``, as it ends (personal data replaced
by stand-ins of the same shape, ``traces.stand_ins.pseudonymous``): the plan it ran, the recovery policy
and deadline it ran under, every attempt's answer (``subagents.sessions.recording``), every task's
decisions. ``coordinator.replay`` runs it again."""

from __future__ import annotations

from pathlib import Path
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field, ValidationError

from coordinator.planning.plan import Plan, PlannedTask, Ref, Unplanned
from coordinator.reporting.report import ResearchReport
from sources.contract import ErrorCategory
from subagents.broker import Grant
from subagents.decisions import Decision
from subagents.policy import Recovery, RecoveryPolicy
from subagents.sessions.recording import Attempt
from subagents.writes import Approval
from traces.private_files import private_folder, publish_file
from traces.stand_ins import pseudonymous

__all__ = ["RecordedRun", "RecordingError", "load_recording", "recording_path", "save_recording"]


class _Kept(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)


class KeptTask(_Kept):
    id: str
    source: str
    tool: str
    # An argument taken from an upstream task's record is {"$ref": [task, field]}.
    arguments: dict[str, Any]
    purpose: str = "research"
    depends_on: list[str] = Field(default_factory=list)
    why: str = ""


class KeptOutcome(_Kept):
    id: str
    state: str
    decisions: list[Decision]


class KeptPolicy(_Kept):
    actions: dict[ErrorCategory, Recovery]
    max_retries: int
    max_repairs: int
    max_elevations: int
    base_delay_s: float
    max_delay_s: float
    call_timeout_s: float
    source_timeouts: dict[str, float]

    @classmethod
    def of(cls, policy: RecoveryPolicy) -> KeptPolicy:
        return cls(
            actions=dict(policy.actions), max_retries=policy.max_retries, max_repairs=policy.max_repairs,
            max_elevations=policy.max_elevations, base_delay_s=policy.base_delay_s,
            max_delay_s=policy.max_delay_s, call_timeout_s=policy.call_timeout_s,
            source_timeouts=dict(policy.source_timeouts),
        )  # fmt: skip

    def policy(self) -> RecoveryPolicy:
        return RecoveryPolicy(**{**self.model_dump(), "actions": dict(self.actions)})


class RecordedRun(_Kept):
    """One run as kept: what it ran, under what, what each attempt got, what each task decided."""

    version: Literal[1] = 1
    trace_id: str = Field(pattern=r"^[0-9a-f]{32}$")
    query: str
    mode: Literal["deterministic", "claude"]
    breakers: Literal["own", "shared"]  # this query's own, or shared with other queries
    boundary: Literal["contract", "other"]  # the classification boundary
    deadline_s: float  # what the run had of the deadline once planned
    policy: KeptPolicy
    grants: list[tuple[str, str | None, str | None]]  # what the broker could grant: scope, purpose, source
    # The writes a person approved for the run (TOOL or TOOL:ID): a replay sends nothing, so it may
    # take them again and decide as the run did.
    approvals: list[tuple[str, str]] = Field(default_factory=list)  # (TOOL or TOOL:ID, given by)
    tasks: list[KeptTask]
    unplanned: list[dict[str, str]] = Field(default_factory=list)
    looked_for: list[str] = Field(default_factory=list)  # the plan's ids looked for among the records found
    attempts: list[Attempt]
    outcomes: list[KeptOutcome]

    def plan(self) -> Plan:
        """The plan the run ran, built (and checked) again."""
        tasks = [
            PlannedTask(
                task.id,
                task.source,
                task.tool,
                {name: _unkept(value) for name, value in task.arguments.items()},
                purpose=task.purpose,
                depends_on=tuple(task.depends_on),
                why=task.why,
            )
            for task in self.tasks
        ]
        offered: dict[str, set[str]] = {}
        for task in tasks:
            offered.setdefault(task.source, set()).add(task.tool)
        unplanned = tuple(Unplanned(u["what"], u["why"], u["next_step"]) for u in self.unplanned)
        return Plan.of(self.query, tasks, unplanned, offered=offered, looked_for=tuple(self.looked_for))


def _kept(value: Any) -> Any:
    return {"$ref": [value.task, value.field]} if isinstance(value, Ref) else value


def _unkept(value: Any) -> Any:
    if isinstance(value, dict) and set(value) == {"$ref"} and isinstance(value["$ref"], list):
        task, name = value["$ref"]
        return Ref(str(task), str(name))
    return value


def recording_path(traces_dir: Path, trace_id: str) -> Path:
    return traces_dir / "recordings" / f"{trace_id}.json"


def save_recording(
    traces_dir: Path,
    report: ResearchReport,
    plan: Plan,
    attempts: list[Attempt],
    *,
    deadline_s: float,
    policy: RecoveryPolicy,
    grants: tuple[Grant, ...],
    approvals: tuple[Approval, ...] = (),
    mode: Literal["deterministic", "claude"],
    breakers: Literal["own", "shared"],
    boundary: Literal["contract", "other"],
) -> Path:
    """Keep the run of ``report`` beside its trace (a private file: it holds what the sources said)."""
    run = RecordedRun(
        trace_id=report.trace_id,
        query=plan.query,
        mode=mode,
        breakers=breakers,
        boundary=boundary,
        deadline_s=deadline_s,
        policy=KeptPolicy.of(policy),
        grants=[(grant.scope, grant.purpose, grant.source) for grant in grants],
        approvals=[(str(approval), approval.by) for approval in approvals],
        tasks=[
            KeptTask(
                id=task.id,
                source=task.source,
                tool=task.tool,
                purpose=task.purpose,
                why=task.why,
                arguments={name: _kept(value) for name, value in task.arguments.items()},
                depends_on=list(task.depends_on),
            )
            for task in plan.order()
        ],
        unplanned=[{"what": u.what, "why": u.why, "next_step": u.next_step} for u in plan.unplanned],
        looked_for=list(plan.looked_for),
        attempts=attempts,
        outcomes=[KeptOutcome(id=t.id, state=t.state, decisions=t.decisions) for t in report.tasks],
    )
    # Personal data out (stand-ins alike wherever a value appears: the replay compares, resolves and
    # repairs them as it did the values), credentials out; then checked again as a recording.
    words = {name for task in run.tasks for name in (task.id, task.source, task.tool)}
    kept = RecordedRun.model_validate(pseudonymous(run.model_dump(mode="json"), keep=words))
    path = recording_path(traces_dir, report.trace_id)
    private_folder(path.parent)
    publish_file(path, kept.model_dump_json(indent=1), replace=True, durable=False)
    return path


class RecordingError(ValueError):
    """A recording that cannot be read: named, with what is wrong with it."""


def load_recording(path: Path) -> RecordedRun:
    try:
        return RecordedRun.model_validate_json(path.read_bytes())
    except FileNotFoundError:
        raise RecordingError(f"no recording at {path}") from None
    except ValidationError as exc:
        first = exc.errors()[0]
        where = ".".join(str(part) for part in first["loc"]) or "(the whole file)"
        raise RecordingError(
            f"{path} is not a recording of a run: {where}: {first['msg']} ({exc.error_count()} problem(s))"
        ) from None
