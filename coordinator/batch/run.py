"""A batch from start to end: the fleet, the engine, the questions in flight, the summary.

The questions run ``concurrency`` at a time; each answer is written the moment it arrives (whole or
not at all, ``coordinator.batch.store``), so an interrupted batch keeps every finished report and a
rerun asks only what is missing. In Claude mode a question starts only when the batch's token
budget still holds a whole question's budget (reserved at the start, the unused part given back at
the end), so the batch can never spend past its total; what did not start is counted and asked by
the next run.
"""

from __future__ import annotations

import contextlib
import socket
import time
from collections.abc import Callable, Iterator, Mapping
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any, Protocol

import anyio

from coordinator.batch.memory import Memory
from coordinator.batch.questions import Question, read_questions
from coordinator.batch.store import BatchDir, EarlierRun, LinkRefused
from coordinator.batch.summary import Tally, summarize
from coordinator.batch.trusted import UntrustedFile, kept
from coordinator.batch.work import Answer, Setup
from coordinator.registry import Registry
from sources.catalogue import SOURCES
from sources.faults import FaultSettings
from sources.processes.fleet import Fleet
from sources.settings import SourceSettings
from subagents.claude import ClaudeSettings
from subagents.guard import DEFAULT_RETRY_SHARE
from subagents.writes import Approval
from traces.setup import start_run

__all__ = ["Batch", "BatchError", "Engine", "Progress", "TokenPool", "batch_fleet", "run_batch"]


class BatchError(ValueError):
    """A batch that cannot run as asked; the message says why and what to do."""


@dataclass(frozen=True)
class Batch:
    """What `research batch` was asked to do."""

    questions: Path
    out: Path
    engine: str = "local"  # "local" | "ray"
    address: str | None = None  # a Ray cluster; None: local Ray
    concurrency: int = 8  # questions in flight across the batch
    workers: int = 2  # Ray worker processes
    deadline_s: float = 30.0  # per question, unless its line says otherwise
    seed: int = 0
    retry_share: float = DEFAULT_RETRY_SHARE
    bulkhead: int | None = 8  # concurrent calls per source, fleet-wide
    faults: Mapping[str, FaultSettings] = field(default_factory=dict)
    urls: Mapping[str, str] = field(default_factory=dict)  # a fleet given by URLs; empty: the batch's own
    claude: ClaudeSettings | None = None
    total_tokens: int | None = None  # Claude mode: the batch's whole budget
    approvals: tuple[Approval, ...] = ()  # --approve: the only writes any question may make (no prompt)
    registry: Registry = field(default_factory=lambda: Registry(None))  # the sources in effect
    resume: bool = False  # --resume: carry on with the batch whose files --out holds
    fleet_host: str = "127.0.0.1"  # --fleet-host: the address the batch's own fleet listens on


class Engine(Protocol):
    workers: int
    memory: list[Memory]  # each worker's, as the engine closed

    async def __aenter__(self) -> Engine: ...

    async def __aexit__(self, *exc: Any) -> None: ...

    async def answer(self, question: Question) -> Answer: ...

    async def budget(self) -> dict[str, dict[str, int]]: ...


class Progress(Protocol):
    def started(self, total: int, skipped: int) -> None: ...

    def answered(self, answer: Answer, tally: Tally) -> None: ...


@dataclass
class TokenPool:
    """The batch's tokens: a question reserves its whole budget to start and gives back what it did not use."""

    total: int
    per_question: int
    used: int = 0
    reserved: int = 0
    _settled: anyio.Event | None = None

    def reserve(self) -> bool:
        if self.used + self.reserved + self.per_question > self.total:
            return False
        self.reserved += self.per_question
        return True

    async def take(self) -> bool:
        """Reserve a question's budget, waiting while questions in flight may give some back; False
        once none is in flight and what is left cannot hold a whole question."""
        while not self.reserve():
            if self.reserved == 0:
                return False
            self._settled = self._settled or anyio.Event()
            await self._settled.wait()
        return True

    def settle(self, used: int) -> None:
        self.reserved -= self.per_question
        self.used += used
        if self._settled is not None:  # wake the questions waiting for a reservation
            self._settled.set()
            self._settled = None


def _free_ports(count: int, host: str) -> list[int]:
    """Ports nothing listens on now at ``host``, for a fleet of the batch's own beside any other on this machine."""
    with contextlib.ExitStack() as held:
        family = socket.AF_INET6 if ":" in host else socket.AF_INET
        sockets = [held.enter_context(socket.socket(family)) for _ in range(count)]
        for each in sockets:
            each.bind((host, 0))
        return [int(each.getsockname()[1]) for each in sockets]


@contextlib.contextmanager
def batch_fleet(settings: SourceSettings, batch: Batch) -> Iterator[dict[str, str]]:
    """The sources' URLs for the batch: given, the running fleet's, or a fleet started (and stopped) here.

    Faults are set on the fleet through its chaos control, so a fleet of the batch's own starts with
    chaos control when there are faults; a running fleet must have been started with it
    (``FleetError`` says so otherwise), and its faults are cleared again at the end."""
    if batch.urls:
        missing = [source for source in SOURCES if source not in batch.urls]
        if missing:
            raise BatchError(
                f"--url names no URL for {', '.join(missing)}; give every source, e.g. orders=http://127.0.0.1:8102/mcp"
            )
        if batch.faults:
            raise BatchError(
                "--faults are set through a fleet's chaos control, not on sources given by --url: "
                "leave out --url to use the running fleet (`research sources up --chaos`) or one of the batch's own"
            )
        yield dict(batch.urls)
        return
    fleet = Fleet(settings)
    running = any(member.alive() for member in fleet.members().values())
    if not running:
        ports = dict(zip(SOURCES, _free_ports(len(SOURCES), batch.fleet_host), strict=True))
        fleet.up(ports, chaos_control=bool(batch.faults), host=batch.fleet_host)
    try:
        for source, faults in batch.faults.items():
            fleet.set_faults(source, faults)
        yield fleet.urls()
    finally:
        if not running:
            fleet.down()
        else:  # a fleet the batch found running is left as it was found
            for source in batch.faults:
                fleet.set_faults(source, FaultSettings())


