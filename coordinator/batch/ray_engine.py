"""The Ray engine: questions researched on Ray workers, the fleet's rules held by one Ray actor.

    driver (research batch) ──answer(question)──► BatchWorker × W  ──MCP over HTTP──► the fleet
                                                        │
                                       allow / record / spend_retry
                                                        ▼
                                                   GuardHost (one actor: breakers + retry budget)

Each ``BatchWorker`` is a process holding one set of sessions to the fleet and running many questions
at once (an async actor). Every call any worker makes asks the one ``GuardHost`` first: the breakers
and the retry budget are the fleet's, not a worker's, so four workers retrying a degraded source
spend one budget between them. The bulkhead is each worker's share of the fleet-wide cap (see
``subagents.guard`` for why it stays in the process). Local Ray by default; ``address`` joins a
cluster (``ray://host:10001`` or ``auto``), where the workers need this project installed.
"""

from __future__ import annotations

import asyncio
import logging
import os
import time
import uuid
from contextlib import AbstractAsyncContextManager
from types import TracebackType
from typing import Any

import psutil
import ray

from coordinator.batch.questions import Question
from coordinator.batch.work import Answer, Asking, Setup, answer, asking_at
from subagents.guard import Bulkheads, SourceState, Verdict
from traces.setup import configure_tracing, flush_spans

__all__ = ["RayEngine"]


# A worker or the guard that dies is started again by Ray (its state anew: a restarted guard's budget
# counts from zero); the questions in flight on a dead worker are `failed`, and a rerun asks them.
_RESTARTS = 3


@ray.remote(num_cpus=0, max_restarts=_RESTARTS)
class GuardHost:
    """The fleet's breakers and retry budget, in one place. Its own clock: workers' clocks differ."""

    def __init__(self, retry_share: float, bulkhead: int | None) -> None:
        self.state = SourceState.shared(retry_share, bulkhead)

    def allow(self, source: str, first: bool) -> tuple[bool, float]:
        verdict = self.state.allow(source, time.monotonic(), first=first)
        return verdict.allowed, verdict.retry_in_s

    def record(self, source: str, failed: bool) -> tuple[bool, float]:
        verdict = self.state.record(source, failed, time.monotonic())
        return verdict.allowed, verdict.retry_in_s

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
        return Verdict(*await self.host.allow.remote(source, first))

    async def record(self, source: str, failed: bool, now: float) -> Verdict:
        return Verdict(*await self.host.record.remote(source, failed))

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

    def __init__(self, setup: Setup, host: str, bulkhead: int | None) -> None:
        configure_tracing(
            "research-coordinator", traces_dir=setup.settings.traces_path, run_id=setup.settings.run_id
        )
        self.setup = setup
        # The guard is found by its name: an actor handle among a restartable actor's constructor
        # arguments lives in the object store, and Ray warns that a restart may then fail.
        self.guard = RayGuard(ray.get_actor(host), Bulkheads(bulkhead))
        self._asking: Asking | None = None
        self._ready: asyncio.Event | None = None
        self._closing = asyncio.Event()
        self._holder: asyncio.Task[None] | None = None

    async def _hold(self) -> None:
        """Holds the sessions open in a task of its own (opened and closed in the same task)."""
        async with asking_at(self.setup, self.guard) as asking:
            self._asking = asking
            assert self._ready is not None
            self._ready.set()
            await self._closing.wait()

    async def answer(self, question: Question) -> Answer:
        if self._ready is None:  # the first question opens the sessions every later one uses
            self._ready = asyncio.Event()
            self._holder = asyncio.ensure_future(self._hold())
        await self._ready.wait()
        assert self._asking is not None
        return await answer(question, self._asking)

    async def close(self) -> int:
        """Close the sessions and flush this worker's spans; its memory (RSS, bytes) before closing."""
        rss = psutil.Process(os.getpid()).memory_info().rss
        self._closing.set()
        if self._holder is not None:
            await self._holder
        flush_spans(5000)
        return int(rss)


class RayEngine:
    def __init__(
        self, setup: Setup, *, workers: int, retry_share: float, bulkhead: int | None, address: str | None
    ) -> None:
        self.setup = setup
        self.workers = workers
        self.retry_share = retry_share
        # The fleet-wide cap shared out: each worker holds its part, at least one call per source.
        self.fleet_bulkhead = bulkhead
        self.bulkhead = None if bulkhead is None else max(1, bulkhead // workers)
        self.address = address
        self.memory_rss: list[int] = []
        self._started_ray = False
        self._pool: list[Any] = []
        self._busy: list[int] = []
        self._host: Any = None

    async def __aenter__(self) -> RayEngine:
        if not ray.is_initialized():
            # Ray's own notices (token authentication is on, as it should be) only when asked.
            level = logging.WARNING if os.environ.get("RESEARCH_RAY_LOGS") else logging.ERROR
            if self.address:
                ray.init(address=self.address, log_to_driver=False, logging_level=level)
            else:
                ray.init(
                    num_cpus=self.workers, include_dashboard=False, log_to_driver=False, logging_level=level
                )
            self._started_ray = True
        # ray.remote turned the classes into actor classes, whose .remote() mypy cannot see.
        host = f"research-batch-guard-{uuid.uuid4().hex}"
        self._host = GuardHost.options(name=host).remote(self.retry_share, self.fleet_bulkhead)  # type: ignore[attr-defined]  # an actor class
        self._pool = [
            BatchWorker.remote(self.setup, host, self.bulkhead)  # type: ignore[attr-defined]  # an actor class
            for _ in range(self.workers)
        ]
        self._busy = [0] * self.workers
        return self

    async def __aexit__(
        self, kind: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        try:
            if kind is None:  # an interrupted batch leaves at once: its workers end with Ray
                self.memory_rss = list(
                    await asyncio.gather(*(worker.close.remote() for worker in self._pool))
                )
        finally:
            if self._started_ray:
                ray.shutdown()

    async def answer(self, question: Question) -> Answer:
        """The question answered by the least busy worker; if that worker dies (or is restarting), by
        another one, once, in the deterministic mode: its planner plans no tool that writes, so asking
        again changes nothing. A model might have planned one (a refund): there it is ``failed``."""
        tried: set[int] = set()
        attempts = min(2, self.workers) if self.setup.claude is None else 1
        while True:
            # By hand rather than ray.util.ActorPool: its get_next() blocks a thread, and the lanes await.
            index = min(
                (each for each in range(self.workers) if each not in tried), key=self._busy.__getitem__
            )
            self._busy[index] += 1
            try:
                answered: Answer = await self._pool[index].answer.remote(question)
                return answered
            except ray.exceptions.RayActorError as exc:  # the worker died, or is being started again
                tried.add(index)
                if len(tried) == attempts:
                    return _failed(question, exc)
            except ray.exceptions.RayError as exc:  # our code raised in the worker: a bug, said in one line
                return _failed(question, exc)
            finally:
                self._busy[index] -= 1

    async def budget(self) -> dict[str, dict[str, int]]:
        counts: dict[str, dict[str, int]] = await self._host.counts.remote()
        return counts


def _failed(question: Question, exc: BaseException) -> Answer:
    last = str(exc).strip().splitlines()[-1:] or [type(exc).__name__]  # the cause, not a traceback
    return Answer(question.id, question.query, "failed", error=f"the Ray worker failed: {last[0]}")
