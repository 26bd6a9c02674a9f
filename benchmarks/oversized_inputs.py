"""Peak memory of the coordinator's processes when far too much is sent to them, before and after.

Four cases, each in a fresh process whose peak resident memory (its own high-water mark, ``VmHWM``:
exact, not a sample) is printed beside what it did with the input:

* ``stdin``: `research ask -` with 200 MB piped in;
* ``post``: the coordinator service sent a 200 MB ``POST /ask`` (streamed, with its Content-Length);
* ``answer-stdio``, ``answer-sse``, ``answer-json``: one call through a subagent to a third-party
  server (``tests/oversized_server.py``) answering 50 MB, over stdio, over streamable HTTP with SSE,
  and with ``application/json``; and the same with a million records over stdio.

``--before REV`` runs every case on the code of a git revision too (extracted with ``git archive``
into a temporary folder and put first on ``PYTHONPATH``), side by side:

    .venv/bin/python benchmarks/oversized_inputs.py [--before 3991ada] [--megabytes 200] [--answer-mb 50]

Target: each case refused with a bounded peak, whatever is sent (the command's own start costs
about 60 MB; the service and a session's client about 100 MB).
"""

from __future__ import annotations

import argparse
import contextlib
import io
import json
import os
import secrets
import subprocess
import sys
import tarfile
import tempfile
import threading
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx2

# Not put on sys.path: a case's process must import the code measured (its PYTHONPATH), not this tree.
ROOT = Path(__file__).resolve().parent.parent
SERVER = ROOT / "tests" / "oversized_server.py"
CHUNK = b"Please refund it. " * 58_000  # about 1 MB a write: the sender never holds the whole input
CASES = ("stdin", "post", "answer-stdio", "answer-sse", "answer-json", "records-stdio")


def _peak_mb(pid: int | str = "self") -> float:
    """A process's peak resident memory so far (Linux ``VmHWM``), in MB."""
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmHWM:"):
            return int(line.split()[1]) / 1024
    raise RuntimeError("no VmHWM in /proc: Linux only")


# --- each case's own process ---------------------------------------------------------------------


def _case_stdin() -> str:
    """`research ask -` in this process, its input the pipe the parent fills."""
    from coordinator.cli import app

    sys.argv = ["research", "ask", "-"]
    try:
        app()
    except SystemExit as exit_status:
        return f"exit {exit_status.code}"
    return "exit 0"


def _case_answer(transport: str, tool: str, arguments: dict[str, Any]) -> str:
    """One call through a subagent to the oversized server; what the subagent made of it."""
    import random

    import anyio
    import mcp
    from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey

    from subagents.broker import CredentialBroker
    from subagents.policy import RecoveryPolicy
    from subagents.sessions.connection import Connections
    from subagents.subagent import Runtime, Task, run_subagent
    from subagents.writes import EffectsTable, ToolEffects

    serving = None
    if transport == "stdio":
        target: Any = mcp.StdioServerParameters(command=sys.executable, args=[str(SERVER)])
    else:
        serving, target = _http_server(transport)

    async def call() -> str:
        effects = EffectsTable({"hostile": {tool: ToolEffects.of({"readOnlyHint": True})}})
        policy = RecoveryPolicy(call_timeout_s=60.0, max_retries=0)  # one read of the answer, no retry
        async with Connections.opened({"hostile": lambda: target}) as connections:
            runtime = Runtime(
                connections=connections, broker=CredentialBroker(Ed25519PrivateKey.generate()), policy=policy,
                rng=random.Random(1), effects=effects,  # noqa: S311  (back-off jitter, not a secret)
            )  # fmt: skip
            report = await run_subagent(
                Task("t", "hostile", tool, arguments), runtime, deadline=time.monotonic() + 90
            )
        said = report.escalation.message if report.escalation else f"{len(str(report.results)):,} characters"
        return f"{report.state}: {said[:90]}"

    try:
        return anyio.run(call)
    finally:
        if serving is not None:
            serving.kill()
            serving.wait(timeout=30)


def _http_server(transport: str) -> tuple[subprocess.Popen[str], str]:
    mode = "json" if transport == "json" else "http"
    serving = subprocess.Popen([sys.executable, str(SERVER), mode], stderr=subprocess.PIPE, text=True)  # noqa: S603  (our own test server)
    assert serving.stderr is not None
    return serving, serving.stderr.readline().split()[1]


def run_case(case: str, answer_mb: float) -> None:
    if case == "stdin":
        outcome = _case_stdin()
    elif case == "records-stdio":
        outcome = _case_answer("stdio", "records", {"count": 1_000_000})
    else:
        outcome = _case_answer(case.removeprefix("answer-"), "dump", {"megabytes": answer_mb})
    print("CASE " + json.dumps({"peak_mb": _peak_mb(), "outcome": outcome}), flush=True)


# --- the parent: each case as a process of the code measured --------------------------------------


def _environment(code: Path) -> dict[str, str]:
    return {**os.environ, "PYTHONPATH": str(code), "COLUMNS": "200"}


