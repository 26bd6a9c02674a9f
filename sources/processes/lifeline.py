"""A stdio source exits the moment its client hangs up, even while it is still starting.

A client ends a stdio session by closing the source's stdin (MCP's shutdown), and a client that dies
closes it too. The server notices the end of its input only once it serves (``sources.processes.serve`` then
leaves at once): a source still importing (a second or more on a busy machine) would finish starting
for nobody, and the SDK's client waits up to two seconds for it before a SIGTERM. So from its first
instant a stdio source watches its stdin for a hang-up (POLLHUP: the last writer closed) without
reading it, and ends the process at once, quietly. Once the server serves, the SDK points fd 0
elsewhere and this watch falls silent: the server's own end of input takes over.

Written by hand because this is a property of how our sources are spawned: no library watches a
pipe for a hang-up without consuming it.
"""

from __future__ import annotations

import os
import select
import stat
import threading

__all__ = ["exit_when_stdin_hangs_up"]


def exit_when_stdin_hangs_up() -> None:
    """Watch stdin, when it is a pipe or a socket (a forked source), and exit the process as soon as
    no one can write to it."""
    try:
        mode = os.fstat(0).st_mode
        if not (stat.S_ISFIFO(mode) or stat.S_ISSOCK(mode)):
            return  # a terminal, /dev/null (a fleet member over HTTP): nothing hangs up
    except OSError:
        return
    poller = select.poll()
    poller.register(0, 0)  # no events asked for: poll always reports POLLHUP and POLLERR

    def watch() -> None:
        while True:
            for _, events in poller.poll():
                if events & (select.POLLHUP | select.POLLERR | select.POLLNVAL):
                    os._exit(0)  # nothing to flush: spans are exported as they end, stdout is the client's

    threading.Thread(target=watch, name="stdin-lifeline", daemon=True).start()
