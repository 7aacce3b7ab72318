"""Output folders: checked before any work, one writer at a time, temporaries that are really stale.

* :func:`check_out_path`: ``--out`` can be a folder: not a regular file, under a folder (not a
  file) that can be written.  Called before any work, so a wrong ``--out`` costs nothing.
* :class:`FolderLock`: ``OUT/.nesyseq.lock``, held (``flock``) while a command writes into OUT.  A
  second run of a command into the same folder is refused in one line naming the folder and the
  pid that holds it, instead of the two deleting each other's temporaries.  The lock file stays
  (removing it would let a third run lock another file of the same name).
* :func:`is_stale`: a temporary ``NAME.tmp-PID…`` / ``NAME.old-PID`` is removed by a later run only
  when process PID is gone (or is this one).
"""
from __future__ import annotations

import os
import re
from pathlib import Path
from typing import Optional

from nesyseq.common.errors import UserError

LOCK_NAME = ".nesyseq.lock"
_OWNER = re.compile(r"\.(?:tmp|old)-(\d+)")


def check_out_path(path, flag: str = "--out") -> Path:
    """``path`` as an output folder: refused in one line if it is a regular file, or if the nearest
    folder that exists (itself or an ancestor) is a file or cannot be written."""
    p = Path(path)
    if p.exists() and not p.is_dir():
        raise UserError(f"{flag} {path}: a file, not a folder")
    existing = p
    while not os.path.lexists(existing) and existing != existing.parent:
        existing = existing.parent
    if not existing.is_dir():
        raise UserError(f"{flag} {path}: {existing} is a file, not a folder")
    if not os.access(existing, os.W_OK | os.X_OK):
        raise UserError(f"{flag} {path}: {existing} is not writable (permission denied)")
    return p


def live_pid(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:   # exists, another user's
        return True
    return True


def owner(name: str) -> Optional[int]:
    m = _OWNER.search(name)
    return int(m.group(1)) if m else None


def is_stale(name: str) -> bool:
    """A temporary whose writer (the pid in its name) is gone, or is this process."""
    pid = owner(name)
    return pid is None or pid == os.getpid() or not live_pid(pid)


class FolderLock:
    """``with FolderLock(out, "nesyseq prepare math"):`` -- creates ``out`` if needed and holds
    ``out/.nesyseq.lock``; another holder is a one-line refusal.  If this run created ``out`` and
    fails, the folder is removed again when nothing but the lock is in it."""

    def __init__(self, folder, command: str, flag: str = "--out"):
        self.folder, self.command, self.flag = Path(folder), command, flag
        self.fd = None
        self.created = False

    def __enter__(self) -> "FolderLock":
        import fcntl

        self.created = not self.folder.exists()
        try:
            self.folder.mkdir(parents=True, exist_ok=True)
            self.fd = os.open(self.folder / LOCK_NAME, os.O_RDWR | os.O_CREAT, 0o644)
        except OSError as exc:
            raise UserError(f"{self.flag} {self.folder}: cannot write there ({exc.strerror or exc})") from None
        try:
            fcntl.flock(self.fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except OSError:
            holder = os.read(self.fd, 64).decode(errors="replace").strip() or "?"
            os.close(self.fd)
            self.fd = None
            raise UserError(f"{self.flag} {self.folder}: another `{self.command}` (pid {holder}) is writing "
                            f"into it (it holds {self.folder / LOCK_NAME}); wait for it to end, or give "
                            f"another {self.flag}") from None
        os.ftruncate(self.fd, 0)
        os.write(self.fd, f"{os.getpid()}\n".encode())
        return self

    def __exit__(self, kind, exc, tb) -> None:
        import fcntl

        if self.fd is not None:
            fcntl.flock(self.fd, fcntl.LOCK_UN)
            os.close(self.fd)
            self.fd = None
        if kind is not None and self.created:
            try:
                if [p.name for p in self.folder.iterdir()] == [LOCK_NAME]:
                    (self.folder / LOCK_NAME).unlink()
                    self.folder.rmdir()
            except OSError:
                pass
