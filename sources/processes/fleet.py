"""A fleet of the five sources as long-running streamable-HTTP services on 127.0.0.1, or on one
address a cluster reaches (``host``: every source there requires a bearer token, ``sources.security.listen``).

`research sources up` starts them all at once (fixed default ports, overridable), and beside them any
service the caller names (the coordinator service: ``coordinator.service``, named by the command,
never imported here), waits until each answers its health route, and records pids and ports in a
state file, ``fleet.json``: the one place where anyone finds a member (the coordinator service
dials the sources it lists, never a default port). The sources are recorded there the moment they
are started, before any service is, so a service never reads an older fleet's state, or none.
`status` reads it and probes each; `down` stops them all at once: SIGTERM to every source, a
bounded wait, SIGKILL to any still there. Chaos acts on the fleet: `kill` sends SIGKILL, `heal`
restarts a dead source where it was or clears a live one's faults (`heal_all`: every member, the
dead restarted all at once), and `hang`/`slow`/`flaky`/`garbage` add faults at run time through a
source's `/chaos` route (only on a fleet started with chaos control).

A stopped source counts as gone once it is dead or a zombie: the fleet's sources outlive the command
that started them, so another process (init, or whatever reaps orphans) collects their exit status,
and here that took up to 2 s after the process had ended.
"""

from __future__ import annotations

import contextlib
import json
import os
import subprocess
import sys
import time
import urllib.error
import urllib.request
from collections.abc import Mapping
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

import psutil

from sources.catalogue import DEFAULT_PORTS, SOURCES
from sources.deferred import deferred
from sources.security.fleet_secret import FLEET_SECRET_ENV, FLEET_SECRET_HEADER, make_secret, read_secret
from sources.security.listen import LOOPBACK, http_base
from sources.settings import SIGNING_KEY_ENV, SourceSettings
from traces.private_files import NotYoursError, open_private_file, private_folder, publish_file

# The server's module imports the mcp SDK and uvicorn (about a second), which `down`, `kill` and
# `status` never need: only starting a source reads its ready line. The faults' module imports pydantic.
if TYPE_CHECKING:
    from sources import faults as fault_layer
    from sources.faults import FaultSettings
    from sources.processes import serve
else:
    fault_layer = deferred("sources.faults")
    serve = deferred("sources.processes.serve")

__all__ = ["Fleet", "FleetError", "Member", "MemberStatus"]

_READY_TIMEOUT_S = 20.0
# A source exits within SHUTDOWN_S of SIGTERM (sources.processes.serve), a hung call or an open stream included;
# past this, it is killed.
_TERM_GRACE_S = 1.0
_KILL_WAIT_S = 2.0  # SIGKILL cannot be refused: this bounds only a process stuck in the kernel
_POLL_S = 0.02  # how often a bounded wait for a process we act on looks again
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
    module: str = ""  # a service's module (``python -m MODULE``); empty for a source
    host: str = LOOPBACK  # the address it listens on (a fleet's state from before it had one: loopback)

    @property
    def command_module(self) -> str:
        return self.module or f"sources.{self.source}"

    @property
    def url(self) -> str:
        """Where it answers: a source's MCP endpoint, a service's root."""
        return f"{self.base}/mcp" if not self.module else self.base

    @property
    def base(self) -> str:
        return http_base(self.host, self.port)

    def alive(self) -> bool:
        try:
            process = psutil.Process(self.pid)
            return (
                process.is_running()
                and process.status() != psutil.STATUS_ZOMBIE
                and any(self.command_module in part for part in process.cmdline())
            )
        except psutil.Error:
            return False


@dataclass(frozen=True)
class MemberStatus:
    """A member as probed now: alive, and what its health route answered (None: dead, or not answering)."""

    member: Member
    alive: bool
    health: dict[str, Any] | None


@dataclass(frozen=True)
class _Launched:
    """A source process just started, not yet known to answer."""

    source: str
    port: int
    process: subprocess.Popen[bytes]
    log_path: Path
    module: str
    host: str

    def member(self, chaos_control: bool) -> Member:
        return Member(
            self.source, self.port, self.process.pid, time.time(), chaos_control and not self.module,
            self.module, self.host,
        )  # fmt: skip


