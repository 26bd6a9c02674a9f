"""Test doubles for what the project injects: time. Everything else in the tests is real."""

from __future__ import annotations

import anyio


class FakeClock:
    """A clock whose sleeps return at once and move time forward by exactly what was asked."""

    def __init__(self, start: float = 1000.0) -> None:
        self._now = start
        self.sleeps: list[tuple[float, float]] = []  # (when, how long)

    def now(self) -> float:
        return self._now

    def __call__(self) -> float:  # also usable where a source takes a clock function
        return self._now

    def advance(self, seconds: float) -> None:
        self._now += seconds

    async def sleep(self, seconds: float) -> None:
        self.sleeps.append((self._now, seconds))
        self._now += seconds
        await anyio.lowlevel.checkpoint()
