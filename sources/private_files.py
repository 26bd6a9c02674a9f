"""Files and folders only their owner may open: the one place that writes and reads secrets on disk.

A secret file is written to a draft created 0600 from its first byte (``O_CREAT | O_EXCL``, never a
readable draft that is chmod-ed afterwards), then moved to its name by a hard link or a rename, so
the name shows either nothing or the whole file. Of several processes publishing at once with
``replace=False``, exactly one wins and the others read the winner's file. Reading refuses a file
others could open, naming the file, its mode and the fix. Light to import: the fleet commands use
it without loading the mcp SDK.
"""

from __future__ import annotations

import contextlib
import os
import secrets
import stat
from pathlib import Path

__all__ = ["private_folder", "publish_file", "read_private_file", "read_protected_file"]

_GROUP_OR_OTHERS = stat.S_IRWXG | stat.S_IRWXO
_WRITABLE_BY_OTHERS = stat.S_IWGRP | stat.S_IWOTH


def private_folder(path: Path) -> Path:
    """``path`` as a folder: created 0700 when missing (its missing parents as ``mkdir -p`` would).

    A folder that was there already is left as it is: its owner chose its mode.
    """
    path.parent.mkdir(parents=True, exist_ok=True)
    try:
        path.mkdir(mode=0o700)
    except FileExistsError:
        return path
    path.chmod(0o700)  # mkdir's mode passes through the umask; say exactly what we mean
    return path


def publish_file(path: Path, text: str, *, replace: bool, mode: int = 0o600) -> bool:
    """Publish ``text`` at ``path`` whole, with ``mode`` (0600 unless said) from the first byte.

    With ``replace`` the file takes the place of any file of that name; without, a file already
    there is kept and this returns False (another process won); True when this call published.
    """
    draft = path.with_name(f".{path.name}.{os.getpid()}.{secrets.token_hex(4)}.draft")
    descriptor = os.open(draft, os.O_WRONLY | os.O_CREAT | os.O_EXCL, mode)
    try:
        with os.fdopen(descriptor, "w") as file:
            file.write(text)
            file.flush()
            os.fsync(file.fileno())
        if replace:
            os.replace(draft, path)
            return True
        try:
            os.link(draft, path)  # a hard link appears whole or not at all, and never over another file
        except FileExistsError:
            return False
        return True
    finally:
        with contextlib.suppress(FileNotFoundError):
            draft.unlink()


def read_private_file(path: Path) -> str:
    """The text of ``path``, a secret: refused when group or others hold any permission on it."""
    return _read_checked(path, _GROUP_OR_OTHERS, "readable only by its owner", 0o600)


def read_protected_file(path: Path) -> str:
    """The text of ``path``, not secret but trusted (a public key): refused when others may write it."""
    return _read_checked(path, _WRITABLE_BY_OTHERS, "writable only by its owner", 0o644)


def _read_checked(path: Path, forbidden: int, must_be: str, fix: int) -> str:
    # Check the file that was opened, not the name: the name could change between a check and a read.
    with path.open(encoding="utf-8") as file:
        mode = stat.S_IMODE(os.fstat(file.fileno()).st_mode)
        if mode & forbidden:
            raise ValueError(
                f"{path} is open to other users (mode {mode:04o}); it must be {must_be}. "
                f"Fix it with: chmod {fix:o} {path}"
            )
        return file.read().strip()
