"""Stopping sources: `research sources down` of a five-source fleet, chaos kill and heal, and a hung
stdio source leaving at the end of its input.

Fleet: five HTTP sources on free ports with a temporary RESEARCH_DATA_DIR (its world generated
before anything is timed). Each command runs as a fresh process the way the installed `research`
script runs it, from this checkout: the wall time a person waits, the command line's start-up
included (`research --help` is printed for that share). Beside it, the same operation timed inside
this process (``Fleet.down()``, ``.kill()``, ``.heal()``): what the fleet itself takes. One more
`down` faces the worst case: a call hung in kb and a client's SSE stream open on it.

Stdio: the customers source with every call hung, spawned over pipes as the mcp SDK spawns it;
handshake, one call in flight, then its stdin closed (how a client ends a session) or both its stdin
and its stdout closed (a client killed); printed: the time from the close to the process's exit,
and the lines it wrote to stderr. An idle source (no call in flight) is the reference. The SDK's
client waits 2 s for its child after closing its stdin, then sends SIGTERM.

    .venv/bin/python benchmarks/shutdown.py [--rounds 3]

Targets (issue 13): the fleet's `down` within 2 s; a hung stdio source exits within 0.5 s of the end
of its input, and within 1 s of its client dying, with at most one line on stderr.
"""

from __future__ import annotations

import argparse
import os
import socket
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from contextlib import ExitStack
from pathlib import Path
from typing import Any

import psutil

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from sources.catalogue import SOURCES  # noqa: E402
from sources.faults import FaultSettings  # noqa: E402
from sources.processes.fleet import Fleet  # noqa: E402
from sources.settings import SourceSettings  # noqa: E402
from sources.world import ensure_world  # noqa: E402
from tests.test_shutdown import HungStdioSource, hung_http_call, open_session, open_stream  # noqa: E402

RESEARCH = [sys.executable, "-c", "from coordinator.cli import app; app()"]
TARGETS = {"down": 2.0, "eof": 0.5, "died": 1.0}


def free_ports() -> list[str]:
    probes = [socket.socket() for _ in SOURCES]
    for probe in probes:
        probe.bind(("127.0.0.1", 0))
    ports = [
        f"--port={source}={probe.getsockname()[1]}" for source, probe in zip(SOURCES, probes, strict=True)
    ]
    for probe in probes:
        probe.close()
    return ports


def research(settings: SourceSettings, *args: str) -> float:
    """One `research` command as a fresh process; its wall time."""
    env = {
        **os.environ,
        "RESEARCH_DATA_DIR": str(settings.data_dir),
        "PYTHONPATH": str(ROOT),
        "COLUMNS": "200",
    }
    started = time.perf_counter()
    done = subprocess.run(  # noqa: S603  (this checkout's own command line)
        [*RESEARCH, *args], env=env, cwd=ROOT, capture_output=True, text=True, timeout=120
    )
    elapsed = time.perf_counter() - started
    if done.returncode != 0:
        raise SystemExit(f"research {' '.join(args)} exited {done.returncode}:\n{done.stderr}")
    return elapsed


def timed(action: Callable[[], Any]) -> float:
    started = time.perf_counter()
    action()
    return time.perf_counter() - started


def assert_all_gone(pids: list[int]) -> None:
    left = [
        pid for pid in pids if psutil.pid_exists(pid) and psutil.Process(pid).status() != psutil.STATUS_ZOMBIE
    ]
    if left:
        raise SystemExit(f"processes left behind after down: {left}")


