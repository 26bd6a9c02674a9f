"""Log lines redacted as spans are: what a process logs (its messages, and the tracebacks they carry)
goes through ``traces.redact.for_trace`` before it is written, to stderr or to a log file."""

from __future__ import annotations

import logging
import os
import threading
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from typing import IO

import anyio

from traces.redact import for_trace

__all__ = ["RedactingFormatter", "redact_last_resort", "redacting_pipe"]

# A line longer than this is written in pieces: a child that never ends a line cannot grow the reader.
_LINE_CHARS = 64 * 1024


class RedactingFormatter(logging.Formatter):
    """A formatter whose whole line (message, arguments, traceback) is redacted."""

    def format(self, record: logging.LogRecord) -> str:
        return str(for_trace(super().format(record)))


def redact_last_resort() -> None:
    """A process that configures no logging prints warnings through ``logging.lastResort``: redacted too,
    and still the bare message it was."""
    if logging.lastResort is not None:
        logging.lastResort.setFormatter(RedactingFormatter())


@asynccontextmanager
async def redacting_pipe(log: IO[str], *, settle_s: float = 1.0) -> AsyncIterator[IO[str]]:
    """A file to hand a child process as its stderr: each line it writes reaches ``log`` redacted.

    A registered server logs what it likes (the questions it was asked, the records it answered), and
    the project keeps that log in the data folder, so it is redacted as spans are. A thread copies: the
    child writes to a real pipe, as it would to a file. The copy ends when every writer has closed
    (the child has exited); a grandchild that keeps the pipe open past ``settle_s`` is left to it, and
    nothing more is written once ``log`` is closed. The wait for the copy runs on a worker thread, so
    the event loop (the other sessions, the deadline) goes on meanwhile."""
    read_end, write_end = os.pipe()
    writer = os.fdopen(write_end, "w", encoding="utf-8")

    def copy() -> None:
        with os.fdopen(read_end, encoding="utf-8", errors="replace") as lines:
            while line := lines.readline(_LINE_CHARS):
                try:
                    log.write(str(for_trace(line)))
                    log.flush()
                except ValueError:  # the log was closed under a child that outlived its session
                    return

    copying = threading.Thread(target=copy, name="redacting stderr", daemon=True)
    copying.start()
    try:
        yield writer
    finally:
        writer.close()
        await anyio.to_thread.run_sync(copying.join, settle_s, abandon_on_cancel=True)
