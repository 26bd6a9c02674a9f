"""Stdio sources forked from a process that has already imported them.

A source spawned as ``python -m sources.NAME`` spends 1.2 to 1.5 s of CPU importing the mcp SDK
(its protocol types are pydantic models, built at import) before it can answer. A query that starts
five sources, and the coordinator itself, import it six times: some 10 CPU-seconds, which a
two-core machine needs 5 s for. Python's ``multiprocessing`` fork server exists for this: one server
process imports the sources once, then forks a child per source in milliseconds.

Each child is still a process of its own (killed, hung or crashed alone, with its own faults), and
speaks MCP exactly as a spawned source does, one JSON-RPC message per line on its fds 0 and 1; here
both are its end of a socket pair whose other end the coordinator holds. When the coordinator closes
its end, or dies, the child reads the end of its input and leaves at once.

``prestart()`` is the coordinator's first step, so the fork server's imports run on the second core
while the coordinator imports its own. The fork server ends with the process that started it.

The fork server starts from a minimal environment of its own (what a spawned child inherits: PATH,
HOME, the locale, Python's own variables), never the coordinator's: the coordinator's secrets (its
signing key, an API key, anything else in its environment) are not in the server's memory, nor in
any source forked from it. Each source is then given only its own settings.

This module stays light to import: the fork server, not the caller, imports the sources.
"""

from __future__ import annotations

import contextlib
import importlib
import multiprocessing
import os
import socket
import sys
from collections.abc import Iterator
from multiprocessing import forkserver
from multiprocessing.process import BaseProcess
from pathlib import Path
from typing import TYPE_CHECKING

from sources.catalogue import SOURCES
from sources.deferred import deferred
from sources.processes.lifeline import exit_when_stdin_hangs_up
from sources.settings import SourceSettings

# Loaded where they are first used: the mcp SDK in the fork server (serve is on its preload list),
# not in the caller; setproctitle in each child.
if TYPE_CHECKING:
    import setproctitle

    from sources.processes import serve
else:
    setproctitle = deferred("setproctitle")
    serve = deferred("sources.processes.serve")

__all__ = ["ForkedSource", "prestart", "start", "title"]

# What the fork server imports once, for every child to share: the sources, how they serve, and
# what the SDK imports only once a server starts. ``__main__`` too, as multiprocessing would import
# it in every child otherwise (a guarded script, as ``research`` is, does nothing more). Also what a
# child loads on its way to its first answer that the modules above defer (the settings' reading of
# the environment with pydantic-settings, the public key, the process title, the worker threads of
# stdio, what multiprocessing itself needs in a child): imported in each of five children at once,
# those took 0.1 to 0.2 s of CPU each.
# ``tests/test_fork_server.py`` holds that a child imports nothing more before it answers a call.
_PRELOAD = [
    "sources.processes.fork_server_unswept",  # first: no garbage collection while it loads
    "sources.processes.fork_server_exit",
    "__main__",
    "anyio._backends._asyncio",
    "concurrent.futures.thread",
    "multiprocessing.popen_forkserver",  # a child unpickles its Process, and the function it runs:
    "sources.processes.forked",  # ... this module's ``_serve``
    "rich.console",  # the SDK's logging set-up, as a server is created
    "rich.logging",
    "setproctitle",
    "sources.environment",
    "sources.security.keys",
    "jwt",  # deferred by sources.security.auth, which a call with a credential verifies with
    "sources.processes.lifeline",
    "sources.processes.serve",
    *(f"sources.{source}" for source in SOURCES),
    "sources.processes.fork_server_frozen",  # last: freezes all of the above, collection resumes
]
# Variables a child takes from the coordinator's settings only, never from the fork server's copy
# of the coordinator's environment (the same rule as a spawned child's cleaned environment).
_OWN_PREFIXES = ("RESEARCH_", "OTEL_")

# What the fork server inherits of the coordinator's environment: what the mcp SDK passes a spawned
# stdio server (DEFAULT_INHERITED_ENV_VARS), the locale, what Python itself reads, and whether
# pydantic loads plugins.
_INHERITED = (
    "HOME",
    "LOGNAME",
    "PATH",
    "SHELL",
    "TERM",
    "USER",
    "LANG",
    "LC_ALL",
    "LC_CTYPE",
    "TZ",
    "TMPDIR",
    "PYDANTIC_DISABLE_PLUGINS",  # whether pydantic looks for plugins (``coordinator.cli`` says)
)
_INHERITED_PREFIXES = ("PYTHON",)

