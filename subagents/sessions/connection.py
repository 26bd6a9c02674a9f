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

import contextlib
import math
import sys
from collections.abc import AsyncIterator, Callable
from contextlib import AbstractAsyncContextManager, asynccontextmanager
from typing import Any, cast

import anyio
import httpx2
from anyio.abc import TaskGroup
from mcp import Client, StdioServerParameters
from mcp.server import MCPServer
from mcp.shared.exceptions import MCPError
from mcp.types import CallToolResult, RequestParamsMeta

from sources.settings import SourceSettings
from subagents.classify import SourceUnavailable
from subagents.hooks import ToolCall
from subagents.sessions.bounded import AuthorizedUrl, opened_transport
from subagents.sessions.forked_transport import forked_source

__all__ = [
    "AuthorizedUrl",
    "Connections",
    "SourceConnection",
    "Target",
    "forked_target",
    "http_target",
    "stdio_parameters",
    "stdio_target",
]

# What a session is opened on: an in-process server (tests), stdio parameters, an HTTP URL, or a
# transport of our own (a forked source).
Target = Callable[[], "MCPServer | StdioServerParameters | str | AbstractAsyncContextManager[Any]"]

_OPEN_TIMEOUT_S = 20.0  # spawning a source and its handshake
_SAFETY_MARGIN_S = 1.0  # beyond the SDK's own read timeout, in case a transport never answers at all
_SPAWN_GRACE_S = 0.1  # how long a session still opening may finish spawning before it is cancelled
_LISTING_TIMEOUT_S = 5.0  # a source that does not list its tools by then is listed by the SDK, as before


def stdio_parameters(source: str, settings: SourceSettings, *extra_args: str) -> StdioServerParameters:
    """How to spawn ``python -m sources.<source>``: a stdio child sees only a safe subset of this
    environment, so what it needs (the settings) is passed explicitly."""
    return StdioServerParameters(
        command=sys.executable,
        args=["-m", f"sources.{source}", *extra_args],
        env=settings.child_environment(),
    )


def stdio_target(source: str, settings: SourceSettings, *extra_args: str) -> Target:
    """Spawn ``python -m sources.<source>``, passing the settings it needs through its environment."""
    return lambda: stdio_parameters(source, settings, *extra_args)


def forked_target(source: str, settings: SourceSettings) -> Target:
    """Fork the source from the fork server (``sources.processes.forked``): a stdio source that starts in
    milliseconds, since the fork server has imported it already."""
    return lambda: forked_source(source, settings.child_environment())


def http_target(url: str | Callable[[], str], auth: httpx2.Auth | None = None) -> Target:
    """A source over streamable HTTP at ``url`` (or where ``url()`` says when a session opens), each
    request authorized by ``auth`` when given (``subagents.sessions.bearer``)."""
    where = url if callable(url) else (lambda: url)
    if auth is None:
        return where
    return lambda: AuthorizedUrl(where(), auth)


