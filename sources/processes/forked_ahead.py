"""Sources forked ahead of their sessions.

`research ask` knows which sources its plan calls, and the environment each is started with, half a
second before it has imported the mcp client it talks to them with. A source forked only when its
session opens then starts (its world checked, its tracer and server set up: 20 to 50 ms of CPU each,
five at once) while the coordinator waits for its first answer. Forked ahead, it has done all that
by then, on the core the coordinator's imports leave free, and waits on its input.

A child forked ahead is taken by the first session opened for the same source with the same
environment, never by another (a session reopened after its source died forks a fresh one). One
never taken ends with the process that asked for it: its input closes, and it leaves
(``sources.processes.lifeline``). So it is for a command that is about to open those sessions, not
for a process that lives on.
"""

from __future__ import annotations

import threading
from concurrent.futures import Future

from sources.processes import forked

__all__ = ["fork_ahead", "take_or_start"]

_Key = tuple[str, frozenset[tuple[str, str]]]
_ahead: dict[_Key, Future[forked.ForkedSource]] = {}
_lock = threading.Lock()


def fork_ahead(source: str, environment: dict[str, str]) -> None:
    """Fork ``source`` now, in a thread of its own: forking waits for the fork server's imports."""
    future: Future[forked.ForkedSource] = Future()
    with _lock:
        if _key(source, environment) in _ahead:
            return
        _ahead[_key(source, environment)] = future

    def fork() -> None:
        try:
            future.set_result(forked.start(source, environment))
        except Exception as exc:  # the session's own start says why, again, when it opens
            future.set_exception(exc)

    threading.Thread(target=fork, name=f"fork-ahead-{source}", daemon=True).start()


def take_or_start(source: str, environment: dict[str, str]) -> forked.ForkedSource:
    """The child forked ahead for ``source`` with ``environment``, else one forked now. Blocks until it
    is forked: call it from a worker thread in async code."""
    with _lock:
        future = _ahead.pop(_key(source, environment), None)
    if future is not None and future.exception() is None:
        return future.result()
    return forked.start(source, environment)


def _key(source: str, environment: dict[str, str]) -> _Key:
    return source, frozenset(environment.items())
