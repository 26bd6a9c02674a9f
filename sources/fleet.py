"""A fleet of the five sources as long-running streamable-HTTP services on 127.0.0.1.

`research sources up` starts them (fixed default ports, overridable), waits until each answers its
health route, and records pids and ports in a state file; `status` reads it and probes each; `down`
stops them. Chaos acts on the fleet: `kill` sends SIGKILL, `heal` restarts a dead source where it
was or clears a live one's faults, and `hang`/`slow`/`flaky`/`garbage` set faults at run time
through a source's `/chaos` route (only on a fleet started with chaos control).
"""

from __future__ import annotations

import contextlib
import json
import os
import signal
import subprocess
import sys
import time
import urllib.error
import urllib.request
from collections.abc import Mapping
from dataclasses import asdict, dataclass
from typing import Any

import psutil

from sources.catalogue import DEFAULT_PORTS, SOURCES
from sources.faults import FaultSettings
from sources.serve import READY_PREFIX
from sources.settings import SourceSettings

__all__ = ["Fleet", "FleetError", "Member"]

_READY_TIMEOUT_S = 20.0
_STOP_TIMEOUT_S = 5.0
_PROBE_TIMEOUT_S = 2.0


class FleetError(RuntimeError):
    """A fleet operation that cannot be done; the message says what to do."""


