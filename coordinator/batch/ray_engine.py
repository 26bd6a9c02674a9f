"""The Ray engine: questions researched on Ray workers, the fleet's rules held by one Ray actor.

    driver (research batch) ──answer(question, plan)──► BatchWorker × W  ──MCP over HTTP──► the fleet
                                                              │
                                             allow / record / spend_retry
                                                              ▼
                                                         GuardHost (one actor: breakers + retry budget)

The driver reads and plans each question (the deterministic planner, its matcher and word list loaded
once, there); a worker only runs the plan's tasks. In Claude mode the worker plans, within the question's
token budget.

Each ``BatchWorker`` is a process holding one set of sessions to the fleet and running many questions
at once (an async actor). Every call any worker makes asks the one ``GuardHost`` first: the breakers
and the retry budget are the fleet's, not a worker's, so four workers retrying a degraded source
spend one budget between them. The bulkhead is each worker's share of the fleet-wide cap (see
``subagents.guard`` for why it stays in the process). Local Ray by default; ``address`` joins a
cluster (``auto`` or the head's ``HOST:6379`` from a node of it), where the workers need this
project installed and must reach the fleet's URLs.

On a cluster the workers are spread over its nodes (one per node while nodes have room), and the
guard stays on the driver's node: a node that dies takes its workers, never the fleet's budget.
Each answer says the node it came from (``questions_by_node``); ``worker_nodes`` is where each
worker last answered. A node that dies mid-batch: its workers' questions in flight fail with
``RayActorError`` and are asked again on another worker (``answer``); the dead workers are set
aside, new questions going to the others, until Ray has started them again (on a node with room)
and they answer once more.
"""

from __future__ import annotations

import asyncio
import logging
import os
import uuid
from types import TracebackType
from typing import Any

import ray
from ray.util.scheduling_strategies import NodeAffinitySchedulingStrategy

from coordinator.batch.memory import Memory
from coordinator.batch.questions import Question
from coordinator.batch.ray_worker import BatchWorker, GuardHost
from coordinator.batch.work import Answer, Setup, read, reading_coordinator

__all__ = ["RayEngine"]


_PROBE_S = 1.0  # how often a worker set aside is asked whether it is up again
_CLOSE_S = 30.0  # a worker that has not closed by then is left to Ray (its memory is not reported)


