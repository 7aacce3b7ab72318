"""Run ``fairseq-train`` with its log in a file and its progress on the screen.

fairseq's ``--log-format simple`` writes one ``train_inner`` line per ``--log-interval``
updates (``... num_updates=50, ...`` with ``loss=``) and one ``valid`` line per validation
(``| loss 2.31 | ... | num_updates 100``).  :func:`run_with_progress` copies every line to
the log file and shows updates done of total, the latest loss and elapsed time: a
redrawn bar on a terminal, plain lines otherwise (CI logs, pipes).
"""
from __future__ import annotations

import subprocess
import sys
import time
from pathlib import Path
from typing import List, Optional, TextIO

from nesyseq.common.train_log import parse_line, progress_text

__all__ = ["parse_line", "Progress", "run_with_progress"]


class Progress:
    def __init__(self, total: int, stream: TextIO, width: int = 30):
        self.total, self.stream, self.width = max(1, int(total)), stream, width
        self.tty = bool(getattr(stream, "isatty", lambda: False)())
        self.t0 = time.monotonic()
        self.updates, self.loss, self.valid_loss = 0, None, None
        self._drawn = False

    def update(self, updates: int, loss: Optional[float], is_valid: bool) -> None:
        self.updates = max(self.updates, updates)
        if is_valid:
            self.valid_loss = loss
        elif loss is not None:
            self.loss = loss
        self._show(is_valid)

    def _text(self) -> str:
        elapsed = time.monotonic() - self.t0
        left = elapsed * (self.total - self.updates) / self.updates if 0 < self.updates < self.total else None
        return progress_text(self.updates, self.total, self.loss, self.valid_loss, elapsed, left)

    def _show(self, is_valid: bool) -> None:
        if self.tty:
            done = int(self.width * min(self.updates, self.total) / self.total)
            bar = "#" * done + "-" * (self.width - done)
            self.stream.write(f"\r      [{bar}] {self._text()}\x1b[K")
            self._drawn = True
        else:
            self.stream.write(f"      {'validation: ' if is_valid else ''}{self._text()}\n")
        self.stream.flush()

    def close(self) -> None:
        if self.tty and self._drawn:
            self.stream.write("\n")
            self.stream.flush()


def run_with_progress(cmd: List[str], log: Path, total_updates: int, stream: TextIO = None,
                      **popen_kwargs) -> int:
    """Run ``cmd``; every output line goes to ``log``; progress goes to ``stream``."""
    stream = sys.stdout if stream is None else stream
    progress = Progress(total_updates, stream)
    with open(log, "w", encoding="utf-8") as f:
        proc = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
                                bufsize=1, **popen_kwargs)
        try:
            for line in proc.stdout:
                f.write(line)
                f.flush()
                parsed = parse_line(line)
                if parsed is not None:
                    progress.update(*parsed)
        finally:
            rc = proc.wait()
            progress.close()
    return rc
