"""The transport ``mcp.Client`` opens on a target, with every answer bounded while it is read.

``mcp.Client`` given stdio parameters or a URL opens the SDK's ``stdio_client`` or
``streamable_http_client``; neither bounds a JSON response or a stdio line, so a source answering
50 MB is read whole before anything can refuse it. ``opened_transport`` opens the same transports
with a bound (``subagents.answer_limit``):

* stdio: the SDK's own spawn and stop (its process group, grace and kill policy), and the project's
  bounded framing (``subagents.sessions.framing``) on the pipes in place of its unbounded reader;
* HTTP: the SDK's ``streamable_http_client`` with ``max_sse_event_size`` (its own bounded SSE
  reading) and an httpx transport that cuts a JSON response off at the bound (the SDK reads those
  whole, ``response.aread()``).

An in-process server (tests) and a transport of our own (a forked source, framed the same way) are
opened as they are.
"""

from __future__ import annotations

import functools
import ssl
import sys
from collections.abc import AsyncIterator
from contextlib import AbstractAsyncContextManager, asynccontextmanager
from typing import Any, TextIO

import anyio
import httpx2
from mcp import StdioServerParameters
from mcp.client import stdio
from mcp.client._transport import TransportStreams
from mcp.client.streamable_http import streamable_http_client
from mcp.server import MCPServer
from mcp.shared._httpx_utils import MCP_DEFAULT_SSE_READ_TIMEOUT, MCP_DEFAULT_TIMEOUT

from subagents.answer_limit import MAX_ANSWER_BYTES, too_large
from subagents.sessions.framing import framed

__all__ = ["AnswerTooLarge", "AuthorizedUrl", "bounded_http", "bounded_stdio", "opened_transport"]


class AuthorizedUrl(str):
    """A source's URL, and how each request to it is authorized: still the URL (compared, shown and
    logged as one), opened with its ``auth`` rather than as a bare URL, which would send no token."""

    auth: httpx2.Auth

    def __new__(cls, url: str, auth: httpx2.Auth) -> AuthorizedUrl:
        made = super().__new__(cls, url)
        made.auth = auth
        return made


Opened = MCPServer | StdioServerParameters | str | AbstractAsyncContextManager[Any]


def opened_transport(
    opened: Opened, limit: int = MAX_ANSWER_BYTES
) -> MCPServer | AbstractAsyncContextManager[Any]:
    """What ``mcp.Client`` is given for ``opened`` (what a target returns): bounded where it reads."""
    if isinstance(opened, StdioServerParameters):
        return bounded_stdio(opened, limit)
    if isinstance(opened, str):
        return bounded_http(opened, limit, auth=opened.auth if isinstance(opened, AuthorizedUrl) else None)
    return opened


@asynccontextmanager
async def bounded_stdio(
    server: StdioServerParameters, limit: int = MAX_ANSWER_BYTES, errlog: TextIO = sys.stderr
) -> AsyncIterator[TransportStreams]:
    """``stdio_client`` with each line bounded (and, as it, the server's stderr to ``errlog``). Its
    spawn and stop are the SDK's own private functions (mcp 2.3.0 is pinned): a copy would drift
    from its process-group and kill policy."""
    command = await stdio._get_executable_command(server.command)
    process = await stdio._create_platform_compatible_process(
        command=command,
        args=server.args,
        env=stdio.get_default_environment() | (server.env or {}),
        errlog=errlog,
        cwd=server.cwd,
    )
    try:  # no await between the spawn and here: a cancellation in a gap would leak the process
        assert process.stdout is not None and process.stdin is not None  # spawned with pipes
        async with framed(process.stdout, process.stdin, limit) as streams:
            yield streams
    finally:
        with anyio.CancelScope(shield=True):  # the process is stopped whatever cancels the session
            async with anyio.create_task_group() as draining:
                # Read and drop what it still writes, so a server stuck writing a huge answer sees its
                # input end and leaves; the stop closes its stdout at the end, which ends the drain.
                draining.start_soon(stdio._drain_stdout, process)
                await stdio._stop_server_process(process)


class AnswerTooLarge(httpx2.StreamError):
    """A JSON response over the bound, cut off while read (the SDK reports a ``StreamError`` as a
    JSON-RPC error of the call, keeping its text: ``subagents.classify`` reads it)."""


class _BoundedBody(httpx2.AsyncByteStream):
    def __init__(self, body: httpx2.AsyncByteStream, limit: int) -> None:
        self._body, self._limit = body, limit

    async def __aiter__(self) -> AsyncIterator[bytes]:
        read = 0
        async for chunk in self._body:
            read += len(chunk)
            if read > self._limit:
                raise AnswerTooLarge(too_large(self._limit))
            yield chunk

    async def aclose(self) -> None:
        await self._body.aclose()


class _BoundedJsonTransport(httpx2.AsyncBaseTransport):
    """Every ``application/json`` response's body bounded; SSE streams are the SDK's to bound (per
    event: a stream that stays open for hours may carry any number of them)."""

    def __init__(self, limit: int) -> None:
        self._inner, self._limit = httpx2.AsyncHTTPTransport(verify=shared_tls()), limit

    async def handle_async_request(self, request: httpx2.Request) -> httpx2.Response:
        response = await self._inner.handle_async_request(request)
        if response.headers.get("content-type", "").lower().startswith("application/json"):
            assert isinstance(response.stream, httpx2.AsyncByteStream)  # an async transport's body
            response.stream = _BoundedBody(response.stream, self._limit)
        return response

    async def aclose(self) -> None:
        await self._inner.aclose()


@functools.cache
def shared_tls() -> ssl.SSLContext:
    """One TLS context for every session this process opens, made as httpx makes its own (the same CA
    store, ``SSL_CERT_FILE`` honoured): httpx loads the CA store again for each transport, some 2 MB
    and milliseconds a session, and a batch worker opens five sessions and reopens them after faults."""
    return httpx2.create_ssl_context()


@asynccontextmanager
async def bounded_http(
    url: str, limit: int, auth: httpx2.Auth | None = None
) -> AsyncIterator[TransportStreams]:
    """``streamable_http_client`` with each answer bounded, on a client with the SDK's own timeouts
    (and each request authorized by ``auth``, when given: ``subagents.sessions.bearer``)."""
    timeout = httpx2.Timeout(MCP_DEFAULT_TIMEOUT, read=MCP_DEFAULT_SSE_READ_TIMEOUT)
    async with (
        httpx2.AsyncClient(timeout=timeout, transport=_BoundedJsonTransport(limit), auth=auth) as client,
        streamable_http_client(url, http_client=client, max_sse_event_size=limit) as streams,
    ):
        yield streams