class RayEngine:
    def __init__(
        self, setup: Setup, *, workers: int, retry_share: float, bulkhead: int | None, address: str | None
    ) -> None:
        self.setup = setup
        self.workers = workers
        self.retry_share = retry_share
        # The fleet-wide cap shared out: each worker holds its part, at least one call per source.
        self.bulkhead = None if bulkhead is None else max(1, bulkhead // workers)
        self.address = address
        self.memory: list[Memory] = []  # each worker's, as it closed
        self.worker_nodes: list[str | None] = [None] * workers  # where each worker last answered
        self.questions_by_node: dict[str, int] = {}  # the answers each node's workers gave
        self.asked_again = 0  # questions asked once more because their worker died under them
        self.questions_asked_again: list[str] = []  # their ids
        self._started_ray = False
        self._pool: list[Any] = []
        self._busy: list[int] = []
        self._aside: set[int] = set()  # workers that died, until they answer again
        self._probes: set[asyncio.Task[None]] = set()
        self._host: Any = None
        self._counts: dict[str, dict[str, int]] = {}
        # The deterministic planner reads every question here, once: a worker then loads neither its
        # matcher nor its word list. Claude plans in the worker, within the question's token budget.
        self._reader = reading_coordinator(setup) if setup.claude is None else None

    async def __aenter__(self) -> RayEngine:
        if not ray.is_initialized():
            # Ray's own notices (token authentication is on, as it should be) only when asked.
            level = logging.WARNING if os.environ.get("RESEARCH_RAY_LOGS") else logging.ERROR
            if self.address:
                ray.init(address=self.address, log_to_driver=False, logging_level=level)
            else:  # on loopback alone when the command runs in its namespace (coordinator.batch.loopback)
                ray.init(
                    num_cpus=self.workers, include_dashboard=False, log_to_driver=False, logging_level=level
                )
            self._started_ray = True
        # ray.remote turned the classes into actor classes, whose .remote() mypy cannot see.
        host = f"research-batch-guard-{uuid.uuid4().hex}"
        # The guard on this node, the driver's (if it dies, so does the batch): not soft, which Ray
        # takes as leave to place a CPU-less actor on any node, one that may die under the batch.
        # The workers spread over the nodes, where Ray's default would pack them onto this one.
        here = NodeAffinitySchedulingStrategy(ray.get_runtime_context().get_node_id(), soft=False)
        self._host = GuardHost.options(name=host, scheduling_strategy=here).remote(  # type: ignore[attr-defined]  # an actor class
            self.retry_share
        )
        spread = BatchWorker.options(scheduling_strategy="SPREAD")  # type: ignore[attr-defined]  # an actor class
        self._pool = [
            spread.remote(self.setup, host, self.bulkhead, 1 / self.workers) for _ in range(self.workers)
        ]
        self._busy = [0] * self.workers
        return self

    async def __aexit__(
        self, kind: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        for probe in self._probes:
            probe.cancel()
        try:
            if kind is None:  # an interrupted batch leaves at once: its workers end with Ray
                # A worker set aside has no sessions to close (and may never be started again).
                up = [index for index in range(self.workers) if index not in self._aside]
                closed = await asyncio.gather(*(self._close(index) for index in up))
                self.memory = [memory for memory, _ in filter(None, closed)]
        finally:
            if self._started_ray:
                ray.shutdown()

    async def _close(self, index: int) -> tuple[Memory, str] | None:
        try:
            memory, node = await asyncio.wait_for(_awaited(self._pool[index].close.remote()), _CLOSE_S)
        except (TimeoutError, ray.exceptions.RayActorError):  # died as the batch ended
            return None
        self.worker_nodes[index] = node
        return memory, str(node)

    async def answer(self, question: Question) -> Answer:
        """The question answered by the least busy worker that is up; if that worker dies (its node
        with it, or it is restarting), by another one, once, in the deterministic mode: its planner
        plans no tool that writes, so asking again changes nothing. A model might have planned one
        (a refund): there it is ``failed``, and the same command again asks it. Either way the
        question has one answer, so one report."""
        planned = None
        if self._reader is not None:
            read_here = await read(question, self.setup, self._reader)
            if isinstance(read_here, Answer):  # nobody can plan for it
                return read_here
            planned = read_here
        tried: set[int] = set()
        attempts = min(2, self.workers) if self.setup.claude is None else 1
        while True:
            index = self._least_busy(tried)
            self._busy[index] += 1
            try:
                got: tuple[Answer, str] = await self._pool[index].answer.remote(question, planned)
            except ray.exceptions.RayActorError as exc:  # the worker died, or is being started again
                tried.add(index)
                self._set_aside(index)
                if len(tried) == attempts:
                    return _failed(question, exc)
                self.asked_again += 1
                self.questions_asked_again.append(question.id)
                continue
            except ray.exceptions.RayError as exc:  # our code raised in the worker: a bug, said in one line
                return _failed(question, exc)
            finally:
                self._busy[index] -= 1
            answered, node = got
            self.worker_nodes[index] = node
            self.questions_by_node[node] = self.questions_by_node.get(node, 0) + 1
            return answered

    def _least_busy(self, tried: set[int]) -> int:
        """By hand rather than ray.util.ActorPool: its get_next() blocks a thread, and the lanes await.
        A worker set aside is chosen only when every other one was tried or is aside too."""
        untried = [each for each in range(self.workers) if each not in tried]
        up = [each for each in untried if each not in self._aside] or untried
        return min(up, key=self._busy.__getitem__)

    def _set_aside(self, index: int) -> None:
        if index not in self._aside:
            self._aside.add(index)
            probe = asyncio.ensure_future(self._probe(index))
            self._probes.add(probe)
            probe.add_done_callback(self._probes.discard)

    async def _probe(self, index: int) -> None:
        """Until the worker answers again: Ray starts it anew where there is room (a call waits for
        that); until Ray knows it dead, a call to it fails, and is made again a moment later."""
        while True:
            try:
                node: str = await self._pool[index].node.remote()
            except ray.exceptions.RayActorError:
                await asyncio.sleep(_PROBE_S)
                continue
            self.worker_nodes[index] = node
            self._aside.discard(index)
            return

    async def budget(self) -> dict[str, dict[str, int]]:
        try:
            counts: dict[str, dict[str, int]] = await self._host.counts.remote()
        except ray.exceptions.RayActorError:  # the guard is being started again: its counts as last read
            return self._counts
        self._counts = counts
        return counts


async def _awaited(ref: Any) -> Any:
    """An object ref's value, as a coroutine (what ``asyncio.wait_for`` takes)."""
    return await ref


def _failed(question: Question, exc: BaseException) -> Answer:
    last = str(exc).strip().splitlines()[-1:] or [type(exc).__name__]  # the cause, not a traceback
    return Answer(question.id, question.query, "failed", error=f"the Ray worker failed: {last[0]}")
