"""Which registry files this user has approved.

A ``research.toml`` runs the commands it names, and one is picked up from the working folder: a file
that arrived with a cloned repository, or that another process wrote or changed, would run its
commands the next time anyone asks a question there. So a registry file is used only as approved:
`research sources add` and `remove` approve what they write, and `research sources trust` approves
a file as it is now, after the user has read it. What is approved is the file's exact content (its
SHA-256, with its absolute path): any change by anyone else withdraws the approval. What is checked
is the digest of the very bytes that were parsed (``Registry.digest``): a file swapped between the
read and the check is never run on the old file's approval.

The approvals are kept in the data folder, readable and writable by this user alone.
"""

from __future__ import annotations

import hashlib
import json
from pathlib import Path

from traces.private_files import private_folder, publish_file

__all__ = ["fingerprint", "is_trusted", "trust"]

_APPROVALS = "trusted-registries.json"


def fingerprint(content: bytes) -> str:
    """What an approval holds of a registry file: the SHA-256 of its bytes."""
    return hashlib.sha256(content).hexdigest()


def _approvals(data_dir: Path) -> dict[str, str]:
    try:
        kept = json.loads((data_dir / _APPROVALS).read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return {}
    return kept if isinstance(kept, dict) else {}


def is_trusted(path: Path, data_dir: Path, digest: str) -> bool:
    """Whether ``digest`` (of the bytes read from ``path``) is what this user last approved there."""
    return bool(digest) and _approvals(data_dir).get(str(path.resolve())) == digest


def trust(path: Path, data_dir: Path, digest: str) -> None:
    """Approve ``digest`` at ``path``: the bytes this user read or wrote there (published whole, 0600:
    a reader never sees half a file)."""
    approvals = {**_approvals(data_dir), str(path.resolve()): digest}
    private_folder(data_dir)
    publish_file(data_dir / _APPROVALS, json.dumps(approvals, indent=1), replace=True, durable=False)