def fleet_round(settings: SourceSettings, samples: dict[str, list[float]]) -> None:
    fleet = Fleet(settings)
    samples["up"].append(research(settings, "sources", "up", "--chaos", *free_ports()))
    samples["kill"].append(research(settings, "chaos", "kill", "tickets"))
    samples["heal (restart)"].append(research(settings, "chaos", "heal", "tickets"))
    samples["heal (live)"].append(research(settings, "chaos", "heal", "tickets"))
    pids = [member.pid for member in fleet.members().values()]
    samples["down"].append(research(settings, "sources", "down"))
    assert_all_gone(pids)

    research(settings, "sources", "up", "--chaos", *free_ports())
    samples["kill", "fleet"].append(timed(lambda: fleet.kill("tickets")))
    samples["heal (restart)", "fleet"].append(timed(lambda: fleet.heal("tickets")))
    samples["heal (live)", "fleet"].append(timed(lambda: fleet.heal("tickets")))
    pids = [member.pid for member in fleet.members().values()]
    samples["down", "fleet"].append(timed(fleet.down))
    assert_all_gone(pids)

    research(settings, "sources", "up", "--chaos", *free_ports())
    fleet.set_faults("kb", FaultSettings(hang=1))
    kb = fleet.members()["kb"]
    session = open_session(kb.url)
    pids = [member.pid for member in fleet.members().values()]
    with ExitStack() as held:
        held.enter_context(
            hung_http_call(kb.port, session, {"name": "search_policies", "arguments": {"query": "x"}})
        )
        held.enter_context(open_stream(kb.port, session))
        samples["down, kb hung", "fleet"].append(timed(fleet.down))
    assert_all_gone(pids)


def stdio_round(settings: SourceSettings, samples: dict[str, list[float]], lines: dict[str, int]) -> None:
    for case in ("idle", "eof", "died"):
        source = HungStdioSource(settings, "pipe")
        try:
            if case == "idle":
                source.handshake()
            else:
                source.hang_a_call()
            started = time.perf_counter()
            if case == "died":
                source.hang_up()
            else:
                source.close_input()
            source.process.wait(timeout=30)
            samples[case].append(time.perf_counter() - started)
            _, stderr = source.wait()
            lines[case] = max(lines.get(case, 0), len(stderr.splitlines()))
        finally:
            source.stop()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=3)
    rounds = parser.parse_args().rounds
    samples: dict[Any, list[float]] = {
        key: []
        for key in (
            "help", "up", "kill", "heal (restart)", "heal (live)", "down",
            ("kill", "fleet"), ("heal (restart)", "fleet"), ("heal (live)", "fleet"), ("down", "fleet"),
            ("down, kb hung", "fleet"), "idle", "eof", "died",
        )
    }  # fmt: skip
    lines: dict[str, int] = {}
    with tempfile.TemporaryDirectory() as data_dir:
        settings = SourceSettings(data_dir=Path(data_dir))
        ensure_world(settings.data_dir, settings.seed)
        research(settings, "--help")  # warm-up: bytecode, the disk cache
        for _ in range(rounds):
            samples["help"].append(research(settings, "--help"))
            fleet_round(settings, samples)
            stdio_round(settings, samples, lines)

    def median(key: Any) -> str:
        return f"{statistics.median(samples[key]):6.3f} s"

    print(f"fleet of five HTTP sources, median of {rounds} rounds")
    print(f"  {'operation':22} {'research command':>17} {'the fleet itself':>17}")
    for name in ("up", "kill", "heal (restart)", "heal (live)", "down", "down, kb hung"):
        command = median(name) if samples.get(name) else "-"
        itself = median((name, "fleet")) if samples.get((name, "fleet")) else "-"
        target = f"   target <= {TARGETS['down']:g} s" if name.startswith("down") else ""
        print(f"  {name:22} {command:>17} {itself:>17}{target}")
    print(f"  {'research --help':22} {median('help'):>17}   (the command line's start-up)")
    print(f"\nstdio source (customers), close -> exit, median of {rounds}; most stderr lines in any round")
    for case, label in (
        ("idle", "idle, stdin closed"),
        ("eof", "call hung, stdin closed"),
        ("died", "call hung, client died"),
    ):
        target = f"   target <= {TARGETS[case]:g} s" if case in TARGETS else ""
        print(f"  {label:24} {median(case):>9}   stderr {lines[case]:3} lines{target}")


if __name__ == "__main__":
    main()