_context = multiprocessing.get_context("forkserver")


def title(source: str) -> str:
    """What ``ps`` shows for a forked source: its module, as for a spawned ``python -m sources.NAME``."""
    return f"research-source sources.{source}"


class ForkedSource:
    """A forked source: its process, and the coordinator's end of its socket."""

    def __init__(self, source: str, process: BaseProcess, wire: socket.socket) -> None:
        self.source = source
        self.process = process
        self.wire = wire

    def kill(self) -> None:
        with contextlib.suppress(OSError, ValueError, AttributeError):  # already gone, or closed
            self.process.kill()

    def forget(self) -> None:
        """The source has ended: release its process handle."""
        with contextlib.suppress(ValueError):  # still running: the handle is released with the process
            self.process.close()


def prestart() -> None:
    """Start the fork server now: it imports the sources while this process goes on with its own work."""
    _context.set_forkserver_preload(_PRELOAD)
    if _server_running():
        forkserver.ensure_running()  # as it is: the environment is not touched while others may read it
        return
    with _environment_only(_inherited()):
        forkserver.ensure_running()


def _server_running() -> bool:
    pid = getattr(forkserver._forkserver, "_forkserver_pid", None)  # no public accessor
    if pid is None:
        return False
    try:
        state = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]
    except (OSError, IndexError):
        return os.name != "posix" or not Path("/proc/self").exists()  # no /proc: trust ensure_running
    return state != "Z"


def _inherited() -> dict[str, str]:
    return {
        name: value
        for name, value in os.environ.items()
        if name in _INHERITED or name.startswith(_INHERITED_PREFIXES)
    }


@contextlib.contextmanager
def _environment_only(environment: dict[str, str]) -> Iterator[None]:
    """This process's environment is ``environment`` for the block: what a process started in it
    inherits (``ensure_running`` starts the fork server with the environment in effect)."""
    saved = dict(os.environ)
    os.environ.clear()
    os.environ.update(environment)
    try:
        yield
    finally:
        os.environ.clear()
        os.environ.update(saved)


def start(source: str, environment: dict[str, str]) -> ForkedSource:
    """Fork a source serving stdio on a socket; ``environment`` is what a spawned child would get.

    Blocks until the fork server has forked the child (the first time, until it has imported the
    sources): call it from a worker thread in async code.
    """
    if source not in SOURCES:
        raise ValueError(f"no source named {source!r}; the sources are {', '.join(SOURCES)}")
    prestart()
    ours, theirs = socket.socketpair()
    process = _context.Process(
        target=_serve, args=(source, theirs, environment), name=f"research-source-{source}", daemon=True
    )
    try:
        process.start()
    except BaseException:
        ours.close()
        raise
    finally:
        theirs.close()  # the child has its own copy; ours would keep its input from ever ending
    return ForkedSource(source, process, ours)


def _serve(source: str, wire: socket.socket, environment: dict[str, str]) -> None:
    """In the child: become a stdio source on ``wire``."""
    setproctitle.setproctitle(title(source))
    for name in [name for name in os.environ if name.startswith(_OWN_PREFIXES)]:
        del os.environ[name]
    os.environ.update(environment)
    sys.stdout.flush()
    os.dup2(wire.fileno(), 0)
    os.dup2(wire.fileno(), 1)
    wire.close()
    sys.stdin = open(0, encoding="utf-8", closefd=False)  # noqa: SIM115  (the process's own stdin)
    sys.stdout = open(1, "w", encoding="utf-8", closefd=False)  # noqa: SIM115
    exit_when_stdin_hangs_up()
    try:
        settings = SourceSettings.from_environment()
    except ValueError as exc:  # bad settings: one plain line on stderr, as a spawned source prints
        print(f"error: {exc}", file=sys.stderr, flush=True)
        os._exit(1)
    serve.serve_stdio(importlib.import_module(f"sources.{source}").create_server, source, settings)
