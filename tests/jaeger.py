"""A real Jaeger v2 for the tests: the all-in-one binary `make jaeger` builds, on free loopback ports.

Started with ``traces/jaeger.yaml`` (OTLP/HTTP in, the query API out, traces in memory); read
through its own HTTP query API (``/api/services``, ``/api/traces/{id}``). Where the binary was not
built (no Go), the tests that need it are skipped with that reason.
"""

from __future__ import annotations

import json
import os
import re
import subprocess
import tempfile
import time
import urllib.error
import urllib.parse
import urllib.request
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from typing import IO, Any

import pytest

from tests.conftest import PROJECT_ROOT, free_ports

__all__ = ["BINARY", "Jaeger", "running_jaeger"]

# The version `make jaeger` builds is named once, in the Makefile; its binary's path holds it.
VERSION = re.search(r"^JAEGER_VERSION := (\S+)$", (PROJECT_ROOT / "Makefile").read_text(), re.MULTILINE)
BINARY = PROJECT_ROOT / ".third-party" / "jaeger" / (VERSION[1] if VERSION else "unknown") / "bin" / "jaeger"
CONFIG = PROJECT_ROOT / "traces" / "jaeger.yaml"
START_BOUND_S = 60.0  # a cold start on a busy two-core machine
QUERY_BOUND_S = 30.0  # for spans sent to reach the query API (Jaeger batches what it receives)


@dataclass(frozen=True)
class Jaeger:
    query: str  # http://127.0.0.1:PORT, the query API
    otlp: str  # http://127.0.0.1:PORT, where OTLP over HTTP goes

    def get(self, path: str) -> Any:
        with urllib.request.urlopen(self.query + path, timeout=10) as answer:  # noqa: S310  (loopback, ours)
            return json.load(answer)

    def services(self) -> set[str]:
        return set(self.get("/api/services").get("data") or [])

    def find(self, service: str, operation: str) -> dict[str, Any]:
        """The first trace Jaeger finds of ``service`` with a span named ``operation`` (bounded wait)."""
        query = urllib.parse.urlencode({"service": service, "operation": operation, "limit": 1})
        deadline = time.monotonic() + QUERY_BOUND_S
        while time.monotonic() < deadline:
            found = self.get(f"/api/traces?{query}").get("data") or []
            if found:
                return dict(found[0])
            time.sleep(0.2)
        raise AssertionError(f"no trace of {service} with {operation} in Jaeger within {QUERY_BOUND_S} s")

    def trace(self, trace_id: str, *, services: int) -> dict[str, Any]:
        """The trace as Jaeger stored it, once spans from ``services`` processes have arrived and the
        span count has held still for a moment (Jaeger batches what it receives)."""
        deadline, last, steady_since = time.monotonic() + QUERY_BOUND_S, -1, 0.0
        while time.monotonic() < deadline:
            try:
                found = self.get(f"/api/traces/{trace_id}")["data"][0]
            except (urllib.error.HTTPError, IndexError, KeyError, TypeError):
                found = None
            if found is not None and len(found["processes"]) >= services:
                if len(found["spans"]) != last:
                    last, steady_since = len(found["spans"]), time.monotonic()
                elif time.monotonic() - steady_since > 1.0:
                    return found
            time.sleep(0.2)
        raise AssertionError(f"trace {trace_id} did not arrive whole in Jaeger within {QUERY_BOUND_S} s")


@contextmanager
def running_jaeger() -> Iterator[Jaeger]:
    if not BINARY.exists():
        pytest.skip(f"Jaeger is not built at {BINARY}: run `make jaeger` (part of `make test`; needs Go)")
    query, grpc, otlp = free_ports(3)
    environment = {
        **os.environ,
        "JAEGER_QUERY_PORT": str(query),
        "JAEGER_QUERY_GRPC_PORT": str(grpc),
        "JAEGER_OTLP_HTTP_PORT": str(otlp),
    }
    jaeger = Jaeger(query=f"http://127.0.0.1:{query}", otlp=f"http://127.0.0.1:{otlp}")
    with tempfile.TemporaryFile("w+") as log:  # a file, never a pipe that fills up
        process = subprocess.Popen(
            [str(BINARY), f"--config=file:{CONFIG}"], env=environment, stdout=log, stderr=log, text=True
        )
        try:
            _wait_until_it_answers(jaeger, process, log)
            yield jaeger
        finally:
            process.terminate()
            try:
                process.wait(timeout=10)
            except subprocess.TimeoutExpired:
                process.kill()
                process.wait()


def _wait_until_it_answers(jaeger: Jaeger, process: subprocess.Popen[str], log: IO[str]) -> None:
    deadline = time.monotonic() + START_BOUND_S
    while True:
        if process.poll() is not None:
            log.seek(0)
            raise AssertionError(f"Jaeger exited {process.returncode}: {log.read()[-2000:]}")
        try:
            jaeger.services()
            return
        except (urllib.error.URLError, ConnectionError):
            if time.monotonic() > deadline:
                raise AssertionError(f"Jaeger did not answer within {START_BOUND_S} s") from None
            time.sleep(0.2)
