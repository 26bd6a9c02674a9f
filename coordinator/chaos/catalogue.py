"""What a chaos run draws from: the story queries, the fault catalogue, and seeded scenarios (a seed replays one)."""

from __future__ import annotations

import random
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

from sources.catalogue import SOURCES
from sources.domain import pounds
from sources.faults import FaultSettings
from sources.settings import SourceSettings
from subagents.policy import RecoveryPolicy

QUERIES = [
    "Investigate jane.doe@example.com: recent orders, open tickets, and whether a £750 refund on ORD-10023 is allowed",
    "What is our policy on refunds for damaged items, and which of CUST-00042's orders qualify?",
    "Investigate CUST-00042: recent orders, open tickets, invoices, and whether a £45 refund on ORD-10031 is allowed",
    "Who is new.customer@example.com? Any orders or open tickets?",
    "Investigate CUST-00013: orders and tickets",
]
DEADLINE_S = 4.0
# The deadline counts spawning too: a scenario with a real process may spawn its source twice (a crash,
# then the respawn), about two seconds each on a busy two-core machine.
PROCESS_DEADLINE_S = 8.0
# Fast and bounded: the policy of a chaos run keeps its shape, not its production delays.
CHAOS_POLICY = RecoveryPolicy(base_delay_s=0.02, max_delay_s=0.1, call_timeout_s=0.15)

# The fault catalogue: name -> (needs a real process, how to make it).
InProcess = Callable[[random.Random], FaultSettings]
CATALOGUE: dict[str, tuple[bool, InProcess]] = {
    "hang": (False, lambda rng: FaultSettings(hang=1)),
    "slow_jitter": (
        False,
        lambda rng: FaultSettings(
            latency_ms=rng.choice([50, 150, 300]), jitter_ms=50, seed=rng.randrange(1000)
        ),
    ),
    "flaky": (
        False,
        lambda rng: FaultSettings(transient=rng.choice([0.3, 0.6, 1.0]), seed=rng.randrange(1000)),
    ),
    "lost_answer": (False, lambda rng: FaultSettings(lose=rng.choice([0.5, 1.0]), seed=rng.randrange(1000))),
    "oversized": (False, lambda rng: FaultSettings(oversize=1)),
    "kill_before_initialize": (True, lambda rng: FaultSettings(die_at="start")),
    "kill_during_initialize": (True, lambda rng: FaultSettings(die_at="handshake")),
    "kill_mid_call": (True, lambda rng: FaultSettings(crash=1)),
    "exit_mid_call": (True, lambda rng: FaultSettings(exit=1)),
    "garbage": (True, lambda rng: FaultSettings(garbage=1)),
    "truncated": (True, lambda rng: FaultSettings(truncate=1)),
    "unknown_id": (True, lambda rng: FaultSettings(unknown_id=1)),
    "restart_in_flight": (True, lambda rng: FaultSettings(crash=1)),  # dies mid-call; the respawn is healthy
    "flapping": (True, lambda rng: FaultSettings(crash=1)),  # down, up, down, up... across respawns
}
_PROCESS_SHARE = 0.12  # of scenarios that use a real process: enough to cover them, few enough to stay fast


@dataclass(frozen=True)
class Scenario:
    seed: int
    query: str
    faults: dict[str, str]  # source -> fault name
    refund_amount: float | None  # an issue_refund task run beside the query, or None

    @property
    def deadline_s(self) -> float:
        needs_process = any(CATALOGUE[name][0] for name in self.faults.values())
        return PROCESS_DEADLINE_S if needs_process else DEADLINE_S

    def describe(self) -> str:
        faults = ", ".join(f"{name}:{source}" for source, name in sorted(self.faults.items())) or "no faults"
        refund = f", refund {pounds(self.refund_amount)}" if self.refund_amount is not None else ""
        return f"{faults}{refund}"


def scenarios(count: int, seed: int) -> list[Scenario]:
    """``count`` scenarios, each with a seed of its own (replay one with ``Scenario`` from that seed)."""
    master = random.Random(seed)  # noqa: S311  (scenario dice, not cryptography)
    return [scenario_from(master.randrange(2**31)) for _ in range(count)]


def scenario_from(seed: int) -> Scenario:
    rng = random.Random(seed)  # noqa: S311
    in_process = [name for name, (process, _) in CATALOGUE.items() if not process]
    with_process = [name for name, (process, _) in CATALOGUE.items() if process]
    faults: dict[str, str] = {}
    for source in rng.sample(SOURCES, rng.choice([1, 1, 2])):
        faults[source] = rng.choice(with_process if rng.random() < _PROCESS_SHARE else in_process)
    refund = round(rng.uniform(5, 900), 2) if rng.random() < 0.3 else None
    return Scenario(seed=seed, query=rng.choice(QUERIES), faults=faults, refund_amount=refund)


def scenario_settings(data_dir: Path) -> SourceSettings:
    """Settings for scenarios' sources in ``data_dir``: no kb warm-up, no tickets rate limit (the
    scenarios bring their own faults)."""
    return SourceSettings(data_dir=data_dir, kb_warmup_ms=0, tickets_rate_per_second=1000, tickets_burst=1000)