def _fill(pipe: int, megabytes: int) -> None:
    with contextlib.suppress(BrokenPipeError, OSError), open(pipe, "wb") as writing:
        for _ in range(megabytes):  # refused and closed on the way: what a bound does
            writing.write(CHUNK)


def measure_child(code: Path, case: str, args: argparse.Namespace, data_dir: Path) -> tuple[float, str]:
    """Run one case in a process of ``code``; its peak and outcome."""
    environment = {**_environment(code), "RESEARCH_DATA_DIR": str(data_dir)}
    # A pipe of our own for standard input: filled as the case reads it (communicate would close it).
    reading, writing = os.pipe() if case == "stdin" else (subprocess.DEVNULL, -1)
    child = subprocess.Popen(  # noqa: S603  (this script, a case of its own)
        [sys.executable, str(Path(__file__).resolve()), "--case", case, "--answer-mb", str(args.answer_mb)],
        stdin=reading, stdout=subprocess.PIPE, stderr=subprocess.PIPE, env=environment, cwd=code,
    )  # fmt: skip
    if case == "stdin":
        os.close(reading)  # the case holds it now: once it leaves, the filler's writes fail and end
        threading.Thread(target=_fill, args=(writing, args.megabytes), daemon=True).start()
    stdout, stderr = child.communicate(timeout=600)
    found = [line for line in stdout.decode().splitlines() if line.startswith("CASE ")]
    if not found:
        return float("nan"), "failed: " + (stderr.decode().strip().splitlines() or ["?"])[-1][:90]
    result = json.loads(found[-1].removeprefix("CASE "))
    said = stderr.decode().strip().splitlines()
    outcome = result["outcome"] + (f" ({said[-1][:80]})" if case == "stdin" and said else "")
    return float(result["peak_mb"]), outcome


def measure_post(code: Path, args: argparse.Namespace, data_dir: Path) -> tuple[float, str]:
    """The coordinator service, then a streamed 200 MB POST /ask; the service's peak."""
    from benchmarks import served_url  # this tree's helper, in the parent only (see ROOT)

    secret = secrets.token_hex(16)
    environment = {**_environment(code), "RESEARCH_DATA_DIR": str(data_dir), "RESEARCH_FLEET_SECRET": secret}
    service = subprocess.Popen(
        [sys.executable, "-m", "coordinator.service", "--port", "0"],
        stdin=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True, env=environment, cwd=code,
    )  # fmt: skip
    try:
        url = served_url(service)
        time.sleep(0.5)  # the lifespan's start (a benchmark may wait; no test does)
        started = _peak_mb(service.pid)

        def body() -> Iterator[bytes]:
            yield b'{"query": "'
            for _ in range(args.megabytes):
                yield CHUNK

        headers = {
            "Content-Type": "application/json", "X-Research-Fleet-Secret": secret,
            "Content-Length": str(len(b'{"query": "') + len(CHUNK) * args.megabytes),
        }  # fmt: skip
        try:
            answer = httpx2.post(f"{url}/ask", content=body(), headers=headers, timeout=300)
            outcome = f"HTTP {answer.status_code}: {answer.text[:70]}"
        except httpx2.HTTPError as exc:
            outcome = f"{type(exc).__name__} (the service closed the connection)"
        return _peak_mb(service.pid), f"{outcome} (at start {started:.0f} MB)"
    finally:
        service.kill()
        service.wait(timeout=30)


def extracted(revision: str, into: Path) -> Path:
    """The code of ``revision``, extracted from git (no worktree, no checkout)."""
    command = ["git", "-C", str(ROOT), "archive", revision]
    archive = subprocess.run(command, capture_output=True, check=True).stdout  # noqa: S603  (git on PATH)
    with tarfile.open(fileobj=io.BytesIO(archive)) as tar:
        tar.extractall(into, filter="data")
    return into


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--case", choices=CASES, help=argparse.SUPPRESS)
    parser.add_argument("--before", metavar="REV", help="also measure the code of this git revision")
    parser.add_argument("--megabytes", type=int, default=200, help="MB sent on stdin and in the POST")
    parser.add_argument("--answer-mb", type=float, default=50.0, help="MB of the server's answer")
    parser.add_argument("--only", choices=CASES, action="append", help="this case only (repeatable)")
    args = parser.parse_args()
    if args.case:
        run_case(args.case, args.answer_mb)
        return
    sys.path.insert(0, str(ROOT))  # the parent's own helpers; each case's process imports the code measured
    with tempfile.TemporaryDirectory() as scratch:
        codes = {"after": ROOT}
        if args.before:
            codes = {f"before ({args.before})": extracted(args.before, Path(scratch) / "before"), **codes}
        print(f"{'case':14} {'code':18} {'peak MB':>8}  outcome")
        for case in args.only or CASES:
            for label, code in codes.items():
                data_dir = Path(tempfile.mkdtemp(dir=scratch))
                peak, outcome = (
                    measure_post(code, args, data_dir)
                    if case == "post"
                    else measure_child(code, case, args, data_dir)
                )
                print(f"{case:14} {label:18} {peak:8.0f}  {outcome}", flush=True)


if __name__ == "__main__":
    main()
