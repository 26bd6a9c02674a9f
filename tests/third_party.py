"""Third-party MCP servers, started the way their users start them, for the tests that measure their errors.

Both are pinned and installed by `make test`: ``@modelcontextprotocol/server-filesystem`` by the npm
install in ``tests/interop`` (beside the TypeScript SDK), ``mcp-server-time`` into a venv of its own,
``.third-party/time`` (it pins its own mcp; the project's venv is never touched). Where either is
absent, the helpers skip the test and say what is missing and how to get it.
"""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest
from mcp import StdioServerParameters

from tests.conftest import PROJECT_ROOT

__all__ = ["FILESYSTEM_PACKAGE", "INTEROP", "TIME_SERVER", "filesystem_server", "time_server"]

INTEROP = PROJECT_ROOT / "tests" / "interop"
FILESYSTEM_PACKAGE = "@modelcontextprotocol/server-filesystem"
TIME_SERVER = PROJECT_ROOT / ".third-party" / "time" / "bin" / "mcp-server-time"

# npx looks in the project it runs in before the registry, so run in tests/interop it starts the pinned
# install there. Offline, npm fails rather than fetch (a newer release) should that install be missing;
# and no update check reaches the registry either: a test never touches the network.
_NPM_OFFLINE = {"npm_config_offline": "true", "npm_config_update_notifier": "false"}


def filesystem_server(directory: Path) -> StdioServerParameters:
    """`npx -y @modelcontextprotocol/server-filesystem DIRECTORY`, as its README starts it.

    Give it and its callers absolute paths: it resolves a relative one against its first allowed
    directory, not the working directory.
    """
    npx = shutil.which("npx")
    if npx is None:
        pytest.skip("npx is not installed (node and npm): the filesystem-server tests need it")
    if not (INTEROP / "node_modules" / FILESYSTEM_PACKAGE / "package.json").is_file():
        pytest.skip(
            f"{FILESYSTEM_PACKAGE} is not installed in tests/interop: run `make test` "
            "(it runs `npm ci --prefix tests/interop`)"
        )
    return StdioServerParameters(
        command=npx, args=["-y", FILESYSTEM_PACKAGE, str(directory)], cwd=INTEROP, env=_NPM_OFFLINE
    )


def time_server() -> StdioServerParameters:
    """`mcp-server-time`, the console script its PyPI package installs, from its own venv."""
    if not TIME_SERVER.is_file():
        pytest.skip(
            f"mcp-server-time is not installed at {TIME_SERVER.relative_to(PROJECT_ROOT)}: "
            "run `make third-party` (part of `make test`)"
        )
    return StdioServerParameters(command=str(TIME_SERVER))
