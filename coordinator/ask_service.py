"""Asking the coordinator service (``coordinator.service``): what `research ask --transport http` sends.

Light to import, the standard library only: asking a warm service must not cost the mcp SDK's
import, which is the very wait the service exists to save.
"""

from __future__ import annotations

import json
import urllib.error
import urllib.request
from dataclasses import dataclass
from typing import Any

from sources.security.fleet_secret import FLEET_SECRET_HEADER

__all__ = ["DEFAULT_PORT", "MODULE", "NAME", "Answer", "QueryRefused", "ServiceUnavailable", "ask"]

NAME = "coordinator"  # its name in the fleet
MODULE = "coordinator.service"  # run as ``python -m coordinator.service --port PORT``
DEFAULT_PORT = 8100  # beside the sources' 8101-8105

# Beyond the query's own deadline: the service answers by then, so this bounds only a service that
# stopped answering altogether.
_MARGIN_S = 5.0


class ServiceUnavailable(Exception):
    """The service did not answer: the asker researches in its own process instead."""


class QueryRefused(Exception):
    """The service read the query and refused it: the asker's usage error, in the service's words."""


@dataclass(frozen=True)
class Answer:
    status: str  # complete or partial
    trace_id: str
    output: str  # the report, rendered as asked (for stdout)
    tasks: str = ""  # the tasks' table as they ended (for stderr)


def ask(
    base_url: str,
    secret: str,
    query: str,
    *,
    deadline_s: float,
    seed: int | None,
    output: dict[str, Any],
    grants: list[str] | None = None,
    approvals: list[str] | None = None,
) -> Answer:
    """Send one query; ``deadline_s`` is what is left of the asker's own deadline; ``approvals``: the
    writes approved up front (the service has no one to ask)."""
    body = {
        "query": query, "deadline_s": deadline_s, "seed": seed, "output": output, "grants": grants or [],
        "approve": approvals or [],
    }  # fmt: skip
    request = urllib.request.Request(  # noqa: S310  (a http://127.0.0.1 URL from the fleet's state)
        f"{base_url}/ask",
        data=json.dumps(body).encode(),
        headers={"Content-Type": "application/json", FLEET_SECRET_HEADER: secret},
        method="POST",
    )
    try:
        with urllib.request.urlopen(request, timeout=deadline_s + _MARGIN_S) as response:  # noqa: S310
            answer = json.loads(response.read())
        return Answer(
            status=answer["status"], trace_id=answer["trace_id"], output=answer["output"],
            tasks=answer.get("tasks", ""),
        )  # fmt: skip
    except urllib.error.HTTPError as exc:
        text = exc.read().decode(errors="replace")
        if exc.code in (400, 413):  # the query or its size: the asker's usage error
            raise QueryRefused(_error_of(text)) from None
        raise ServiceUnavailable(f"the coordinator service answered {exc.code}: {_error_of(text)}") from None
    except (urllib.error.URLError, TimeoutError, OSError, ValueError, KeyError, TypeError) as exc:
        raise ServiceUnavailable(f"the coordinator service did not answer: {exc}") from None


def _error_of(text: str) -> str:
    try:
        return str(json.loads(text)["error"])
    except (ValueError, KeyError, TypeError):
        return text.strip()[:200]