class Fleet:
    def __init__(self, settings: SourceSettings) -> None:
        self.settings = settings
        self.state_file = settings.data_dir / "fleet.json"
        self.log_dir = settings.data_dir / "fleet-logs"
        self.secret_file = settings.data_dir / "fleet.secret"

    # --- state ----------------------------------------------------------------------------------

    def members(self) -> dict[str, Member]:
        if not self.state_file.exists():
            return {}
        return {source: Member(**entry) for source, entry in json.loads(self.state_file.read_text()).items()}

    def _save(self, members: Mapping[str, Member]) -> None:
        private_folder(self.state_file.parent, contents=True)
        text = json.dumps({source: asdict(member) for source, member in members.items()}, indent=2)
        publish_file(self.state_file, text, replace=True)  # whole, 0600

    def urls(self) -> dict[str, str]:
        """The sources' MCP endpoints."""
        return {source: member.url for source, member in self.members().items() if not member.module}

    def url(self, source: str) -> str:
        """Where this fleet's ``source`` answers, read from the state now (a member healed or moved is
        found where it is); ``FleetError`` when the fleet has no such source."""
        member = self._member(source)
        if member.module:
            raise FleetError(f"{source} is a service of the fleet, not a source")
        return member.url

    # --- processes ------------------------------------------------------------------------------

    def _launch(
        self, source: str, port: int, chaos_control: bool, module: str = "", host: str = LOOPBACK
    ) -> _Launched:
        """A source on ``host``, or a service (``module``: on loopback, whatever the sources' host)."""
        private_folder(self.log_dir)  # a source's log says what it was asked and what failed
        log_path = self.log_dir / f"{source}.log"
        environment = {**os.environ, **self.settings.child_environment()}
        if module:  # a service: it answers to the fleet's secret
            args = [sys.executable, "-m", module, "--port", str(port)]
            environment[FLEET_SECRET_ENV] = self.secret()
        else:
            args = [sys.executable, "-m", f"sources.{source}", "--http", "--host", host, "--port", str(port)]
            # A source gets the public key only, even if this shell exported the private one.
            environment.pop(SIGNING_KEY_ENV, None)
        if chaos_control and not module:
            args.append("--chaos-control")
            environment[FLEET_SECRET_ENV] = self.secret()
        with open_private_file(log_path, "w") as log:
            # A session of its own: the source outlives the command that started it.
            process = subprocess.Popen(  # noqa: S603  (our own module, fixed arguments)
                args, env=environment, stdin=subprocess.DEVNULL,
                stdout=log, stderr=log, start_new_session=True,
            )  # fmt: skip
        return _Launched(source, port, process, log_path, module, LOOPBACK if module else host)

    def _await_ready(self, launched: _Launched, chaos_control: bool, deadline: float) -> Member:
        source, process = launched.source, launched.process
        while time.monotonic() < deadline:
            text = launched.log_path.read_text(errors="replace")
            if serve.READY_PREFIX in text:
                member = launched.member(chaos_control)
                if self.health(member) is not None:  # bound and serving: it answers
                    return member
            if process.poll() is not None:
                last = text.strip().splitlines()[-1] if text.strip() else f"exit status {process.returncode}"
                raise FleetError(f"{source} did not start on port {launched.port}: {last}")
            time.sleep(_POLL_S)  # a bounded wait for a process we started, not a back-off
        process.kill()
        raise FleetError(f"{source} did not answer within {_READY_TIMEOUT_S:.0f} s; see {launched.log_path}")

    def _spawn(
        self,
        ports: Mapping[str, int],
        chaos_control: bool,
        services: Mapping[str, tuple[str, int]] | None = None,
        host: str = LOOPBACK,
    ) -> dict[str, Member]:
        """Start these sources (on ``host``) and services all at once and wait until each answers; on a failure, stop them all.

        The sources are recorded in the state file as soon as they are started, before any service is:
        a service reads where they are from there (and would otherwise find an older fleet, or none)."""
        launched: list[_Launched] = []
        try:
            for source, port in ports.items():
                launched.append(self._launch(source, port, chaos_control, host=host))
            self._save({each.source: each.member(chaos_control) for each in launched})
            for name, (module, port) in (services or {}).items():
                launched.append(self._launch(name, port, chaos_control, module))
            deadline = time.monotonic() + _READY_TIMEOUT_S
            return {each.source: self._await_ready(each, chaos_control, deadline) for each in launched}
        except BaseException:  # a source that failed, or an interrupt: none is left running
            _stop_all([each.process.pid for each in launched])
            raise

    def up(
        self,
        ports: Mapping[str, int] | None = None,
        *,
        chaos_control: bool = False,
        services: Mapping[str, tuple[str, int]] | None = None,
        host: str = LOOPBACK,
    ) -> dict[str, Member]:
        """Start the sources on ``host`` (and ``services``: name → (module, port), on loopback); a new
        fleet secret each time."""
        running = {source: member for source, member in self.members().items() if member.alive()}
        if running:
            raise FleetError(
                f"a fleet is already up ({', '.join(running)}); run `research sources down` first"
            )
        chosen = {source: (ports or {}).get(source, DEFAULT_PORTS[source]) for source in SOURCES}
        try:  # 0700 (what is in it too) even if it was there: the key pair and secrets go there
            private_folder(self.settings.data_dir, contents=True)
        except NotYoursError as exc:  # another user's: one line, as the fleet's other errors are
            raise FleetError(str(exc)) from None
        make_secret(
            self.secret_file
        )  # a new secret for each fleet: whoever held the last one holds nothing now
        try:
            started = self._spawn(chosen, chaos_control, services, host)
        except BaseException:  # all stopped: the state of the sources as started is no fleet's
            self.state_file.unlink(missing_ok=True)
            raise
        self._save(started)
        return started

    def down(self) -> list[str]:
        """Stop every live source at once; the names of those that were running."""
        running = {source: member for source, member in self.members().items() if member.alive()}
        _stop_all([member.pid for member in running.values()])
        self.state_file.unlink(missing_ok=True)
        return list(running)

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
        with contextlib.suppress(psutil.Error):
            process = psutil.Process(member.pid)
            process.kill()
            _wait_gone([process], _KILL_WAIT_S)
        return member

    def heal(self, source: str) -> Member:
        """Restart a dead member where it was, or clear a live source's faults (a live service: as it is)."""
        member = self._member(source)
        if member.alive():
            return self._clear_faults(member)
        healed = self._restart({source: member})[source]
        if isinstance(healed, FleetError):
            raise healed
        return healed

    def heal_all(self) -> dict[str, Member | FleetError]:
        """Heal every member: the live ones' faults cleared, the dead restarted all at once.

        Each member's outcome, in the fleet's order: its member as healed, or the ``FleetError`` saying
        why not; one member that cannot be healed does not stop the others.
        """
        members = self.members()
        if not members:
            raise FleetError("no fleet: `research sources up --chaos` starts one")
        outcomes: dict[str, Member | FleetError] = {}
        dead = {}
        for name, member in members.items():
            if member.alive():
                try:
                    outcomes[name] = self._clear_faults(member)
                except FleetError as exc:
                    outcomes[name] = exc
            else:
                dead[name] = member
        outcomes.update(self._restart(dead))
        return {name: outcomes[name] for name in members}

    def _clear_faults(self, member: Member) -> Member:
        if member.chaos_control:
            self.set_faults(member.source, fault_layer.FaultSettings())
        return member

    def _restart(self, dead: Mapping[str, Member]) -> dict[str, Member | FleetError]:
        """Start these dead members again where they were, all at once, and record those that answer."""
        launched: list[_Launched] = []
        outcomes: dict[str, Member | FleetError] = {}
        try:
            for name, member in dead.items():
                launched.append(
                    self._launch(name, member.port, member.chaos_control, member.module, member.host)
                )
            deadline = time.monotonic() + _READY_TIMEOUT_S
            for each in launched:
                try:
                    outcomes[each.source] = self._await_ready(each, dead[each.source].chaos_control, deadline)
                except FleetError as exc:  # it is stopped already; the others go on
                    outcomes[each.source] = exc
        except BaseException:  # an interrupt: none of these is left running unrecorded
            _stop_all([each.process.pid for each in launched])
            raise
        members = self.members()
        members.update({name: healed for name, healed in outcomes.items() if isinstance(healed, Member)})
        self._save(members)
        return outcomes

    # --- run-time faults ------------------------------------------------------------------------

    def set_faults(self, source: str, faults: FaultSettings, *, merge: bool = False) -> dict[str, Any]:
        """Set a live source's faults; its state after (``/health``'s). ``merge``: change only the fields
        ``faults`` was given (``FaultSettings.merged``, done by the source), the others stay in force."""
        member = self._member(source)
        if not member.chaos_control:
            raise FleetError(
                "run-time faults need a fleet started with chaos control: `research sources up --chaos`"
            )
        if not member.alive():
            raise FleetError(f"{source} is not running; `research chaos heal {source}` restarts it")
        request = urllib.request.Request(  # noqa: S310  (the fleet's own http:// URL)
            f"{member.base}/chaos",
            data=json.dumps(
                {"faults": faults.spec(as_change=merge), "mode": "merge" if merge else "replace"}
            ).encode(),
            headers={"Content-Type": "application/json", FLEET_SECRET_HEADER: self.secret()}, method="POST",
        )  # fmt: skip
        try:
            with urllib.request.urlopen(request, timeout=_PROBE_TIMEOUT_S) as response:  # noqa: S310
                answer: dict[str, Any] = json.loads(response.read())  # the /chaos route's JSON object
                return answer
        except urllib.error.HTTPError as exc:
            raise FleetError(f"{source} refused the faults: {exc.read().decode(errors='replace')}") from None
        except (urllib.error.URLError, TimeoutError) as exc:
            raise FleetError(f"{source} did not answer its chaos route: {exc}") from None

    def secret(self) -> str:
        """The fleet's secret, which its services and chaos routes ask for."""
        try:
            return read_secret(self.secret_file)
        except ValueError as exc:
            raise FleetError(str(exc)) from None

    def status(self) -> list[MemberStatus]:
        """Each member, probed once: the one survey `sources status` and `chaos status` print."""
        probed = []
        for member in self.members().values():
            alive = member.alive()
            probed.append(MemberStatus(member, alive, self.health(member) if alive else None))
        return probed

    def health(self, member: Member) -> dict[str, Any] | None:
        try:
            with urllib.request.urlopen(f"{member.base}/health", timeout=_PROBE_TIMEOUT_S) as response:  # noqa: S310
                answer: dict[str, Any] = json.loads(response.read())  # the /health route's JSON object
                return answer
        except (urllib.error.URLError, TimeoutError, OSError, ValueError):
            return None


