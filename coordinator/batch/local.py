"""The local engine: every question in this process, at once up to the batch's concurrency.

One set of sessions to the fleet, one guard (breakers, retry budget, bulkheads) held here: the
simplest way to run a batch, and the baseline the Ray engine is measured against.
"""

from __future__ import annotations

from contextlib import AsyncExitStack
from types import TracebackType

from coordinator.batch.memory import Memory
from coordinator.batch.questions import Question
from coordinator.batch.work import Answer, Setup, answer, asking_at
from coordinator.core import Coordinator
from subagents.guard import Bulkheads, LocalGuard, SourceState

__all__ = ["LocalEngine"]


class LocalEngine:
    workers = 1

    def __init__(self, setup: Setup, *, retry_share: float, bulkhead: int | None) -> None:
        self.setup = setup
        self.memory: list[Memory] = []
        self.guard = LocalGuard(SourceState.shared(retry_share), Bulkheads(bulkhead))
        self._stack = AsyncExitStack()
        self._coordinator: Coordinator | None = None

    async def __aenter__(self) -> LocalEngine:
        self._coordinator = await self._stack.enter_async_context(asking_at(self.setup, self.guard))
        return self

    async def __aexit__(
        self, kind: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        self.memory = [Memory.of_this_process()]
        await self._stack.aclose()

    async def answer(self, question: Question) -> Answer:
        assert self._coordinator is not None, "answer() inside `async with engine`"
        return await answer(question, self.setup, self._coordinator)

    async def budget(self) -> dict[str, dict[str, int]]:
        return self.guard.state.counts()
