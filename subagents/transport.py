"""The seam between the recovery and the wire: what a subagent needs of a source, and nothing more.

A subagent asks its ``Transport`` for the ``SourceLink`` of its task's source, opens a session on it,
sends each attempt, and has a session it saw fail dropped. ``subagents.sessions.connection.Connections`` is
the live transport (MCP sessions over stdio, HTTP or a forked process); ``subagents.sessions.recording``
records what a live one answered, and ``subagents.sessions.replaying`` answers from such a recording, as
httpx's ``MockTransport`` answers for a server. Each attempt travels as its ``ToolCall``, so a
transport knows which task's which attempt it carries (a recording is keyed by that).
"""

from __future__ import annotations

from typing import Any, Protocol

from mcp.types import CallToolResult

from subagents.hooks import ToolCall

__all__ = ["SourceLink", "Transport"]


class SourceLink(Protocol):
    """One source, as the subagents calling it see it."""

    @property
    def opened(self) -> int:
        """Sessions opened so far (a respawn counts): one while all is well."""
        ...

    def open_soon(self) -> None:
        """Start opening a session now (a source spawns while the first tasks run)."""

    async def session(self, *, timeout_s: float = ..., for_call: ToolCall | None = None) -> tuple[Any, int]:
        """An open session and its generation, within ``timeout_s``; else ``SourceUnavailable``.

        ``for_call``: the attempt the session is opened for (None: a session for listing tools)."""
        ...

    async def send(
        self, session: Any, call: ToolCall, *, timeout_s: float, meta: dict[str, Any] | None
    ) -> CallToolResult:
        """One attempt on ``session``: its answer, or what the transport raised."""
        ...

    async def reopen(self, generation: int) -> None:
        """Drop the session of ``generation`` (a caller saw it fail); the next attempt opens another."""


class Transport(Protocol):
    """Every source a run may call, by name."""

    def __getitem__(self, source: str) -> SourceLink: ...
