"""``nesyseq choose-arm``: of several trained checkpoints (the arms of one stage), the one whose
validation loss is lowest, chosen without any test.

    nesyseq choose-arm --arms keep zero --out choose_task2/seed=0 \\
        --checkpoint 'train_task2/seed=0/t2_relative_table={arm}/checkpoints/checkpoint_best.pt'

``{arm}`` in ``--checkpoint`` is replaced by each value of ``--arms`` (words separated by whitespace
or commas, in one argument or several: a launch config's arm key reads as its whole list in a later stage,
docs/slurm.md).  The loss is fairseq's ``extra_state["val_loss"]`` of each checkpoint (bits per
target token on the held-out valid split, rounded to 3 decimals by fairseq's logging); the first
arm listed wins a tie; an arm without a loss is an error, since no arm is chosen by looking at the
test.  Writes ``OUT/arm_choice.json`` (each arm's checkpoint and loss, the chosen arm) and
``OUT/checkpoint_best.pt``, a relative link to the chosen checkpoint, both replaced atomically, so
the next stage reads the choice as one checkpoint.  ``nesyseq evaluate qa`` given such a link
(:func:`read_choice`) also scores every arm, each as a row of its own, and shows the choice.
"""
from __future__ import annotations

import argparse
import json
import os
from pathlib import Path
from typing import Dict, List, Optional

from nesyseq.common.atomic import atomic_write_bytes
from nesyseq.common.errors import UserError

RECORD = "arm_choice.json"


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--arms", nargs="+", required=True, metavar="VALUE",
                        help="the arms, in order (the first listed wins a tie); an argument's words (split at whitespace or commas) count one by one")
    parser.add_argument("--checkpoint", required=True, metavar="PATH",
                        help="each arm's checkpoint, with {arm} where its value goes")
    parser.add_argument("--out", required=True, metavar="DIR",
                        help="where arm_choice.json and checkpoint_best.pt (a link) are written")


def arm_values(words: List[str]) -> List[str]:
    """The arms of ``--arms``: the words of each argument, split at whitespace and commas."""
    arms = [a for w in words for a in w.replace(",", " ").split()]
    if not arms or len(set(arms)) != len(arms):
        raise UserError(f"--arms {' '.join(words)!r}: expected distinct values")
    return arms


def arm_checkpoints(pattern: str, arms: List[str]) -> Dict[str, str]:
    if "{arm}" not in pattern:
        raise UserError(f"--checkpoint {pattern}: needs {{arm}} where each arm's value goes")
    return {a: pattern.replace("{arm}", a) for a in arms}


def choose(losses: Dict[str, Optional[float]], arms: List[str]) -> str:
    """The arm rule, the one place it is written: the arm of ``arms`` whose loss is lowest, the
    first listed on a tie; an arm without a loss (None) is an error naming it."""
    missing = [a for a in arms if losses.get(a) is None]
    if missing:
        raise UserError(f"arm {missing[0]} has no validation loss, so no arm can be chosen without the test")
    return min(arms, key=lambda a: losses[a])   # min keeps the first of equals


def checkpoint_loss(path: str) -> Optional[float]:
    """fairseq's ``extra_state["val_loss"]`` of the checkpoint file ``path`` (read safely by
    evaluations/checkpoints.py; no model is built), None for one saved without it."""
    from nesyseq.evaluations import checkpoints

    v = (checkpoints.read_raw(path, mmap=True).get("extra_state") or {}).get("val_loss")
    return None if v is None else float(v)


def choose_arm(arms: List[str], pattern: str, out: Path) -> dict:
    """Read each arm's loss, choose, write ``out/arm_choice.json`` and the link; returns the record."""
    paths = arm_checkpoints(pattern, arms)
    losses = {a: checkpoint_loss(p) for a, p in paths.items()}
    for a in arms:
        if losses[a] is None:
            raise UserError(f"--checkpoint {paths[a]} (arm {a}) has no validation loss (extra_state val_loss), "
                            "so no arm can be chosen without the test")
    chosen = choose(losses, arms)
    out.mkdir(parents=True, exist_ok=True)
    record = {"valid_loss": losses, "chosen": chosen, "checkpoint": os.path.abspath(paths[chosen]),
              "checkpoints": {a: os.path.abspath(p) for a, p in paths.items()}}
    link, tmp = out / "checkpoint_best.pt", out / f".checkpoint_best.pt.tmp-{os.getpid()}"
    if tmp.is_symlink() or tmp.exists():
        tmp.unlink()
    os.symlink(os.path.relpath(paths[chosen], out), tmp)
    os.replace(tmp, link)
    atomic_write_bytes(str(out / RECORD), (json.dumps(record, indent=1) + "\n").encode())
    return record


def read_choice(checkpoint: str) -> Optional[dict]:
    """The record of ``checkpoint`` when it is a choose-arm link (``arm_choice.json`` beside it
    names the checkpoint the link points to), else None."""
    path = Path(checkpoint)
    record = path.parent / RECORD
    if not path.is_symlink() or not record.is_file():
        return None
    try:
        choice = json.loads(record.read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return None
    named = choice.get("checkpoint") if isinstance(choice, dict) else None
    return choice if named and os.path.realpath(path) == os.path.realpath(named) else None


def run(args) -> int:
    record = choose_arm(arm_values(args.arms), args.checkpoint, Path(args.out))
    losses = ", ".join(f"{a} {v:.3f}" for a, v in record["valid_loss"].items())
    print(f"chosen: {record['chosen']} (valid loss per arm: {losses})")
    return 0
