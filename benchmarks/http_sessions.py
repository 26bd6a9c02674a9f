"""Sessions opened and abandoned over HTTP: how many a source holds, and the memory they cost.

Two orders sources serve HTTP side by side: one with this project's bounds (sessions idle for 5
minutes end, at most 1,000 at once) and one with the mcp SDK's defaults (30 minutes, 10,000). Each
is sent ``--sessions`` session openings (``initialize``, as a client of the stateful protocol
opens one, e.g. the TypeScript SDK) that are never closed, as by clients that died. Prints, for
each: sessions admitted and refused (503), and the source's resident memory before and after.

    .venv/bin/python benchmarks/http_sessions.py [--sessions 10000] [--concurrency 32]

Target: under 200 MB with the project's bounds after 10,000 abandoned sessions.
"""

from __future__ import annotations

import argparse
import os
import subprocess
import sys
import tempfile
from collections import Counter
from pathlib import Path

import anyio
import httpx2
import psutil

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from benchmarks import served_url  # noqa: E402
from sources.settings import SourceSettings  # noqa: E402

INITIALIZE = {
    "jsonrpc": "2.0", "id": 1, "method": "initialize",
    "params": {"protocolVersion": "2025-06-18", "capabilities": {}, "clientInfo": {"name": "abandoner", "version": "1"}},
}  # fmt: skip
HEADERS = {"Accept": "application/json, text/event-stream", "Content-Type": "application/json"}


def start(settings: SourceSettings, **env: str) -> tuple[subprocess.Popen[str], str]:
    server = subprocess.Popen(
        [sys.executable, "-m", "sources.orders", "--http", "--port", "0"],
        env={**os.environ, **settings.child_environment(), **env}, stdin=subprocess.DEVNULL,
        stderr=subprocess.PIPE, text=True,
    )  # fmt: skip
    return server, served_url(server)  # its log is read on (each refusal is logged)


async def abandon(url: str, sessions: int, concurrency: int) -> Counter[int]:
    statuses: Counter[int] = Counter()
    limiter = anyio.Semaphore(concurrency)
    async with httpx2.AsyncClient(timeout=30) as client:

        async def open_one() -> None:
            async with limiter:
                response = await client.post(url, json=INITIALIZE, headers=HEADERS)
                statuses[response.status_code] += 1

        async with anyio.create_task_group() as group:
            for _ in range(sessions):
                group.start_soon(open_one)
    return statuses


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--sessions", type=int, default=10_000)
    parser.add_argument("--concurrency", type=int, default=32)
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as data_dir:
        settings = SourceSettings(data_dir=Path(data_dir))
        for label, env in (
            ("project bounds (5 min, 1,000)", {}),
            ("SDK defaults (30 min, 10,000)", {"RESEARCH_HTTP_SESSION_IDLE_S": "1800", "RESEARCH_HTTP_MAX_SESSIONS": "10000"}),
        ):  # fmt: skip
            server, url = start(settings, **env)
            try:
                before = psutil.Process(server.pid).memory_info().rss
                statuses = anyio.run(abandon, url, args.sessions, args.concurrency)
                after = psutil.Process(server.pid).memory_info().rss
            finally:
                server.kill()  # a graceful stop would wait for every held session
                server.wait(timeout=10)
            print(
                f"{label:31} admitted {statuses[200]:6,}  refused {statuses[503]:6,}  other {sum(statuses.values()) - statuses[200] - statuses[503]:3}"
                f"  memory {before / 2**20:6.1f} MB -> {after / 2**20:6.1f} MB"
            )


if __name__ == "__main__":
    main()
