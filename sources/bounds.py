"""How much input the project accepts, and reading no more than that.

Every place input enters (a query on standard input, a questions file, the coordinator service's
request body, a tool's arguments given on the command line) is bounded *while it is read*: input
over a limit is refused before it is held whole, so memory stays bounded whatever is sent. A
source's answer is bounded by the sessions' transports (``subagents.answer_limit``).

``MAX_NESTING`` bounds how deep a JSON value given as arguments may nest: deeper than any tool's
arguments need, and far below what the interpreter's recursion limit lets a walk reach.
"""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path
from typing import Any, BinaryIO

__all__ = ["MAX_NESTING", "TooLarge", "deeper_than", "read_at_most", "read_file_at_most"]

MAX_NESTING = 64


class TooLarge(ValueError):
    """Input over its limit, refused before it was read whole."""

    def __init__(self, limit: int) -> None:
        super().__init__(f"more than {limit:,} bytes")
        self.limit = limit


def read_at_most(stream: BinaryIO, limit: int) -> bytes:
    """All of ``stream`` if it holds at most ``limit`` bytes; ``TooLarge`` after reading one byte more
    (never the rest: a 200 MB pipe costs this process ``limit`` bytes, not 200 MB)."""
    data = stream.read(limit + 1)
    if len(data) > limit:
        raise TooLarge(limit)
    return data


def read_file_at_most(path: Path, limit: int) -> bytes:
    """The file's bytes, bounded while read as ``read_at_most`` (a FIFO or /dev/stdin has no size to
    check first); ``OSError`` as ``open`` raises it."""
    with path.open("rb") as file:
        return read_at_most(file, limit)


def deeper_than(value: Any, limit: int = MAX_NESTING) -> bool:
    """Whether ``value`` (parsed JSON) nests objects or arrays more than ``limit`` levels deep.

    Iterative, so it answers for any depth without recursion; it stops at the first level past the limit."""
    level: list[Any] = [value]
    for _ in range(limit):
        level = [item for held in level for item in _children(held)]
        if not level:
            return False
    return any(isinstance(held, Mapping | list) for held in level)


def _children(value: Any) -> Any:
    if isinstance(value, Mapping):
        return value.values()
    return value if isinstance(value, list) else ()
