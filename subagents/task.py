"""A subagent's task: one source, one tool, its arguments, and the purpose its credentials are asked for.

Its own module, importing nothing: the planner builds tasks on every command, and a plan printed
or refused must not wait for the mcp SDK the subagents that run them need.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

__all__ = ["Task"]


@dataclass(frozen=True)
class Task:
    id: str
    source: str
    tool: str
    arguments: dict[str, Any]
    purpose: str = "research"
    # A task a later round added: the finding it follows ("orders:ORD-10074"), shown on its span.
    follows: str = ""
