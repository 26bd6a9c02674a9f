"""Preloaded into the fork server by ``tests/test_fork_server.py``, first on its list: each child it forks
says on stderr, as it starts, how the garbage collector stands: on or off, how many objects are frozen,
and how many collections the fork server made while it loaded the rest of its list.
"""

import gc
import json
import os

REPORT_PREFIX = "collector after the fork: "
_COLLECTIONS_BEFORE = sum(generation["collections"] for generation in gc.get_stats())


def _report() -> None:
    collections = sum(generation["collections"] for generation in gc.get_stats()) - _COLLECTIONS_BEFORE
    state = {"enabled": gc.isenabled(), "frozen": gc.get_freeze_count(), "collections": collections}
    os.write(2, f"{REPORT_PREFIX}{json.dumps(state)}\n".encode())  # no buffer: a source leaves with os._exit


os.register_at_fork(after_in_child=_report)
