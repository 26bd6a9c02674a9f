"""Ray's processes on loopback: every socket of a set of processes, those that reach past loopback,
and a network namespace of loopback alone for processes a test starts (a two-node cluster's).

A process in another network namespace has sockets that this one's ``/proc/net`` does not list (psutil
reads it there), so each namespace is listed from inside it (``nsenter --net``, as root; the suite runs
as root here). A socket that listens on every interface (``0.0.0.0``, ``::``) stays on loopback only in a
namespace whose one interface is loopback.
"""

from __future__ import annotations

import contextlib
import json
import os
import select
import shutil
import subprocess
import sys
from collections.abc import Iterable, Iterator
from dataclasses import dataclass
from pathlib import Path

import psutil
import pytest

__all__ = ["Socket", "batch_processes", "loopback_namespace", "off_loopback", "sockets_of"]

LOOPBACK = {"127.0.0.1", "::1", "::ffff:127.0.0.1"}
EVERY_INTERFACE = {"0.0.0.0", "::"}  # noqa: S104  (what is looked for, not bound)
_LIST = """
import json, sys, psutil
pids = set(json.loads(sys.argv[1]))
print(json.dumps([
    [c.pid, c.status, list(c.laddr) if c.laddr else None, list(c.raddr) if c.raddr else None]
    for c in psutil.net_connections(kind="inet") if c.pid in pids
]))
"""


@dataclass(frozen=True)
class Socket:
    pid: int
    command: str
    status: str
    local: tuple[str, int] | None
    remote: tuple[str, int] | None
    interfaces: frozenset[str]  # of the process's network namespace

    def __str__(self) -> str:
        where = f"{self.local} -> {self.remote}" if self.remote else f"{self.local}"
        return f"{self.command[:60]} (pid {self.pid}) {self.status} {where}, interfaces {sorted(self.interfaces)}"


def namespace(pid: int) -> str:
    return os.readlink(f"/proc/{pid}/ns/net")


def interfaces(pid: int) -> frozenset[str]:
    """The interfaces of ``pid``'s network namespace (``/proc/PID/net/dev`` is that namespace's)."""
    lines = Path(f"/proc/{pid}/net/dev").read_text().splitlines()[2:]
    return frozenset(line.split(":")[0].strip() for line in lines)


def batch_processes(driver: int) -> list[psutil.Process]:
    """The driver, every process it started (Ray's, the fleet's), and, when it runs in a network
    namespace of its own, every process in there (one Ray started detached included)."""
    root = psutil.Process(driver)
    found = {root.pid: root, **{each.pid: each for each in root.children(recursive=True)}}
    theirs = namespace(driver)
    if theirs != namespace(os.getpid()):
        for each in psutil.process_iter():
            with contextlib.suppress(psutil.Error, OSError):
                if namespace(each.pid) == theirs:
                    found[each.pid] = each
    return list(found.values())


def sockets_of(processes: Iterable[psutil.Process]) -> list[Socket]:
    """Every TCP and UDP socket the processes hold, listed from inside each one's network namespace."""
    if os.geteuid() != 0 or shutil.which("nsenter") is None:
        pytest.skip("listing the sockets of another network namespace needs root and nsenter")
    by_namespace: dict[str, dict[int, psutil.Process]] = {}
    for each in processes:
        with contextlib.suppress(psutil.Error, OSError):
            by_namespace.setdefault(namespace(each.pid), {})[each.pid] = each
    found: list[Socket] = []
    for members in by_namespace.values():
        some = next(iter(members))
        listing = subprocess.run(
            [_tool("nsenter"), f"--net=/proc/{some}/ns/net", "--", sys.executable, "-c", _LIST, json.dumps(list(members))],
            capture_output=True, text=True, timeout=30, check=True,
        )  # fmt: skip
        names = interfaces(some)
        for pid, status, local, remote in json.loads(listing.stdout):
            with contextlib.suppress(psutil.Error):
                command = " ".join(members[pid].cmdline()) or members[pid].name()
                found.append(
                    Socket(pid, command, status, _address(local), _address(remote), names)
                )  # fmt: skip
    return found


def _address(pair: list[object] | None) -> tuple[str, int] | None:
    return None if not pair else (str(pair[0]), int(str(pair[1])))


def off_loopback(
    sockets: Iterable[Socket], *, hosts: Iterable[str] = (), links: Iterable[str] = ()
) -> list[Socket]:
    """The sockets that listen on or connect to an address other than loopback's (and ``hosts``': the
    addresses of a test's own namespaces, joined by the interfaces ``links``, ``tests.hosts``)."""
    allowed, inside = LOOPBACK | set(hosts), {"lo", *links}
    wrong = []
    for each in sockets:
        for address in (each.local, each.remote):
            if address is None or address[0].removeprefix("::ffff:") in allowed:  # IPv4 as IPv6 writes it too
                continue
            if address is each.local and address[0] in EVERY_INTERFACE and each.interfaces <= inside:
                continue  # every interface of a namespace whose only ones are loopback and the test's links
            wrong.append(each)
            break
    return wrong


_HOLD = (
    "from coordinator.batch.loopback import up; up(); print('up', flush=True); import signal; signal.pause()"
)
_HOLD_S = 30.0


@contextlib.contextmanager
def loopback_namespace() -> Iterator[list[str]]:
    """A network namespace whose one interface is loopback, held by a process of its own while the
    block runs; yields the command prefix that runs a program in it (``nsenter``, which execs in place:
    the program keeps the pid it is started with)."""
    if shutil.which("unshare") is None or shutil.which("nsenter") is None:
        pytest.skip("a network namespace needs unshare and nsenter (util-linux)")
    root = os.geteuid() == 0
    with subprocess.Popen(
        [_tool("unshare"), "--net", *([] if root else ["--map-root-user"]), "--", sys.executable, "-c", _HOLD],
        stdout=subprocess.PIPE, text=True,
    ) as holder:  # fmt: skip
        try:
            assert holder.stdout is not None
            ready, _, _ = select.select([holder.stdout], [], [], _HOLD_S)
            assert ready and holder.stdout.readline().strip() == "up", (
                "the namespace's loopback did not come up"
            )
            yield [_tool("nsenter"), "-t", str(holder.pid), "--net", *([] if root else ["--user"]), "--"]
        finally:
            holder.kill()


def _tool(name: str) -> str:
    """The full path of a util-linux tool (found before it is used: the callers skip without it)."""
    return shutil.which(name) or name
