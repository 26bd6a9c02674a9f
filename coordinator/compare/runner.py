"""Every scenario through each mode, side by side: the same seeded chaos, a world of its own per mode.

| mode            | what a failed call tells a subagent | when a branch fails                        |
|-----------------|-------------------------------------|--------------------------------------------|
| `generic`       | "Operation failed", nothing else    | the query goes on without it               |
| `generic-abort` | "Operation failed", nothing else    | the query is abandoned (the article's case)|
| `structured`    | the contract                        | the query goes on, the gap annotated       |

The modes of one scenario run at the same time, each on its own copy of the world, so one mode's
refunds never change what billing tells another; scenarios run in a few lanes at once.
"""

from __future__ import annotations

import shutil
import tempfile
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import anyio

from coordinator.chaos.catalogue import Scenario, scenario_settings
from coordinator.chaos.runner import run_scenario
from coordinator.compare.boundary import Boundary
from coordinator.compare.figures import Figures, figures_of
from sources.settings import SourceSettings
from sources.world import ensure_world
from subagents.claude import ClaudeSettings
from subagents.decisions import Decision
from subagents.subagent import SilentObserver
from subagents.task import Task

__all__ = ["MODES", "Comparison", "compare", "run_mode", "worlds"]

MODES = ("generic", "generic-abort", "structured")
# Decisions after which a branch has failed: the generic-abort mode abandons the query at the first.
_BRANCH_FAILED = frozenset({"give_up", "escalate", "breaker_open", "hook_blocked"})
# Scenarios run this many at a time: a scenario mostly waits (time-outs, back-offs, deadlines), and
# three lanes keep two cores busy without crowding the scenarios' short deadlines.
LANES = 3


@dataclass
class Comparison:
    scenarios: int
    seed: int
    modes: dict[str, Figures] = field(default_factory=lambda: {mode: Figures() for mode in MODES})

    def as_dict(self) -> dict[str, Any]:
        return {
            "modes": {mode: figures.as_dict() for mode, figures in self.modes.items()},
            "scenarios": self.scenarios,
            "seed": self.seed,
        }


class _Watch(SilentObserver):
    """Sees each subagent's decisions; in the generic-abort mode, abandons the query at a failed branch."""

    def __init__(self, abort: bool) -> None:
        self.abort = abort
        self.scope = anyio.CancelScope()
        self.decisions: list[tuple[str, Decision]] = []

    def decided(self, task: Task, decision: Decision) -> None:
        self.decisions.append((task.id, decision))
        if self.abort and decision.action in _BRANCH_FAILED:
            self.scope.cancel()


async def run_mode(
    mode: str, scenario: Scenario, settings: SourceSettings, claude: ClaudeSettings | None = None
) -> Figures:
    """One scenario in one mode, and its figures."""
    boundary, watch = Boundary(generic=mode != "structured"), _Watch(abort=mode == "generic-abort")
    result = await run_scenario(
        scenario, settings, claude=claude, classifier=boundary, observer=watch, stop=watch.scope
    )
    return figures_of(result, boundary.truths, watch.decisions)


@contextmanager
def worlds(lanes: int = 1) -> Iterator[list[dict[str, SourceSettings]]]:
    """A generated world per lane and mode, in temporary folders: one world made, then copied."""
    with tempfile.TemporaryDirectory(prefix="research-compare-") as root:
        first = scenario_settings(Path(root) / "world")
        ensure_world(first.data_dir, first.seed)
        made = []
        for lane in range(lanes):
            for mode in MODES:
                shutil.copytree(first.data_dir, Path(root) / f"{lane}-{mode}")
            made.append({mode: scenario_settings(Path(root) / f"{lane}-{mode}") for mode in MODES})
        yield made


def compare(
    chosen: Sequence[Scenario],
    seed: int,
    claude: ClaudeSettings | None = None,
    on_scenario: Callable[[int, Scenario, dict[str, Figures]], None] | None = None,
) -> Comparison:
    """Run ``chosen`` through every mode; ``on_scenario`` hears each scenario's figures as it ends.

    The scenarios run in ``LANES`` at once, each lane in its own worlds and in scenario order, so what
    one mode's world holds when a scenario starts is what the other modes' hold too.
    """
    comparison = Comparison(scenarios=len(chosen), seed=seed)
    ended = 0

    def record(scenario: Scenario, figures: dict[str, Figures]) -> None:
        nonlocal ended
        ended += 1
        for mode, scenario_figures in figures.items():
            comparison.modes[mode] += scenario_figures
        if on_scenario is not None:
            on_scenario(ended, scenario, figures)

    async def lane(scenarios: Sequence[Scenario], settings: dict[str, SourceSettings]) -> None:
        for scenario in scenarios:
            record(scenario, await _all_modes(scenario, settings, claude))

    async def all_lanes(settings: list[dict[str, SourceSettings]]) -> None:
        async with anyio.create_task_group() as group:
            for index, lane_settings in enumerate(settings):
                group.start_soon(lane, chosen[index :: len(settings)], lane_settings)

    with worlds(max(1, min(LANES, len(chosen)))) as settings:
        anyio.run(all_lanes, settings)
    return comparison


async def _all_modes(
    scenario: Scenario, settings: dict[str, SourceSettings], claude: ClaudeSettings | None
) -> dict[str, Figures]:
    figures: dict[str, Figures] = {}

    async def one(mode: str) -> None:
        figures[mode] = await run_mode(mode, scenario, settings[mode], claude)

    async with anyio.create_task_group() as group:
        for mode in MODES:
            group.start_soon(one, mode)
    return figures
