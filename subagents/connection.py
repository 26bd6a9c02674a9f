"""Live MCP sessions with the sources: opened on first use, shared, reopened when they die.

Each session lives in a task of its own. The mcp client runs its transport in a task group; when
the transport fails (an HTTP connection dropped, a stdio process killed), that task group cancels
the task that entered it. Holding the session in a dedicated task keeps that failure away from the
subagents: their in-flight call fails with an ordinary error (``MCPError`` "Connection closed",
a timeout), and the next call opens a fresh session, respawning a stdio source.

A generation counter makes reopening idempotent: of several subagents that saw the same session
die, only the first replaces it.
"""

from __future__ import annotations

import sys
from collections.abc import AsyncIterator, Callable
from contextlib import asynccontextmanager
from typing import Any

import anyio
from anyio.abc import TaskGroup, TaskStatus
from mcp import Client, StdioServerParameters
from mcp.server import MCPServer
from mcp.types import CallToolResult

from sources.settings import SourceSettings
from subagents.classify import SourceUnavailable

__all__ = ["Connections", "SourceConnection", "Target", "http_target", "stdio_target"]

# What a session is opened on: an in-process server (tests), stdio parameters, or an HTTP URL.
Target = Callable[[], "MCPServer | StdioServerParameters | str"]

_OPEN_TIMEOUT_S = 20.0  # spawning a source and its handshake
_SAFETY_MARGIN_S = 1.0  # beyond the SDK's own read timeout, in case a transport never answers at all


def stdio_target(source: str, settings: SourceSettings, *extra_args: str) -> Target:
    """Spawn ``python -m sources.<source>``, passing the settings it needs through its environment."""

    def target() -> StdioServerParameters:
        return StdioServerParameters(
            command=sys.executable,
            args=["-m", f"sources.{source}", *extra_args],
            env=settings.child_environment(),
        )

    return target


def http_target(url: str) -> Target:
    return lambda: url


class SourceConnection:
    def __init__(
        self, source: str, target: Target, task_group: TaskGroup, client_options: dict[str, Any] | None = None
    ) -> None:
        self.source = source
        self._target = target
        self._client_options = client_options or {}
        self._task_group = task_group
        self._client: Client | None = None
        self._stop = anyio.Event()
        self._generation = 0
        self._lock = anyio.Lock()
        self.opened = 0  # sessions opened so far (a respawn counts)

    async def _hold(self, *, task_status: TaskStatus[Client]) -> None:
        stop = anyio.Event()
        self._stop = stop
        started = False
        try:
            async with Client(self._target(), read_timeout_seconds=None, **self._client_options) as client:
                task_status.started(client)
                started = True
                await stop.wait()
        except Exception:
            if not started:
                raise  # the opener learns why the session could not be opened
            # The session died under its callers; they have their own errors. Nothing to do here.

    async def session(self) -> tuple[Client, int]:
        """The live session, opened (or respawned) if need be, and its generation."""
        async with self._lock:
            if self._client is None:
                try:
                    with anyio.fail_after(_OPEN_TIMEOUT_S):
                        self._client = await self._task_group.start(self._hold)
                except Exception as exc:
                    raise SourceUnavailable(self.source, exc) from exc
                self._generation += 1
                self.opened += 1
            return self._client, self._generation

    @staticmethod
    async def call(
        client: Client,
        tool: str,
        arguments: dict[str, Any],
        *,
        timeout_s: float,
        meta: dict[str, Any] | None = None,
    ) -> CallToolResult:
        """One call, bounded by the SDK's read timeout and, should a transport never answer, by our own."""
        with anyio.fail_after(timeout_s + _SAFETY_MARGIN_S):
            return await client.call_tool(tool, arguments, read_timeout_seconds=timeout_s, meta=meta)

    async def reopen(self, generation: int) -> None:
        """Drop the session a caller saw fail; the next call opens a new one (respawning a stdio source)."""
        async with self._lock:
            if generation == self._generation and self._client is not None:
                self._client = None
                self._stop.set()

    async def close(self) -> None:
        async with self._lock:
            self._client = None
            self._stop.set()


class Connections:
    """The sessions of one coordinator process, one per source, owned by one task group."""

    def __init__(
        self, targets: dict[str, Target], task_group: TaskGroup, client_options: dict[str, Any] | None = None
    ) -> None:
        self._targets = targets
        self._task_group = task_group
        self._client_options = client_options
        self._open: dict[str, SourceConnection] = {}

    def __getitem__(self, source: str) -> SourceConnection:
        if source not in self._open:
            target = self._targets[source]
            self._open[source] = SourceConnection(source, target, self._task_group, self._client_options)
        return self._open[source]

    async def close(self) -> None:
        for connection in self._open.values():
            await connection.close()

    @classmethod
    @asynccontextmanager
    async def opened(
        cls, targets: dict[str, Target], client_options: dict[str, Any] | None = None
    ) -> AsyncIterator[Connections]:
        """``client_options`` go to every ``mcp.Client`` (e.g. ``mode="legacy"``: JSON-RPC framing in memory)."""
        async with anyio.create_task_group() as group:
            connections = cls(targets, group, client_options)
            try:
                yield connections
            finally:
                await connections.close()