@dataclass
class Member:
    source: str
    port: int
    pid: int
    started_at: float
    chaos_control: bool

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}/mcp"

    @property
    def base(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    def alive(self) -> bool:
        try:
            process = psutil.Process(self.pid)
            return (
                process.is_running()
                and process.status() != psutil.STATUS_ZOMBIE
                and any(f"sources.{self.source}" in part for part in process.cmdline())
            )
        except psutil.Error:
            return False


class Fleet:
    def __init__(self, settings: SourceSettings) -> None:
        self.settings = settings
        self.state_file = settings.data_dir / "fleet.json"
        self.log_dir = settings.data_dir / "fleet-logs"

    # --- state ----------------------------------------------------------------------------------

    def members(self) -> dict[str, Member]:
        if not self.state_file.exists():
            return {}
        return {source: Member(**entry) for source, entry in json.loads(self.state_file.read_text()).items()}

    def _save(self, members: Mapping[str, Member]) -> None:
        self.state_file.parent.mkdir(parents=True, exist_ok=True)
        draft = self.state_file.with_suffix(".tmp")
        draft.write_text(json.dumps({source: asdict(member) for source, member in members.items()}, indent=2))
        draft.replace(self.state_file)

    def urls(self) -> dict[str, str]:
        return {source: member.url for source, member in self.members().items()}

    # --- processes ------------------------------------------------------------------------------

    def _spawn(self, source: str, port: int, chaos_control: bool) -> Member:
        self.log_dir.mkdir(parents=True, exist_ok=True)
        log_path = self.log_dir / f"{source}.log"
        args = [sys.executable, "-m", f"sources.{source}", "--http", "--port", str(port)]
        if chaos_control:
            args.append("--chaos-control")
        with log_path.open("w") as log:
            # A session of its own: the source outlives the command that started it.
            process = subprocess.Popen(  # noqa: S603  (our own module, fixed arguments)
                args, env={**os.environ, **self.settings.child_environment()}, stdin=subprocess.DEVNULL,
                stdout=log, stderr=log, start_new_session=True,
            )  # fmt: skip
        deadline = time.monotonic() + _READY_TIMEOUT_S
        while time.monotonic() < deadline:
            text = log_path.read_text(errors="replace")
            if READY_PREFIX in text:
                member = Member(source, port, process.pid, time.time(), chaos_control)
                if self.health(member) is not None:  # bound and serving: it answers
                    return member
            if process.poll() is not None:
                last = text.strip().splitlines()[-1] if text.strip() else f"exit status {process.returncode}"
                raise FleetError(f"{source} did not start on port {port}: {last}")
            time.sleep(0.05)  # a bounded wait for a process we started, not a back-off
        process.kill()
        raise FleetError(f"{source} did not answer within {_READY_TIMEOUT_S:.0f} s; see {log_path}")

    def up(self, ports: Mapping[str, int] | None = None, *, chaos_control: bool = False) -> dict[str, Member]:
        running = {source: member for source, member in self.members().items() if member.alive()}
        if running:
            raise FleetError(
                f"a fleet is already up ({', '.join(running)}); run `research sources down` first"
            )
        chosen = {source: (ports or {}).get(source, DEFAULT_PORTS[source]) for source in SOURCES}
        started: dict[str, Member] = {}
        try:
            for source in SOURCES:
                started[source] = self._spawn(source, chosen[source], chaos_control)
        except FleetError:
            for member in started.values():
                _stop(member.pid)
            raise
        self._save(started)
        return started

    def down(self) -> list[str]:
        stopped = []
        for source, member in self.members().items():
            if member.alive():
                _stop(member.pid)
                stopped.append(source)
        self.state_file.unlink(missing_ok=True)
        return stopped

    def _member(self, source: str) -> Member:
        members = self.members()
        if source not in members:
            known = ", ".join(members) or "none: run `research sources up` first"
            raise FleetError(f"no source {source!r} in the fleet ({known})")
        return members[source]

    def kill(self, source: str) -> Member:
        member = self._member(source)
        if not member.alive():
            raise FleetError(
                f"{source} is not running (pid {member.pid}); `research chaos heal {source}` restarts it"
            )
        os.kill(member.pid, signal.SIGKILL)
        with contextlib.suppress(psutil.Error):
            psutil.Process(member.pid).wait(timeout=_STOP_TIMEOUT_S)
        return member

    def heal(self, source: str) -> Member:
        member = self._member(source)
        if member.alive():
            if member.chaos_control:
                self.set_faults(source, FaultSettings())
            return member
        healed = self._spawn(source, member.port, member.chaos_control)
        members = self.members()
        members[source] = healed
        self._save(members)
        return healed

    # --- run-time faults ------------------------------------------------------------------------

    def set_faults(self, source: str, faults: FaultSettings) -> dict[str, Any]:
        member = self._member(source)
        if not member.chaos_control:
            raise FleetError(
                "run-time faults need a fleet started with chaos control: `research sources up --chaos`"
            )
        if not member.alive():
            raise FleetError(f"{source} is not running; `research chaos heal {source}` restarts it")
        request = urllib.request.Request(  # noqa: S310  (a fixed http://127.0.0.1 URL of our own)
            f"{member.base}/chaos", data=json.dumps({"faults": faults.spec()}).encode(),
            headers={"Content-Type": "application/json"}, method="POST",
        )  # fmt: skip
        try:
            with urllib.request.urlopen(request, timeout=_PROBE_TIMEOUT_S) as response:  # noqa: S310
                return json.loads(response.read())
        except urllib.error.HTTPError as exc:
            raise FleetError(f"{source} refused the faults: {exc.read().decode(errors='replace')}") from None
        except (urllib.error.URLError, TimeoutError) as exc:
            raise FleetError(f"{source} did not answer its chaos route: {exc}") from None

    def health(self, member: Member) -> dict[str, Any] | None:
        try:
            with urllib.request.urlopen(f"{member.base}/health", timeout=_PROBE_TIMEOUT_S) as response:  # noqa: S310
                return json.loads(response.read())
        except (urllib.error.URLError, TimeoutError, OSError, ValueError):
            return None


def _stop(pid: int) -> None:
    """SIGTERM, then SIGKILL if it has not gone within the bound."""
    try:
        process = psutil.Process(pid)
        process.terminate()
        process.wait(timeout=_STOP_TIMEOUT_S)
    except psutil.TimeoutExpired:
        process.kill()
        process.wait(timeout=_STOP_TIMEOUT_S)
    except psutil.Error:
        pass