class SourceConnection:
    """One source's session. Opening runs in a task of its own, so a caller waits for it with a bound
    of its own (the time its deadline leaves) and never for a half-spawned child's clean-up."""

    def __init__(
        self, source: str, target: Target, task_group: TaskGroup, client_options: dict[str, Any] | None = None
    ) -> None:
        self.source = source
        self._target = target
        self._client_options = client_options or {}
        self._task_group = task_group
        self._opening: _Opening | None = None
        self._generation = 0
        self.opened = 0  # sessions opened so far (a respawn counts)

    def open_soon(self) -> None:
        """Start opening the session (spawning a stdio source) unless one is open or opening."""
        if self._opening is None:
            self._opening = _Opening()
            self._generation += 1
            self.opened += 1
            self._task_group.start_soon(self._hold, self._opening)

    async def _hold(self, opening: _Opening) -> None:
        try:
            with opening.scope, anyio.fail_after(_OPEN_TIMEOUT_S) as opening_deadline:
                async with Client(
                    opened_transport(self._target()), read_timeout_seconds=None, **self._client_options
                ) as client:
                    await _list_tools(client)
                    opening_deadline.deadline = math.inf  # open: the session lives until it is stopped
                    opening.client = client
                    opening.settled.set()
                    await opening.stop.wait()
        # The transport failed: openers learn why; callers in flight have their own errors.
        except Exception as exc:
            opening.failure = exc
        finally:
            opening.ended = True
            opening.settled.set()
            if self._opening is opening:  # the next caller opens a fresh session
                self._opening = None

    async def session(
        self, *, timeout_s: float = _OPEN_TIMEOUT_S, for_call: ToolCall | None = None
    ) -> tuple[Client, int]:
        """The live session, opened (or respawned) if need be, and its generation (``for_call``, the
        attempt it is for, is a recording's concern: a live session is the same for every attempt).

        Waits at most ``timeout_s`` (a subagent passes what its deadline leaves); a source that is not
        ready by then is ``SourceUnavailable``, and its opening goes on for the next caller.
        """
        self.open_soon()
        opening, generation = self._opening, self._generation
        assert opening is not None
        with anyio.move_on_after(max(timeout_s, 0.0)):
            await opening.settled.wait()
        if opening.client is not None and not opening.ended:
            return opening.client, generation
        failure = opening.failure or (
            ConnectionError(f"the session with {self.source} closed")
            if opening.ended
            else TimeoutError(f"{self.source} was not ready within {timeout_s:.2f} s")
        )
        raise SourceUnavailable(self.source, failure)

    async def send(
        self, session: Client, call: ToolCall, *, timeout_s: float, meta: dict[str, Any] | None
    ) -> CallToolResult:
        """One attempt of a subagent (``subagents.transport.SourceLink``) on ``session``, bounded by the
        SDK's read timeout and, should a transport never answer, by our own."""
        with anyio.fail_after(timeout_s + _SAFETY_MARGIN_S):
            # MCP's _meta is an open object (the credential travels in it); the SDK types only its
            # progress token, so the cast says what the protocol allows.
            params_meta = cast("RequestParamsMeta | None", meta)
            return await session.call_tool(
                call.tool, dict(call.arguments), read_timeout_seconds=timeout_s, meta=params_meta
            )

    async def reopen(self, generation: int) -> None:
        """Drop the session a caller saw fail; the next call opens a new one (respawning a stdio source)."""
        if generation == self._generation:
            await self.close()

    async def close(self) -> None:
        opening, self._opening = self._opening, None
        if opening is not None:
            opening.stop.set()
            if opening.client is None:  # still opening: no one is waiting for this session any more
                self._task_group.start_soon(_abandon, opening)


async def _list_tools(client: Client) -> None:
    """Fetch the tools listing as the session starts.

    The SDK validates a tool's structured result against the output schema of its last listing, and
    lists the tools itself after the first call of each tool it has not seen listed: a round trip on
    the critical path of every task. Sessions open while the plan's first tasks run, so the listing
    done here is ready before a dependent task calls. A source that cannot list (a third-party server
    that fails ``tools/list``, or a slow one) is left to the SDK's own listing, as before.
    """
    # A listing refused: the SDK lists again at the first call, and reports what fails then.
    with anyio.move_on_after(_LISTING_TIMEOUT_S), contextlib.suppress(MCPError):
        await client.list_tools()


async def _abandon(opening: _Opening) -> None:
    """Stop a session still opening, once its process is spawned.

    Not at once: a cancellation that lands while the SDK is still spawning the process leaves it
    unreaped (asyncio later warns that "the loop that handles" its pid is closed). A spawn takes
    milliseconds; after it, a cancelled handshake closes the child's stdin, which ends the child at
    once (``sources.processes.lifeline``), and it is reaped.
    """
    with anyio.move_on_after(_SPAWN_GRACE_S):
        await opening.settled.wait()
    opening.scope.cancel()


class _Opening:
    """One session's life: settled once it is open or has failed; stopped to close it."""

    def __init__(self) -> None:
        self.settled = anyio.Event()
        self.stop = anyio.Event()
        self.scope = anyio.CancelScope()
        self.client: Client | None = None
        self.failure: BaseException | None = None
        self.ended = False


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
                for connection in connections._open.values():
                    await connection.close()
