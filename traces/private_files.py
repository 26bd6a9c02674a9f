"""Files and folders only their owner may open: the one place that writes and reads secrets on disk.

A secret file is written to a draft created 0600 from its first byte (``O_CREAT | O_EXCL``, never a
readable draft that is chmod-ed afterwards), then moved to its name by a hard link or a rename, so
the name shows either nothing or the whole file. Of several processes publishing at once with
``replace=False``, exactly one wins and the others read the winner's file. Reading refuses a file
others could open, naming the file, its mode and the fix. Light to import (the fleet commands use it
without the mcp SDK), and in the lowest layer: trace files, sources' secrets, the coordinator's files.

A private folder is 0700 whether this made it or found it: one of this user's found wider is made
0700 (and, for a data folder, what is in it 0700/0600); one that another user owns is refused
(``NotYoursError``), since its owner could read or swap whatever is put there. Files written to
stay open (logs, traces) are created 0600 and made 0600 if they were there already
(``open_private_file``).
"""

from __future__ import annotations

import contextlib
import errno
import os
import pwd
import secrets
import stat
from pathlib import Path
from typing import IO, Literal

__all__ = [
    "NotYoursError",
    "open_private_file",
    "private_folder",
    "publish_file",
    "read_private_file",
    "read_protected_file",
]

_GROUP_OR_OTHERS = stat.S_IRWXG | stat.S_IRWXO
_WRITABLE_BY_OTHERS = stat.S_IWGRP | stat.S_IWOTH


class NotYoursError(PermissionError, ValueError):
    """A folder (or file) another user owns, where this user's private data would go.

    A ``PermissionError`` (an ``OSError``, as a folder that cannot be made is) and a ``ValueError``
    (as a file open to others is): whoever turns either into a one-line error turns this one too.
    Its text is the message alone, without ``[Errno 13]``.
    """

    def __init__(self, message: str) -> None:
        super().__init__(errno.EACCES, message)

    def __str__(self) -> str:
        return str(self.strerror)


def private_folder(path: Path, *, contents: bool = False) -> Path:
    """``path`` as a folder only this user may open: 0700, made so whether it is new or was there.

    Created 0700 when missing (its missing parents too, as ``mkdir -p`` would but 0700). One that was there and
    is this user's is made 0700; one another user owns is refused (``NotYoursError``), in one line
    naming the folder, its owner and what to do. With ``contents`` (a data folder, whose files this
    project wrote), a folder that was open to others has everything in it made private as well:
    folders 0700, files 0600 (the repair of a folder made before; symbolic links are not followed,
    and what another user owns in it is left alone).
    """
    missing = [parent for parent in path.parents if not parent.exists()]
    for parent in reversed(missing):  # made by us, so private too: mkdir -p would leave them to the umask
        with contextlib.suppress(FileExistsError):  # made meanwhile by another process: theirs to set
            parent.mkdir(mode=0o700)
            parent.chmod(0o700)
    try:
        path.mkdir(mode=0o700)
    except FileExistsError:
        _make_existing_private(path, contents=contents)
        return path
    path.chmod(0o700)  # mkdir's mode passes through the umask; say exactly what we mean
    return path


def _make_existing_private(path: Path, *, contents: bool) -> None:
    # Check and change the folder that was opened, not the name: the name could change in between.
    try:
        descriptor = os.open(path, os.O_RDONLY | os.O_DIRECTORY | os.O_CLOEXEC)
    except NotADirectoryError:  # a file of that name: what mkdir said of it
        raise FileExistsError(errno.EEXIST, os.strerror(errno.EEXIST), str(path)) from None
    try:
        found = os.fstat(descriptor)
        _refuse_unless_mine(path, found, "folder")
        was_open = stat.S_IMODE(found.st_mode) & _GROUP_OR_OTHERS
        if stat.S_IMODE(found.st_mode) != 0o700:
            os.fchmod(descriptor, 0o700)
        if contents and was_open:
            _make_contents_private(descriptor)
    finally:
        os.close(descriptor)


def _make_contents_private(folder: int) -> None:
    """Folders 0700 and files 0600 under the open folder ``folder``: each folder is made private
    before the walk goes into it, so no other user can change what is found there meanwhile."""
    me = os.geteuid()
    for _, folders, files, at in os.fwalk(dir_fd=folder):  # never follows a symbolic link
        for name, mode in [*((each, 0o700) for each in folders), *((each, 0o600) for each in files)]:
            # An entry removed meanwhile (a draft another process dropped) needs nothing.
            with contextlib.suppress(FileNotFoundError):
                found = os.stat(name, dir_fd=at, follow_symlinks=False)
                if stat.S_ISLNK(found.st_mode) or found.st_uid != me or stat.S_IMODE(found.st_mode) == mode:
                    continue
                os.chmod(name, mode, dir_fd=at)  # not a link (checked): chmod changes this entry itself


def _refuse_unless_mine(path: Path, found: os.stat_result, kind: str) -> None:
    if found.st_uid == os.geteuid():
        return
    owner, me = _user_name(found.st_uid), _user_name(os.geteuid())
    owner_said = f"uid {found.st_uid}" if owner == str(found.st_uid) else f"user {owner} (uid {found.st_uid})"
    recursive = " -R" if kind == "folder" else ""
    raise NotYoursError(
        f"{path} belongs to {owner_said}, not to you ({me}): a {kind} someone "
        f"else owns cannot be kept private. Use a {kind} of your own, or make this one yours: "
        f"sudo chown{recursive} {me} {path}"
    )


def _user_name(uid: int) -> str:
    try:
        return pwd.getpwuid(uid).pw_name
    except KeyError:
        return str(uid)


def open_private_file(path: Path, mode: Literal["a", "w"]) -> IO[str]:
    """``path`` opened to append (``"a"``) or to write anew (``"w"``), as text: a log or a trace.

    Created 0600 from its first byte; one that was there is made 0600 (it may come from before, or
    from an earlier process of the same id), and refused if another user owns it.
    """
    appending = os.O_APPEND if mode == "a" else 0
    descriptor = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_CLOEXEC | os.O_NOFOLLOW | appending, 0o600)
    try:
        found = os.fstat(descriptor)
        _refuse_unless_mine(path, found, "file")
        if stat.S_IMODE(found.st_mode) != 0o600:
            os.fchmod(descriptor, 0o600)
        if mode == "w":
            os.ftruncate(descriptor, 0)  # only once it is known to be this user's
        return open(descriptor, mode, encoding="utf-8", buffering=1)  # the caller closes it
    except BaseException:
        os.close(descriptor)
        raise


def publish_file(path: Path, text: str, *, replace: bool, mode: int = 0o600, durable: bool = True) -> bool:
    """Publish ``text`` at ``path`` whole, with ``mode`` (0600 unless said) from the first byte.

    With ``replace`` the file takes the place of any file of that name; without, a file already
    there is kept and this returns False (another process won); True when this call published.
    ``durable``: on disk before it is published (a report, a fleet's state); without, readers still
    see it whole or not at all, but a machine that loses power may lose it (a run's recording, kept
    as a trace is: a debugging aid, not worth a disk flush per query).
    """
    draft = path.with_name(f".{path.name}.{os.getpid()}.{secrets.token_hex(4)}.draft")
    descriptor = os.open(draft, os.O_WRONLY | os.O_CREAT | os.O_EXCL, mode)
    try:
        with os.fdopen(descriptor, "w", encoding="utf-8") as file:
            file.write(text)
            file.flush()
            if durable:
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
