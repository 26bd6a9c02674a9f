"""Chaos in one query: `research ask --chaos kill:customers@0.5s,hang:tickets,flaky:orders=0.3`.

Each item breaks one of the sources this query spawns: a fault for its fault layer, or a SIGKILL at a
time. Kept apart from ``coordinator.chaos`` (the scenario runner, which imports every source) so
that `research ask` starts without loading the sources' code.
"""

from __future__ import annotations

import contextlib
from collections.abc import Callable

import anyio
import psutil

from sources.catalogue import SOURCES
from sources.faults import FaultSettings

__all__ = ["kill_at", "parse_query_chaos"]

_QUERY_FAULTS: dict[str, Callable[[str], FaultSettings]] = {
    "hang": lambda value: FaultSettings(hang=1),
    "slow": lambda value: FaultSettings(latency_ms=float(value or 1000)),
    "flaky": lambda value: FaultSettings(transient=float(value or 0.5)),
    "garbage": lambda value: FaultSettings(garbage=float(value or 1)),
    "lose": lambda value: FaultSettings(lose=float(value or 1)),
    "kill": lambda value: FaultSettings(crash=1),  # without a time: killed by its first call
}


def parse_query_chaos(
    spec: str, sources: tuple[str, ...] = SOURCES
) -> tuple[dict[str, FaultSettings], list[tuple[str, float]]]:
    """Read ``kill:customers@0.5s,hang:tickets,flaky:orders=0.3``: per-source faults, and timed kills.

    ``sources``: the names it may break (a registered source's faults are injected client-side)."""
    faults: dict[str, FaultSettings] = {}
    kills: list[tuple[str, float]] = []
    for item in filter(None, (part.strip() for part in spec.split(","))):
        kind, sep, rest = item.partition(":")
        target, _, when = rest.partition("@")
        source, _, value = target.partition("=")
        if not sep or kind not in _QUERY_FAULTS or source not in sources:
            raise ValueError(
                f"--chaos item {item!r} is not KIND:SOURCE[=VALUE][@TIME] with a kind among {', '.join(_QUERY_FAULTS)} "
                f"and a source among {', '.join(sources)}; e.g. kill:customers@0.5s,flaky:orders=0.3"
            )
        if when:
            if kind != "kill":
                raise ValueError(f"--chaos {item!r}: only kill takes a time")
            try:
                kills.append((source, float(when.removesuffix("s"))))
            except ValueError:
                raise ValueError(f"--chaos {item!r}: the time must be seconds, e.g. @0.5s") from None
            continue
        try:
            faults[source] = _QUERY_FAULTS[kind](value)
        except ValueError:
            raise ValueError(f"--chaos {item!r}: {value!r} is not a number") from None
    return faults, kills


# Set in a registered source's environment when it is spawned (coordinator.registered_tools): what
# it starts inherits it, so a kill finds the whole tree, whatever the processes call themselves (npm
# rewrites its own command line).
SOURCE_NAME_VARIABLE = "RESEARCH_SOURCE_NAME"


async def kill_at(source: str, seconds: float, *, registered: bool = False) -> None:
    """SIGKILL the stdio process of ``source`` that this process started, ``seconds`` from now:
    spawned as ``python -m sources.SOURCE`` or forked (``sources.processes.forked``, named alike); a registered
    source, every process of the tree started from its command (``npx`` runs the server as its child)."""
    await anyio.sleep(seconds)
    for child in psutil.Process().children(recursive=True):
        with contextlib.suppress(psutil.Error):
            if registered:
                if child.environ().get(SOURCE_NAME_VARIABLE) == source:
                    child.kill()
            elif any(part == f"sources.{source}" for part in child.cmdline()):
                child.kill()
