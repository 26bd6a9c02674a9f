"""The per-fleet secret that authorizes what a fleet's HTTP routes do beside MCP: run-time chaos
control (``sources.processes.control``) and asking the coordinator service (``coordinator.service``).

Made anew by every `research sources up`, kept beside the fleet's state in a file only its owner can
read (``traces.private_files``), given to each fleet member in its environment, and sent by
`research chaos ...` and `research ask --transport http` in a header. Light to import: the fleet
commands use it without loading the mcp SDK.
"""

from __future__ import annotations

import secrets
from pathlib import Path

from traces.private_files import publish_file, read_private_file

__all__ = ["FLEET_SECRET_ENV", "FLEET_SECRET_HEADER", "make_secret", "read_secret"]

FLEET_SECRET_ENV = "RESEARCH_FLEET_SECRET"  # noqa: S105  (a variable's name, not a secret)
FLEET_SECRET_HEADER = "X-Research-Fleet-Secret"  # noqa: S105  (a header's name)


def make_secret(path: Path) -> str:
    """A new secret in ``path``, created with mode 0600 at once (never a readable draft), replacing any."""
    secret = secrets.token_urlsafe(32)
    publish_file(path, secret, replace=True)
    return secret


def read_secret(path: Path) -> str:
    """The secret in ``path``; a file others can open is refused, since they could drive the fleet."""
    try:
        return read_private_file(path)
    except FileNotFoundError:
        raise ValueError(f"no fleet secret at {path}: start the fleet with `research sources up`") from None
