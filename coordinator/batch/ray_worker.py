"""The Ray side of a batch: the actors a Ray worker process runs, and nothing its driver alone needs.

Ray imports the module an actor class is defined in, in every process that runs one: this one imports
what running a question's tasks needs (``coordinator.batch.work``: the coordinator's run, the chaos
checker, the sessions) and no more. The driver (``coordinator.batch.ray_engine``) reads and plans the
questions, places the actors and hands out the work. What a worker process holds is measured by
``benchmarks/batch.py`` beside an empty Ray worker's (Ray's own floor).
"""

from __future__ import annotations

import asyncio
import sys
import time
from contextlib import AbstractAsyncContextManager
from typing import Any

import ray

from coordinator.batch.memory import Memory
from coordinator.batch.questions import Question
from coordinator.batch.work import Answer, Planned, Setup, answer, asking_at
from coordinator.core import Coordinator
from subagents.guard import Bulkheads, CallEnd, SourceState, Verdict
from traces.setup import configure_tracing, flush_spans

__all__ = ["BatchWorker", "GuardHost"]


# A worker or the guard that dies is started again by Ray (its state anew: a restarted guard's budget
# counts from zero); the questions in flight on a dead worker are asked again on another (``answer``).
_RESTARTS = 3


@ray.remote(num_cpus=0, max_restarts=_RESTARTS)
class GuardHost:
    """The fleet's breakers and retry budget, in one place. Its own clock: workers' clocks differ."""

    def __init__(self, retry_share: float) -> None:
        self.state = SourceState.shared(retry_share)

    def allow(self, source: str, first: bool) -> Verdict:
        return self.state.allow(source, time.monotonic(), first=first)

    def record(self, source: str, end: CallEnd, connection: str | None) -> Verdict:
        return self.state.record(source, end, time.monotonic(), connection)

    def abandon(self, source: str) -> None:
        self.state.abandon(source)

    def spend_retry(self, source: str) -> bool:
        return self.state.spend_retry(source, time.monotonic())

    def counts(self) -> dict[str, dict[str, int]]:
        return self.state.counts()


class RayGuard:
    """A worker's ``Guard``: every question goes to the ``GuardHost``; the bulkhead is this worker's."""

    def __init__(self, host: Any, bulkheads: Bulkheads) -> None:
        self.host = host
        self.bulkheads = bulkheads

    async def allow(self, source: str, now: float, *, first: bool) -> Verdict:
        verdict: Verdict = await self.host.allow.remote(source, first)
        self.bulkheads.limit_to(source, verdict.limit)
        return verdict

    async def record(self, source: str, end: CallEnd, now: float, connection: str | None = None) -> Verdict:
        verdict: Verdict = await self.host.record.remote(source, end, connection)
        self.bulkheads.limit_to(source, verdict.limit)
        return verdict

    def abandon(self, source: str) -> None:
        self.host.abandon.remote(source)  # sent, not awaited: the caller is unwinding a cancelled call

    async def spend_retry(self, source: str, now: float) -> bool:
        allowed: bool = await self.host.spend_retry.remote(source)
        return allowed

    def slot(self, source: str) -> AbstractAsyncContextManager[None]:
        return self.bulkheads.slot(source)


@ray.remote(num_cpus=1, max_restarts=_RESTARTS)
class BatchWorker:
    """One worker process: sessions to the fleet held for its life, questions answered concurrently."""

    def __init__(self, setup: Setup, host: str, bulkhead: int | None, share: float) -> None:
        # This process runs asyncio alone (a Ray async actor). httpcore, the sessions' HTTP client, imports
        # trio whenever it is installed (the test extras install it), 3 MB a worker: here it is not installed.
        sys.modules.setdefault("trio", None)  # type: ignore[arg-type]  # None: "import trio" raises ImportError
        configure_tracing(
            "research-coordinator", traces_dir=setup.settings.traces_path, run_id=setup.settings.run_id
        )
        self.setup = setup
        self.node_id: str = ray.get_runtime_context().get_node_id()
        # The guard is found by its name: an actor handle among a restartable actor's constructor
        # arguments lives in the object store, and Ray warns that a restart may then fail.
        self.guard = RayGuard(ray.get_actor(host), Bulkheads(bulkhead, share=share))
        self._coordinator: Coordinator | None = None
        self._ready: asyncio.Event | None = None
        self._closing = asyncio.Event()
        self._holder: asyncio.Task[None] | None = None

    async def _hold(self) -> None:
        """Holds the sessions open in a task of its own (opened and closed in the same task)."""
        async with asking_at(self.setup, self.guard) as coordinator:
            self._coordinator = coordinator
            assert self._ready is not None
            self._ready.set()
            await self._closing.wait()

    def node(self) -> str:
        """The id of the Ray node this worker runs on."""
        return self.node_id

    async def answer(self, question: Question, planned: Planned | None) -> tuple[Answer, str]:
        """The question's answer, as ``planned`` by the driver (None: read here), and the node it was found on."""
        if self._ready is None:  # the first question opens the sessions every later one uses
            self._ready = asyncio.Event()
            self._holder = asyncio.ensure_future(self._hold())
        await self._ready.wait()
        assert self._coordinator is not None
        return await answer(question, self.setup, self._coordinator, planned), self.node_id

    async def close(self) -> tuple[Memory, str]:
        """Close the sessions and flush this worker's spans; its memory before closing, and its node."""
        memory = Memory.of_this_process()
        self._closing.set()
        if self._holder is not None:
            await self._holder
        flush_spans(5000)
        return memory, self.node_id
