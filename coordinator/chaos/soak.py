"""The soak: many queries through one long-lived coordinator process, sampling memory, open files and child processes."""

from __future__ import annotations

import random
from dataclasses import dataclass

import psutil

from coordinator.chaos.catalogue import CHAOS_POLICY, DEADLINE_S, QUERIES
from coordinator.core import Config, Coordinator
from sources.settings import SourceSettings
from subagents.breaker import Breakers
from subagents.claude import ClaudeSettings
from subagents.guard import LocalGuard


@dataclass(frozen=True)
class Sample:
    queries: int
    rss_mb: float
    open_files: int
    children: int


def sample(queries: int) -> Sample:
    me = psutil.Process()
    return Sample(queries, me.memory_info().rss / 2**20, me.num_fds(), len(me.children(recursive=True)))


async def soak(
    count: int,
    urls: dict[str, str],
    settings: SourceSettings,
    seed: int,
    claude: ClaudeSettings | None = None,
) -> list[Sample]:
    """``count`` queries through this one process against running sources; samples along the way."""
    rng = random.Random(seed)  # noqa: S311
    guard = LocalGuard.of(
        Breakers(cooldown_s=2.0)
    )  # one coordinator process: its breakers outlive each query
    samples = [sample(0)]
    marks = {min(count, 50), count} | {count * share // 10 for share in range(1, 10)}
    config = Config.for_chaos(settings, CHAOS_POLICY, claude, fleet=urls)
    for index in range(1, count + 1):
        seed = rng.randrange(2**31)
        async with Coordinator(config, guard=guard) as coordinator:  # sessions of each query's own
            await coordinator.research(rng.choice(QUERIES), deadline_s=DEADLINE_S, seed=seed)
        if index in marks:
            samples.append(sample(index))
    return samples
