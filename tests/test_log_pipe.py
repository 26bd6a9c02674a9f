"""A registered server's stderr pipe: redacted line by line, and closing it never stalls the event loop.

A server may leave a grandchild holding its stderr open; the pipe then waits up to ``settle_s`` for the
copy to end. That wait must run off the event loop, or every other session and the query's deadline
stand still meanwhile.
"""

from __future__ import annotations

import sys
import tempfile

import anyio
import anyio.abc
import pytest

from traces.logs import redacting_pipe

pytestmark = pytest.mark.anyio


async def test_lines_reach_the_log_redacted() -> None:
    with tempfile.TemporaryFile("w+", encoding="utf-8") as log:
        async with redacting_pipe(log) as errlog:
            await anyio.run_process(
                [sys.executable, "-c", "import sys; print('call me on 07700 900123', file=sys.stderr)"],
                stderr=errlog,
            )
        log.seek(0)
        kept = log.read()
    assert "call me on" in kept
    assert "07700" not in kept and "900123" not in kept


async def test_waiting_for_a_lingering_writer_lets_the_loop_run() -> None:
    ticks_while_closing = 0
    closing = False
    closed = anyio.Event()
    with tempfile.TemporaryFile("w+", encoding="utf-8") as log:
        grandchild: anyio.abc.Process | None = None
        try:

            async def close_with_a_writer_left() -> None:
                nonlocal grandchild, closing
                async with redacting_pipe(log, settle_s=0.5) as errlog:
                    # Holds a copy of the pipe's write end past the context: the copy cannot end.
                    grandchild = await anyio.open_process(
                        [sys.executable, "-c", "import time; time.sleep(30)"], stderr=errlog
                    )
                    closing = True
                closed.set()

            async def count_ticks() -> None:
                nonlocal ticks_while_closing
                while not closed.is_set():
                    ticks_while_closing += closing
                    await anyio.sleep(0.01)

            with anyio.fail_after(10):
                async with anyio.create_task_group() as tasks:
                    tasks.start_soon(close_with_a_writer_left)
                    tasks.start_soon(count_ticks)
        finally:
            if grandchild is not None:
                grandchild.kill()
                await grandchild.wait()
    assert ticks_while_closing > 1