def _gone(process: psutil.Process) -> bool:
    """Dead, or a zombie: it has exited, whoever has yet to collect its status."""
    try:
        return not process.is_running() or process.status() == psutil.STATUS_ZOMBIE
    except psutil.Error:
        return True


def _wait_gone(processes: list[psutil.Process], timeout: float) -> list[psutil.Process]:
    """Wait, bounded, until these processes are gone; those still there at the bound."""
    deadline = time.monotonic() + timeout
    left = [process for process in processes if not _gone(process)]
    while left and time.monotonic() < deadline:
        time.sleep(_POLL_S)  # a bounded wait for processes we signalled, not a back-off
        left = [process for process in left if not _gone(process)]
    return left


def _stop_all(pids: list[int]) -> None:
    """SIGTERM to all at once, a bounded wait, then SIGKILL to any still there.

    ``psutil.Process`` remembers each process's start time, so a pid reused meanwhile is never signalled.
    """
    processes = []
    for pid in pids:
        with contextlib.suppress(psutil.Error):
            processes.append(psutil.Process(pid))
    for process in processes:
        with contextlib.suppress(psutil.Error):
            process.terminate()
    for process in _wait_gone(processes, _TERM_GRACE_S):
        with contextlib.suppress(psutil.Error):
            process.kill()
    _wait_gone(processes, _KILL_WAIT_S)
