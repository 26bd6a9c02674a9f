"""Imported by the fork server of ``sources.processes.forked`` alone (it is on its preload list): the fork
server leaves without the interpreter's teardown.

The fork server ends when the process that started it does, and it holds that process's stdout and
stderr. With the mcp SDK and the sources loaded, the interpreter's teardown takes about a quarter of
a second, during which a pipe from the command (``research ask --json | jq``) stays open and the
pipeline waits. Exiting from an exit handler skips the teardown; there is nothing to flush.
"""

import atexit
import os

atexit.register(os._exit, 0)
