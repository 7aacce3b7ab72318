"""Several checkpoints (steps of one run, or several runs) side by side: the paper's
Table 1 columns and Fig. 2.

    steps.csv / steps.md      run, steps, interpolate mean accuracy and modules > 95%,
                              extrapolate mean accuracy and modules > 95%   (Table 1)
    accuracy_vs_steps.png     mean accuracy per step, one line per run; interpolate and
                              extrapolate panels side by side
    modules_<split>.png       accuracy per module, one bar per (run, steps)  (Fig. 2)

The "train" column of Table 1 (accuracy on training data) is not computed: it needs a
decode of the training set, and checkpoint selection never looks at test data.

Imports flow one way: ``math_eval`` (``nesyseq evaluate math`` with several checkpoints)
imports this module, which reads its ``SplitScore`` objects without importing it.
"""
import csv
import io
import os
import re
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Dict, List, Optional, Tuple

from nesyseq.evaluations.plotting import pyplot, save_png
from nesyseq.common.atomic import atomic_write_bytes

SPLITS = ("interpolate", "extrapolate")
_STEP_RE = re.compile(r"checkpoint_\d+_(\d+)\.pt$")


@dataclass
class Entry:
    run: str  # e.g. the checkpoint's directory: "tp", "base"
    steps: Optional[int]  # updates at which the checkpoint was saved
    scores: Dict[str, Any]  # split name -> evaluations.math_eval.SplitScore (imported lazily: fairseq)

    @property
    def label(self) -> str:
        return f"{self.run} @ {format_steps(self.steps)}"


def format_steps(steps: Optional[int]) -> str:
    if steps is None:
        return "?"
    if steps >= 1000 and steps % 1000 == 0:
        return f"{steps // 1000}k"
    return str(steps)


def interval_checkpoints(save_dir) -> List[Tuple[int, str]]:
    """[(updates, path)] of fairseq's ``checkpoint_<epoch>_<updates>.pt`` files in ``save_dir``
    (--save-interval-updates), by updates."""
    found = []
    for name in os.listdir(save_dir):
        m = _STEP_RE.fullmatch(name)
        if m:
            found.append((int(m.group(1)), os.path.join(save_dir, name)))
    return sorted(found)


def checkpoint_steps(path: Path) -> Optional[int]:
    """Updates of a checkpoint: from fairseq's ``checkpoint_<epoch>_<updates>.pt`` name,
    else from the checkpoint's optimizer history (loads it on CPU)."""
    m = _STEP_RE.search(Path(path).name)
    if m:
        return int(m.group(1))
    from nesyseq.evaluations import checkpoints

    return checkpoints.steps(path)


def _rows(entries: List[Entry]):
    for e in entries:
        row = [e.run, "" if e.steps is None else e.steps]
        for split in SPLITS:
            s = e.scores.get(split)
            row += ["", ""] if s is None else [f"{s.mean_accuracy:.4f}", s.above_95]
        yield row


def steps_csv(entries: List[Entry]) -> str:
    buf = io.StringIO(newline="")
    w = csv.writer(buf)
    w.writerow(["run", "steps", "interpolate_accuracy", "interpolate_modules_above_95",
                "extrapolate_accuracy", "extrapolate_modules_above_95"])
    for row in _rows(entries):
        w.writerow(row)
    return buf.getvalue()


def steps_markdown(entries: List[Entry], title: str = "") -> str:
    lines = [f"# {title}", ""] if title else []
    lines += ["| run | steps | interpolation | >95% | extrapolation | >95% |",
              "|---|---:|---:|---:|---:|---:|"]
    for e in entries:
        cells = [e.run, format_steps(e.steps)]
        for split in SPLITS:
            s = e.scores.get(split)
            cells += ["–", "–"] if s is None else [f"{100 * s.mean_accuracy:.2f}%", str(s.above_95)]
        lines.append("| " + " | ".join(cells) + " |")
    return "\n".join(lines) + "\n"


def accuracy_vs_steps_chart(entries: List[Entry], path: Path, title: str = "") -> None:
    plt = pyplot()
    fig, axes = plt.subplots(1, 2, figsize=(10, 4), sharey=False)
    runs = list(dict.fromkeys(e.run for e in entries))
    for ax, split in zip(axes, SPLITS):
        for run in runs:
            pts = sorted((e.steps, 100 * e.scores[split].mean_accuracy) for e in entries
                         if e.run == run and split in e.scores and e.steps is not None)
            if pts:
                ax.plot([p[0] for p in pts], [p[1] for p in pts], marker="o", label=run)
        ax.set_title(split)
        ax.set_xlabel("training steps (updates)")
        ax.set_ylabel("mean exact-match accuracy over modules (%)")
        ax.grid(alpha=0.3)
        ax.legend(fontsize=8)
    if title:
        fig.suptitle(title)
    fig.tight_layout()
    save_png(fig, path, dpi=110)


def modules_chart(entries: List[Entry], split: str, path: Path, title: str = "") -> None:
    """Fig. 2: accuracy of every module, one bar per (run, steps)."""
    plt = pyplot()
    present = [e for e in entries if split in e.scores]
    names = sorted({m for e in present for m in e.scores[split].modules})
    width = 0.8 / max(1, len(present))
    fig, ax = plt.subplots(figsize=(max(6.0, 0.5 * len(names) * max(1, len(present)) ** 0.5 + 2), 5))
    for i, e in enumerate(present):
        mods = e.scores[split].modules
        accs = [100 * mods[n].accuracy if n in mods else 0.0 for n in names]
        ax.bar([x + (i - (len(present) - 1) / 2) * width for x in range(len(names))], accs,
               width=width, label=e.label)
    ax.set_xticks(range(len(names)))
    ax.set_xticklabels(names, rotation=75, ha="right", fontsize=7)
    ax.set_ylim(0, 100)
    ax.set_ylabel("exact-match accuracy (%)")
    ax.legend(fontsize=7)
    ax.set_title(f"{title} {split}".strip(), fontsize=9)
    fig.tight_layout()
    save_png(fig, path, dpi=110)


def write_comparison(entries: List[Entry], out_dir: Path, title: str = "") -> Dict[str, Path]:
    out_dir = Path(out_dir)
    out_dir.mkdir(parents=True, exist_ok=True)
    entries = sorted(entries, key=lambda e: (e.run, -1 if e.steps is None else e.steps))
    paths = {"steps_csv": out_dir / "steps.csv", "steps_md": out_dir / "steps.md",
             "steps_png": out_dir / "accuracy_vs_steps.png"}
    atomic_write_bytes(str(paths["steps_csv"]), steps_csv(entries).encode("utf-8"))
    atomic_write_bytes(str(paths["steps_md"]), steps_markdown(entries, title).encode("utf-8"))
    accuracy_vs_steps_chart(entries, paths["steps_png"], title)
    for split in SPLITS:
        if any(split in e.scores for e in entries):
            paths[f"modules_{split}"] = out_dir / f"modules_{split}.png"
            modules_chart(entries, split, paths[f"modules_{split}"], title)
    return paths
