"""No secret of the coordinator's reaches a forked source: not in its environment, not in its memory.

The coordinator's environment holds its signing key and whatever else its user keeps there (an API
key, a token). The fork server and every source forked from it are scanned, ``/proc/PID/environ``
and every readable mapping of ``/proc/PID/mem``, for canaries planted in that environment.
"""

from __future__ import annotations

import os
import re
import secrets
import subprocess
import sys
from pathlib import Path

import pytest
from cryptography.hazmat.primitives import serialization
from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey

from tests.conftest import PROJECT_ROOT

pytestmark = pytest.mark.skipif(not Path("/proc/self/mem").exists(), reason="needs Linux's /proc")

# A coordinator that forks one source and waits: it prints the fork server's pid and the source's.
_COORDINATOR = """
import sys
from multiprocessing import forkserver
from sources.processes import forked
from sources.settings import SourceSettings

settings = SourceSettings.from_environment()
child = forked.start("customers", settings.child_environment())
print(forkserver._forkserver._forkserver_pid, child.process.pid, flush=True)
sys.stdin.read()
"""


def _memory_holds(pid: int, needles: list[bytes]) -> list[bytes]:
    """Which of ``needles`` are somewhere in the readable memory of process ``pid``."""
    found: set[bytes] = set()
    with open(f"/proc/{pid}/maps") as maps, open(f"/proc/{pid}/mem", "rb", buffering=0) as memory:
        for line in maps:
            bounds, permissions = line.split()[:2]
            if not permissions.startswith("r"):
                continue
            start, end = (int(part, 16) for part in bounds.split("-"))
            try:
                memory.seek(start)
                chunk = memory.read(end - start)
            except (OSError, OverflowError, ValueError):  # [vvar] and the like cannot be read
                continue
            found.update(needle for needle in needles if needle in chunk)
    return sorted(found)


def test_neither_the_fork_server_nor_a_forked_source_holds_the_coordinators_secrets(tmp_path: Path) -> None:
    key = Ed25519PrivateKey.generate().private_bytes(
        serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8, serialization.NoEncryption()
    )
    key_body = re.sub(rb"-----[A-Z ]+-----|\s", b"", key)  # the base64 of the private key itself
    api_key, token = f"sk-ant-canary-{secrets.token_hex(12)}", f"canary-token-{secrets.token_hex(12)}"
    environment = {
        **os.environ,
        "RESEARCH_DATA_DIR": str(tmp_path / "data"),
        "RESEARCH_SIGNING_KEY": key.decode(),
        "ANTHROPIC_API_KEY": api_key,
        "SOME_SERVICE_TOKEN": token,
    }
    needles = [key_body, api_key.encode(), token.encode()]
    with subprocess.Popen(
        [sys.executable, "-c", _COORDINATOR],
        cwd=PROJECT_ROOT,
        env=environment,
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        text=True,
    ) as coordinator:
        try:
            assert coordinator.stdout is not None
            server, source = (int(pid) for pid in coordinator.stdout.readline().split())
            for pid in (server, source):
                environ = Path(f"/proc/{pid}/environ").read_bytes()
                assert [needle for needle in needles if needle in environ] == [], f"environ of {pid}"
                assert _memory_holds(pid, needles) == [], f"memory of {pid}"
            # and the canaries are where they belong, so the scan can find them
            assert _memory_holds(coordinator.pid, needles) == sorted(needles)
        finally:
            coordinator.kill()
