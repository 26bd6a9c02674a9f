"""Subagents: one task each, carried to a report through every recovery the contract allows.

The public surface: the ``Transport`` a subagent reaches its sources through (live sessions,
a recording kept, a recording replayed), the recovery ``RecoveryPolicy``, the ``Runtime`` a run's
subagents share and what they report. Each name is imported when first used (``__getattr__``).
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from sources.deferred import exported

if TYPE_CHECKING:
    from subagents.decisions import Decision, Escalation, SubagentReport, TaskState
    from subagents.policy import RecoveryPolicy
    from subagents.sessions.connection import Connections
    from subagents.sessions.recording import RecordingTransport, Tape
    from subagents.sessions.replaying import ReplayClock, ReplayTransport
    from subagents.subagent import Runtime, run_subagent
    from subagents.task import Task
    from subagents.transport import SourceLink, Transport

__all__ = [
    "Connections",
    "Decision",
    "Escalation",
    "RecordingTransport",
    "RecoveryPolicy",
    "ReplayClock",
    "ReplayTransport",
    "Runtime",
    "SourceLink",
    "SubagentReport",
    "Tape",
    "Task",
    "TaskState",
    "Transport",
    "run_subagent",
]


__getattr__ = exported("subagents", __file__)
