"""A local Ray batch on loopback only: Ray cannot be kept there, a network namespace can.

Measured with Ray 2.60 (``tests/test_batch_ray.py`` lists every socket of a batch): the gRPC servers of
the GCS, the raylet, every worker and the driver listen on every interface whatever address Ray is
given, and ``_node_ip_address="127.0.0.1"`` (``--node-ip-address`` for ``ray start``) is replaced by the
machine's own address (``ray._private.services.resolve_ip_for_localhost``), so their connections run
over it too. In a network namespace whose only interface is loopback Ray finds no other address: it
falls back to 127.0.0.1, and "every interface" is loopback alone. So ``research batch --engine ray``
without ``--address`` runs itself again under ``unshare --net`` (the same process: ``unshare`` execs
in place, so signals and the exit status are the command's), brings loopback up, and starts its fleet,
Ray and its workers in there.

What the namespace cannot reach is anything outside it: sources given by ``--url``, a fleet already
running, Claude, an OTLP collector. A batch that needs one runs as before and says, in one line, why
Ray listens on every interface.
"""

from __future__ import annotations

import fcntl
import os
import shutil
import socket
import struct
import subprocess
import sys
from typing import TYPE_CHECKING, NoReturn

from sources.processes.fleet import Fleet
from sources.security.listen import LOOPBACK

if TYPE_CHECKING:
    from coordinator.batch.run import Batch
    from sources.settings import SourceSettings

__all__ = ["enter", "inside", "obstacle", "unshare_command", "up"]

_MARK = "RESEARCH_LOOPBACK_NAMESPACE"  # set in the command run again inside the namespace
# The command again, as `research` is: an installed console script and `python -c` both end here.
_COMMAND = "from coordinator.cli import app; app()"
_PROBE_S = 10.0


def inside() -> bool:
    """Whether this process is the batch run again inside its namespace."""
    return os.environ.get(_MARK) == "1"


def unshare_command() -> list[str]:
    """The command that runs what follows it in a network namespace of its own."""
    # Root may make a network namespace; anyone else needs a user namespace of their own to hold it,
    # in which they are root (and may then bring its loopback up).
    return [
        shutil.which("unshare") or "unshare",
        "--net",
        *(["--map-root-user"] if os.geteuid() != 0 else []),
        "--",
    ]


def obstacle(batch: Batch, settings: SourceSettings, argv: list[str]) -> str | None:
    """Why this batch cannot run in a namespace of loopback alone, or None when it can."""
    if batch.urls:
        return "the sources given by --url are outside it"
    if batch.fleet_host != LOOPBACK:
        return f"its fleet listens on {batch.fleet_host} (--fleet-host), an address outside it"
    if any(member.alive() for member in Fleet(settings).members().values()):
        return "the running fleet it uses is outside it"
    if batch.claude is not None:
        return "Claude is reached over the network"
    exporters = settings.trace_exporters
    if exporters is None:
        exporters = tuple(os.environ.get("OTEL_TRACES_EXPORTER", "").split(","))
    if "otlp" in exporters:
        return "its traces go to an OTLP collector outside it"
    if argv[1:2] != ["batch"]:
        return "it was not started as the `research batch` command"
    if sys.platform != "linux" or shutil.which("unshare") is None:
        return "`unshare` (util-linux, Linux) is not there to make one"
    try:
        probe = subprocess.run(  # noqa: S603  (fixed arguments)
            [*unshare_command(), "true"], capture_output=True, text=True, timeout=_PROBE_S, check=False
        )
    except (OSError, subprocess.TimeoutExpired) as exc:
        return f"`unshare --net` did not run ({exc})"
    if probe.returncode != 0:
        said = (probe.stderr.strip().splitlines() or ["no reason given"])[-1]
        return f"`unshare --net` was refused ({said}); user namespaces may be off here"
    return None


def enter(argv: list[str]) -> NoReturn:
    """Run this command again, as it was given (``argv`` as ``sys.argv``), in a namespace of its own."""
    command = [*unshare_command(), sys.executable, "-c", _COMMAND, *argv[1:]]
    os.execvpe(command[0], command, {**os.environ, _MARK: "1"})  # noqa: S606  (our own command, no shell)


# SIOCGIFFLAGS / SIOCSIFFLAGS and IFF_UP from <linux/sockios.h> and <net/if.h>: two ioctls rather than
# `ip link set lo up`, which a container may not have, or pyroute2, a dependency for one flag.
_GET_FLAGS, _SET_FLAGS, _UP = 0x8913, 0x8914, 0x1
_IFREQ = "16sh"  # struct ifreq as these two ioctls read it: the name, then the flags


def up() -> None:
    """Bring this namespace's loopback up (a new namespace's is down)."""
    with socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as handle:
        asked = struct.pack(_IFREQ, b"lo", 0)
        flags = struct.unpack(_IFREQ, fcntl.ioctl(handle, _GET_FLAGS, asked))[1]
        fcntl.ioctl(handle, _SET_FLAGS, struct.pack(_IFREQ, b"lo", flags | _UP))
