"""The forked source's socket read as a stream: a read cancelled as its answer arrives is no error.

`research ask` interrupted by Ctrl-C cancels every session's reader; a source answering in that very
turn of the loop made asyncio log "Exception in callback Future.set_result(None)" and a traceback
on stderr (seen once in a CI run of tests/test_deadlines.py). The steps below put an answer on the
socket and cancel the read in the same turn, every time.
"""

from __future__ import annotations

import asyncio
import socket
from collections.abc import Awaitable, Callable
from typing import Any

import anyio
import pytest
from anyio.abc import ByteStream, UNIXSocketStream

from subagents.sessions.forked_transport import socket_stream

pytestmark = pytest.mark.anyio

ANSWER = b'{"jsonrpc": "2.0", "id": 1, "result": {}}\n'


async def _errors_of_a_read_cancelled_as_its_answer_arrives(
    wrap: Callable[[socket.socket], Awaitable[ByteStream]],
) -> list[dict[str, Any]]:
    """What the loop's exception handler was given while a read was cancelled in the turn its
    answer became readable."""
    loop = asyncio.get_running_loop()
    errors: list[dict[str, Any]] = []
    loop.set_exception_handler(lambda _loop, context: errors.append(context))
    ours, theirs = socket.socketpair()
    try:
        with anyio.fail_after(10), theirs:
            stream = await wrap(ours)
            async with stream, anyio.create_task_group() as group:
                group.start_soon(stream.receive)
                await anyio.wait_all_tasks_blocked()  # the read waits for the socket
                theirs.sendall(ANSWER)
                # One turn of the loop: the selector finds the socket readable and queues the read's
                # wake-up behind this task, which then cancels the read before the wake-up runs.
                await asyncio.sleep(0)
                group.cancel_scope.cancel()
            await anyio.wait_all_tasks_blocked()  # whatever the turn queued has run
    finally:
        loop.set_exception_handler(None)
    return errors


async def test_a_read_cancelled_as_its_answer_arrives_leaves_no_error() -> None:
    assert await _errors_of_a_read_cancelled_as_its_answer_arrives(socket_stream) == []


async def test_the_same_steps_on_anyios_unix_socket_stream_log_the_error() -> None:
    """The steps above reach the window: on the stream this socket pair would suggest, they log the
    error. Should an anyio release close the window, this fails, and socket_stream may go."""
    errors = await _errors_of_a_read_cancelled_as_its_answer_arrives(UNIXSocketStream.from_socket)
    assert [type(error.get("exception")) for error in errors] == [asyncio.InvalidStateError]
