"""The research coordinator: a question fanned out to MCP sources through subagents that recover.

The public surface, imported from here::

    from coordinator import Config, Coordinator

    async with Coordinator(Config.for_ask(SourceSettings.from_environment())) as coordinator:
        report = await coordinator.research("Who is CUST-00042? Any open tickets?")

Each name is imported when first used (``__getattr__``): `research --help` imports this package and
must not wait for the mcp SDK. (A replay runs through ``coordinator.replay.replay``: a name of the
package is never also one of its modules.) Everything else in the package is its own business.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from sources.deferred import exported

if TYPE_CHECKING:
    from coordinator.core import DEFAULT_GRANTS, Config, Coordinator
    from coordinator.planning.plan import Plan, PlannedTask, Ref
    from coordinator.planning.reading import QueryError
    from coordinator.recorded_run import RecordedRun, load_recording
    from coordinator.replay import Replayed
    from coordinator.reporting.report import ResearchReport

__all__ = [
    "DEFAULT_GRANTS",
    "Config",
    "Coordinator",
    "Plan",
    "PlannedTask",
    "QueryError",
    "RecordedRun",
    "Ref",
    "Replayed",
    "ResearchReport",
    "load_recording",
]


__getattr__ = exported("coordinator", __file__)
