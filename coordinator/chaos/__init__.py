"""Chaos runs: random fault scenarios, a history of every call and decision, invariants checked after each.

In the spirit of Toxiproxy (named faults with probabilities) and Jepsen (record a history, check it
afterwards). A scenario picks a story query, one or two sources and a fault for each, from the
catalogue (``coordinator.chaos.catalogue``); most faults run against in-process sources (fast), the ones that need a real
process (kills, exits, bytes on the wire) against stdio subprocesses. Every scenario's seed replays it.

A scenario runs in the deterministic mode, or in Claude mode (``claude=``) against whatever Messages
API the settings point at: the same invariants hold whichever decides the next step.

One module per job: ``catalogue`` (queries, faults, seeded scenarios), ``runner`` (one scenario end
to end), ``history`` (what it recorded), ``checker`` (the invariants), ``soak`` (many queries
through one process). `research ask --chaos` is elsewhere (``coordinator.query_chaos``), so that
`research ask` starts without importing the sources.

The invariants checked after each scenario are listed in ``coordinator.chaos.checker``.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from sources.deferred import exported

if TYPE_CHECKING:
    from coordinator.chaos.catalogue import QUERIES, Scenario, scenario_from, scenarios
    from coordinator.chaos.history import ScenarioResult
    from coordinator.chaos.runner import run_scenario
    from coordinator.chaos.soak import soak

__all__ = ["QUERIES", "Scenario", "ScenarioResult", "run_scenario", "scenario_from", "scenarios", "soak"]

# Each name imported when first used: the checker (every batch question, on a Ray worker too) must not
# load the runner, which serves the five sources in process.
__getattr__ = exported("coordinator.chaos", __file__)
