"""A run while it runs: each job's progress from its ``stage.log``, and whether a local job's
process is alive.  ``nesyseq launch`` (slurm/launcher.py) prints these lines as its local jobs run;
``nesyseq status`` (slurm/status.py) shows them from any shell, at any moment.

A job's progress is fairseq's own log lines (nesyseq/common/train_log.py): updates done of the
command's ``--max-update`` (or the epoch of its ``--max-epoch``), the last training and validation
losses and, while it runs, the time this start has run and the time left at the rate of its updates
so far.  A job that logs no updates (prepare, evaluate) has none.
"""
from __future__ import annotations

import os
import shlex
import socket
import time
from pathlib import Path
from typing import List, Optional

from nesyseq.common.train_log import LogProgress, budget_of, progress_text

LOG = "stage.log"


def _budget(rec: dict):
    try:
        return budget_of(shlex.split(rec.get("command", "")))
    except ValueError:
        return None, None


def read_progress(folder: Path) -> Optional[LogProgress]:
    """The progress of a job's whole ``stage.log``, or None when it has none (yet)."""
    try:
        with open(Path(folder) / LOG, errors="replace") as f:
            lines = f.read().splitlines()
    except OSError:
        return None
    p = LogProgress()
    p.feed(lines)
    return p if p.seen_progress else None


def progress_cell(rec: dict, running: bool, now: Optional[float] = None) -> str:
    """The progress column of ``nesyseq status`` for one job ("" when it logs no updates)."""
    p = read_progress(Path(rec["folder"]))
    if p is None:
        return ""
    total, max_epoch = _budget(rec)
    snap = p.snapshot(time.time() if now is None else now, total, max_epoch)
    if not running:
        snap.update(elapsed=None, left=None)
    return progress_text(**snap)


def last_lines(path: Path, n: int = 8) -> List[str]:
    try:
        with open(path, errors="replace") as f:
            return [ln.rstrip() for ln in f.read().splitlines() if ln.strip()][-n:]
    except OSError:
        return []


def pid_alive(pid_text: str) -> Optional[bool]:
    """Whether the process of a local job id (its PID) runs; None when that cannot be told here."""
    if not str(pid_text).isdigit():
        return None
    pid = int(pid_text)
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    except OSError:
        return None
    try:   # a zombie (exited, not yet reaped by its launcher) has finished
        with open(f"/proc/{pid}/stat") as f:
            return f.read().rsplit(")", 1)[1].split()[0] != "Z"
    except (OSError, IndexError):
        return True


def this_host() -> str:
    return socket.gethostname()


class JobWatch:
    """One local job's progress lines for ``nesyseq launch``: the log is read as it grows, and a
    line is due when the progress changed and ``every`` seconds passed since the last one."""

    def __init__(self, rec: dict, label: str, every: float = 5.0):
        self.rec, self.label, self.every = rec, label, every
        self.path = Path(rec["folder"]) / LOG
        self.offset = 0
        self.partial = ""
        self.progress = LogProgress()
        self.total, self.max_epoch = _budget(rec)
        self.changed = False
        self.last_shown = 0.0
        self.t0 = time.time()

    def poll(self, now: float, final: bool = False) -> Optional[str]:
        """The line to print now, if one is due (``final``: the job ended, its last progress is due
        whenever it changed)."""
        try:
            with open(self.path, "rb") as f:
                f.seek(self.offset)
                chunk = f.read()
        except OSError:
            chunk = b""
        if chunk:
            self.offset += len(chunk)
            text = self.partial + chunk.decode("utf-8", errors="replace")
            lines = text.split("\n")
            self.partial = lines.pop()
            self.changed |= self.progress.feed(lines, now)
        if self.changed and (final or now - self.last_shown >= self.every):
            self.changed, self.last_shown = False, now
            return f"      {self.label}: {self.progress.text(now, self.total, self.max_epoch)}"
        return None
