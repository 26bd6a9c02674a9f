"""Preloaded into the fork server by ``tests/test_fork_server.py``, first on its list: every module a forked
source loads after the fork is one line on stderr (the fork server's own imports are not).

Python's audit hook sees each import that loads a module (the ``import`` event), whoever asks for it.
"""

import os
import sys

REPORT_PREFIX = "imported after the fork: "
_FORK_SERVER = os.getpid()


def _report(event: str, args: tuple[object, ...]) -> None:
    if event == "import" and os.getpid() != _FORK_SERVER:
        os.write(2, f"{REPORT_PREFIX}{args[0]}\n".encode())  # no buffer: a source leaves with os._exit


sys.addaudithook(_report)