def run_batch(
    batch: Batch, settings: SourceSettings, make_engine: Callable[[Setup], Engine], progress: Progress
) -> dict[str, Any]:
    """Run every question of ``batch`` without a report yet; the batch's summary (also in summary.json).

    ``settings`` are the run's (its traces go to the batch folder); ``make_engine`` builds the engine
    for the fleet's URLs. ``KeyboardInterrupt`` passes through once the summary of what finished is
    written. A folder an earlier batch wrote into is refused unless ``batch.resume``, and then any
    file in it that is not this project's for its question (``BatchError``, before anything runs)."""
    folder = BatchDir(batch.out)
    questions = read_questions(batch.questions)
    done = _resumable(folder, batch, questions)
    tally, started = Tally(resumed=len(done)), time.monotonic()
    # This run's spans (this process's, the workers' and the fleet's it starts) go to the batch folder.
    chosen = None if settings.trace_exporters is None else list(settings.trace_exporters)
    run_id = start_run("research-coordinator", folder.traces, exporters=chosen)
    settings = replace(settings, traces_dir=folder.traces, run_id=run_id)
    pending = [question for question in questions if question.id not in done]
    progress.started(len(questions), len(questions) - len(pending))
    try:
        if pending:
            with batch_fleet(settings, batch) as urls:
                setup = Setup(
                    settings,
                    urls,
                    batch.deadline_s,
                    batch.seed,
                    batch.claude,
                    batch.approvals,
                    batch.registry,
                )
                anyio.run(_ask_all, make_engine(setup), pending, batch, folder, tally, progress)
    finally:
        wall_s = time.monotonic() - started
        try:
            summary = summarize(folder, tally, questions=questions, wall_s=wall_s, engine=batch.engine)
        except UntrustedFile as exc:  # checked before the run: a file changed under the running batch
            raise BatchError(str(exc)) from None
        folder.write_summary(summary)
    return summary


def _resumable(folder: BatchDir, batch: Batch, questions: list[Question]) -> set[str]:
    """The ids of the questions whose report an earlier run left, once ``folder`` is ready for the
    batch; ``BatchError`` in one line when it cannot be used as asked."""
    try:
        folder.prepare(resume=batch.resume)
        return set(kept(folder, questions).reports)
    except (LinkRefused, EarlierRun) as exc:
        raise BatchError(f"--out {batch.out} {exc}") from None
    except UntrustedFile as exc:
        raise BatchError(str(exc)) from None
    except OSError as exc:
        raise BatchError(
            f"--out {batch.out} cannot be the batch's folder ({exc.strerror}): name a folder to create, or one of yours"
        ) from None


async def _ask_all(
    engine: Engine, pending: list[Question], batch: Batch, folder: BatchDir, tally: Tally,
    progress: Progress,
) -> None:  # fmt: skip
    """Up to ``concurrency`` lanes, each taking the next question as it finishes the last."""
    tokens = None
    if batch.claude is not None and batch.total_tokens is not None:
        tokens = TokenPool(batch.total_tokens, batch.claude.token_budget)
    queue = iter(pending)  # shared by the lanes: each question is taken by one
    tally.workers = engine.workers

    async def lane() -> None:
        for question in queue:
            if tokens is not None and not await tokens.take():
                tally.not_started += 1
                continue
            answer = await engine.answer(question)
            if tokens is not None:
                tokens.settle(answer.tokens_used)
            _keep(folder, answer)
            tally.add(answer.status, len(answer.violations))
            tally.budget = await engine.budget()
            progress.answered(answer, tally)

    try:
        async with engine:
            asking_from = time.monotonic()  # the fleet and the workers are up: the questions' own time
            try:
                async with anyio.create_task_group() as lanes:
                    for _ in range(min(batch.concurrency, len(pending))):
                        lanes.start_soon(lane)
            finally:
                tally.asking_s = time.monotonic() - asking_from
                with anyio.CancelScope(shield=True):
                    tally.budget = await engine.budget()
    finally:  # what the engine knows of its workers, an interrupted batch's too
        tally.memory = engine.memory
        # The Ray engine's (coordinator.batch.ray_engine); the local one runs on no node of Ray.
        tally.worker_nodes = list(getattr(engine, "worker_nodes", []))
        tally.questions_by_node = dict(getattr(engine, "questions_by_node", {}))
        tally.asked_again = int(getattr(engine, "asked_again", 0))
        tally.questions_asked_again = list(getattr(engine, "questions_asked_again", []))


def _keep(folder: BatchDir, answer: Answer) -> None:
    if answer.report_json is None:
        folder.write_failure(answer.id, answer.query, answer.error)
        return
    folder.write_violations(answer.id, answer.violations)
    folder.write_report(answer.id, answer.report_json)
