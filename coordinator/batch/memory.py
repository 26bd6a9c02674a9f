"""What a batch's worker holds in memory, measured as it closes (``summary.json``'s per-worker figures)."""

from __future__ import annotations

import os
from dataclasses import dataclass

import psutil

__all__ = ["Memory"]


@dataclass(frozen=True)
class Memory:
    """A process's memory, in bytes: resident (RSS, shared libraries' pages counted whole, what ``ps``
    shows), unique (USS: freed if the process ended) and proportional (PSS: shared pages divided among
    the processes that map them)."""

    rss: int
    uss: int
    pss: int

    @classmethod
    def of_this_process(cls) -> Memory:
        # memory_full_info reads /proc/PID/smaps (some milliseconds): once, as a worker closes.
        full = psutil.Process(os.getpid()).memory_full_info()
        return cls(int(full.rss), int(full.uss), int(full.pss))
