"""The per-fleet secret that authorizes run-time chaos control (see ``sources.control``).

Made by `research sources up --chaos`, kept beside the fleet's state in a file only its owner can
read, given to each source in its environment, and sent by `research chaos ...` in a header. Light
to import: the fleet commands use it without loading the mcp SDK.
"""

from __future__ import annotations

import contextlib
import os
import secrets
import stat
from pathlib import Path

__all__ = ["CHAOS_SECRET_ENV", "CHAOS_SECRET_HEADER", "make_secret", "read_secret"]

CHAOS_SECRET_ENV = "RESEARCH_CHAOS_SECRET"  # noqa: S105  (a variable's name, not a secret)
CHAOS_SECRET_HEADER = "X-Research-Chaos-Secret"  # noqa: S105  (a header's name)


def make_secret(path: Path) -> str:
    """A new secret in ``path``, created with mode 0600 at once (never a readable draft), replacing any."""
    secret = secrets.token_urlsafe(32)
    with contextlib.suppress(FileNotFoundError):
        path.unlink()
    descriptor = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
    with os.fdopen(descriptor, "w") as file:
        file.write(secret)
    return secret


def read_secret(path: Path) -> str:
    """The secret in ``path``; a file others can read is refused, since they could drive the chaos."""
    try:
        mode = path.stat().st_mode
    except FileNotFoundError:
        raise ValueError(
            f"no chaos secret at {path}: start the fleet with `research sources up --chaos`"
        ) from None
    if mode & (stat.S_IRWXG | stat.S_IRWXO):
        raise ValueError(f"{path} is readable by others (mode {stat.S_IMODE(mode):o}); it must be 0600")
    return path.read_text().strip()
