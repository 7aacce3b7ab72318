"""Progress read from a fairseq training log: updates done, losses, time left.

fairseq's ``--log-format simple`` writes one ``train_inner`` line per ``--log-interval`` updates
(``... num_updates=50, ...`` with ``loss=``) and one ``valid`` line per validation (``| loss 2.31 |
... | num_updates 100``), each after fairseq_cli/train.py's time stamp ``YYYY-mm-dd HH:MM:SS |``.
A stage job (slurm/stage.py) opens each start of its command with ``=== start N at TIME``.
The quickstart's progress bar (nesyseq/cli/train_progress.py), ``nesyseq launch``'s progress lines
and ``nesyseq status`` all read a log with :func:`parse_line` and word it with
:func:`progress_text`.
"""
from __future__ import annotations

import re
import time
from typing import Iterable, List, Optional, Tuple

_UPDATES = re.compile(r"num_updates[= ](\d+)")
_LOSS = re.compile(r"(?<![a-z_])loss[= ]([0-9.]+(?:e[-+]?\d+)?)")
_EPOCH = re.compile(r"\bepoch (\d+)")
_STAMP = re.compile(r"^(\d{4}-\d\d-\d\d \d\d:\d\d:\d\d) \|")
_START = re.compile(r"^=== start (\d+) at (\d{4}-\d\d-\d\d \d\d:\d\d:\d\d)")


def parse_line(line: str):
    """(updates, loss, is_valid) of a fairseq log line, or None if it has no progress."""
    m = _UPDATES.search(line)
    if not m:
        return None
    loss = _LOSS.search(line)
    return int(m.group(1)), (float(loss.group(1)) if loss else None), "valid on" in line


def fmt_time(seconds: float) -> str:
    """m:ss, or h:mm:ss from an hour on."""
    h, rest = divmod(int(max(0, seconds)), 3600)
    m, s = divmod(rest, 60)
    return f"{h}:{m:02d}:{s:02d}" if h else f"{m}:{s:02d}"


def progress_text(updates: int, total: Optional[int], loss: Optional[float], valid_loss: Optional[float],
                  elapsed: Optional[float], left: Optional[float], epoch: Optional[int] = None,
                  max_epoch: Optional[int] = None) -> str:
    """``3000/32000 updates, loss 0.123, valid loss 0.456, 3:35 elapsed, ~30:00 left`` (the parts
    that are known)."""
    parts = [f"{updates}/{total} updates" if total else f"{updates} updates"]
    if epoch is not None and max_epoch:
        parts.insert(0, f"epoch {epoch}/{max_epoch}")
    if loss is not None:
        parts.append(f"loss {loss:.3f}")
    if valid_loss is not None:
        parts.append(f"valid loss {valid_loss:.3f}")
    if elapsed is not None:
        parts.append(f"{fmt_time(elapsed)} elapsed")
    if left is not None:
        parts.append(f"~{fmt_time(left)} left")
    return ", ".join(parts)


def _stamp(text: str) -> Optional[float]:
    try:
        return time.mktime(time.strptime(text, "%Y-%m-%d %H:%M:%S"))
    except (ValueError, OverflowError):
        return None


class LogProgress:
    """What a (stage) log says so far; :meth:`feed` takes its lines in order, as often as they come.
    Only the latest start counts for the time left (a requeued job resumes at its checkpoint)."""

    def __init__(self):
        self.start_time: Optional[float] = None
        self.starts = 0
        self.updates = 0
        self.loss: Optional[float] = None
        self.valid_loss: Optional[float] = None
        self.epoch: Optional[int] = None
        self.points: List[Tuple[float, int]] = []   # (time, updates) of this start
        self.seen_progress = False

    def feed(self, lines: Iterable[str], now: Optional[float] = None) -> bool:
        """Read ``lines``; True when the progress changed.  A line without a time stamp counts
        at ``now`` (the moment it was read) when given."""
        changed = False
        for line in lines:
            m = _START.match(line)
            if m:
                self.starts, self.start_time = int(m.group(1)), _stamp(m.group(2))
                self.points = []
                continue
            parsed = parse_line(line)
            if parsed is None:
                continue
            updates, loss, is_valid = parsed
            self.seen_progress = changed = True
            self.updates = updates
            if is_valid:
                self.valid_loss = loss
            elif loss is not None:
                self.loss = loss
            e = _EPOCH.search(line)
            if e:
                self.epoch = int(e.group(1))
            s = _STAMP.match(line)
            t = _stamp(s.group(1)) if s else now
            if t is not None:
                self.points.append((t, updates))
        return changed

    def snapshot(self, now: float, total: Optional[int] = None, max_epoch: Optional[int] = None) -> dict:
        """The state at ``now``: updates, total, losses, seconds elapsed in this start and left."""
        elapsed = now - self.start_time if self.start_time is not None else None
        left = None
        if total and self.updates < total:
            first, last = self._rate_points()
            if first and last and last[1] > first[1] and last[0] > first[0]:
                rate = (last[1] - first[1]) / (last[0] - first[0])
                left = max(0.0, (total - self.updates) / rate - (now - last[0]))
        return dict(updates=self.updates, total=total, loss=self.loss, valid_loss=self.valid_loss,
                    elapsed=elapsed, left=left, epoch=self.epoch, max_epoch=max_epoch)

    def _rate_points(self):
        if not self.points:
            return None, None
        if len(self.points) >= 2 and self.points[-1][1] > self.points[0][1]:
            return self.points[0], self.points[-1]
        if self.starts == 1 and self.start_time is not None:   # a first start begins at update 0
            return (self.start_time, 0), self.points[-1]
        return None, None

    def text(self, now: float, total: Optional[int] = None, max_epoch: Optional[int] = None) -> str:
        return progress_text(**self.snapshot(now, total, max_epoch))


def budget_of(argv: Iterable[str]) -> Tuple[Optional[int], Optional[int]]:
    """(``--max-update``, ``--max-epoch``) of a training command line, None where absent or 0."""
    words = list(argv)
    out = []
    for flag in ("--max-update", "--max-epoch"):
        value = None
        for i, w in enumerate(words):
            text = w.split("=", 1)[1] if w.startswith(flag + "=") else (words[i + 1] if w == flag and i + 1 < len(words) else None)
            if text is not None:
                try:
                    value = int(text) or None
                except ValueError:
                    value = None
        out.append(value)
    return out[0], out[1]
