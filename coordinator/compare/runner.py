"""Every scenario through each mode, side by side: the same seeded chaos, a world of its own per mode.

| mode            | what a failed call tells a subagent | when a branch fails                        |
|-----------------|-------------------------------------|--------------------------------------------|
| `generic`       | "Operation failed", nothing else    | the query goes on without it               |
| `generic-abort` | "Operation failed", nothing else    | the query is abandoned (the article's case)|
| `structured`    | the contract                        | the query goes on, the gap annotated       |

The modes of one scenario run at the same time (each on its own copy of the world, so one mode's
refunds never change what billing tells another); the scenarios run one after another.
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

from coordinator.chaos.catalogue import Scenario
from coordinator.chaos.runner import run_scenario
from coordinator.compare.boundary import Boundary
from coordinator.compare.figures import Figures, figures_of
from sources.settings import SourceSettings
from sources.world import ensure_world
from subagents.claude import ClaudeSettings
from subagents.decisions import Decision
from subagents.task import Task

__all__ = ["MODES", "Comparison", "compare", "run_mode", "worlds"]

MODES = ("generic", "generic-abort", "structured")
# Decisions after which a branch has failed: the generic-abort mode abandons the query at the first.
_BRANCH_FAILED = frozenset({"give_up", "escalate", "breaker_open", "hook_blocked"})


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


class _Watch:
    """Sees each subagent's decisions; in the generic-abort mode, abandons the query at a failed branch."""

    def __init__(self, abort: bool) -> None:
        self.abort = abort
        self.scope = anyio.CancelScope()
        self.decisions: list[tuple[str, Decision]] = []

    def attempt(self, task: Task, attempt: int, arguments: dict[str, Any]) -> None:
        pass

    def decided(self, task: Task, decision: Decision) -> None:
        self.decisions.append((task.id, decision))
        if self.abort and decision.action in _BRANCH_FAILED:
            self.scope.cancel()

    def ended(self, task_id: str, state: str, attempts: int, decisions: Sequence[Decision]) -> None:
        pass


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
def worlds(modes: Sequence[str] = MODES) -> Iterator[dict[str, SourceSettings]]:
    """A generated world per mode, in temporary folders: one world made, then copied."""
    with tempfile.TemporaryDirectory(prefix="research-compare-") as root:
        first = _settings(Path(root) / "world")
        ensure_world(first.data_dir, first.seed)
        settings = {}
        for mode in modes:
            shutil.copytree(first.data_dir, Path(root) / mode)
            settings[mode] = _settings(Path(root) / mode)
        yield settings


def _settings(data_dir: Path) -> SourceSettings:
    # As a chaos run's: no kb warm-up, no tickets rate limit (the scenarios bring their own faults).
    return SourceSettings(data_dir=data_dir, kb_warmup_ms=0, tickets_rate_per_second=1000, tickets_burst=1000)


def compare(
    chosen: Sequence[Scenario],
    seed: int,
    claude: ClaudeSettings | None = None,
    on_scenario: Callable[[int, Scenario, dict[str, Figures]], None] | None = None,
) -> Comparison:
    """Run ``chosen`` through every mode; ``on_scenario`` hears each scenario's figures as it ends."""
    comparison = Comparison(scenarios=len(chosen), seed=seed)
    with worlds() as settings:
        for index, scenario in enumerate(chosen, 1):
            figures = anyio.run(_all_modes, scenario, settings, claude)
            for mode, scenario_figures in figures.items():
                comparison.modes[mode] += scenario_figures
            if on_scenario is not None:
                on_scenario(index, scenario, figures)
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
