"""The five MCP source servers, the error contract they speak, and what they share."""

import sys


def _serving_stdio() -> bool:
    """Whether this process is `python -m sources.<source>` serving stdio (not --http, not a tool)."""
    from sources.catalogue import SOURCES  # light: the catalogue imports no SDK

    argv = sys.orig_argv
    if "-m" not in argv[:-1] or "--http" in argv:
        return False
    return argv[argv.index("-m") + 1] in {f"sources.{name}" for name in SOURCES}


# Exit as soon as the client hangs up, even while the rest of the source is still importing.
if _serving_stdio():
    from sources.lifeline import exit_when_stdin_hangs_up

    exit_when_stdin_hangs_up()
