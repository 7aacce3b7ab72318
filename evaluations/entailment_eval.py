"""``nesyseq evaluate entailment``: accuracy per split of ``tpru_classifier`` checkpoints.

    nesyseq evaluate entailment --data data/entail --out results/entail \\
        --checkpoint lstm=ck_lstm/checkpoint_best.pt --checkpoint tpru8=ck_tpru8/checkpoint_best.pt ...

Writes OUT/accuracy.md, OUT/accuracy.csv (one row per checkpoint: cell, N, recurrent parameters as the
slides count them, accuracy per split) and OUT/accuracy_vs_roles.png (TPRU accuracy vs N per split,
the LSTM/GRU baselines as horizontal lines).

With ``--curve NAME=SAVE_DIR`` (repeatable) it also re-scores every interval checkpoint
``checkpoint_{epoch}_{updates}.pt`` of a ``fairseq-train --save-interval-updates`` run on ``validate``:
OUT/curves.csv (name, updates, accuracy) and OUT/curves.png, validation accuracy vs updates.
"""
import argparse
import csv
import io
import os
from pathlib import Path

from nesyseq.common.atomic import atomic_write_bytes
from nesyseq.evaluations.math_compare import interval_checkpoints  # noqa: F401  (--curve's save dirs)

DEFAULT_SPLITS = "validate,test_easy,test_hard,test_big,test_massive,test_exam"


def add_arguments(parser: argparse.ArgumentParser) -> None:
    from nesyseq.common import cli_args

    cli_args.add_checkpoint(parser, "checkpoint(s) to score, PATH or NAME=PATH (NAME labels its row; "
                                    "default: the checkpoint's folder name)")
    cli_args.add_data(parser, "directory with {split}.txt")
    cli_args.add_out(parser, "eval_entailment/ beside the first checkpoint")
    cli_args.add_subset(parser, DEFAULT_SPLITS, "comma-separated splits; missing files are skipped",
                        aliases=["--splits"])
    cli_args.add_cpu(parser)
    parser.add_argument("--curve", action="append", default=[], metavar="NAME=SAVE_DIR",
                        help="a save dir whose checkpoint_{epoch}_{updates}.pt files are scored on validate "
                             "(repeatable): validation accuracy vs updates")
    parser.add_argument("--batch-size", type=int, default=256, help="pairs per forward pass")


def accuracy(model, task, split: str, batch_size: int) -> float:
    import torch
    from fairseq import utils

    ds = task.datasets[split]
    correct = 0
    on_gpu = next(model.parameters()).is_cuda
    with torch.no_grad():
        for i in range(0, len(ds), batch_size):
            batch = ds.collater([ds[j] for j in range(i, min(len(ds), i + batch_size))])
            if on_gpu:
                batch = utils.move_to_cuda(batch)
            logits = model(**batch["net_input"])
            correct += int(((logits > 0).float() == batch["target"]).sum())
    return 100.0 * correct / max(len(ds), 1)


def score_checkpoint(path: str, data: str, splits, batch_size: int, cpu: bool = True):
    from nesyseq.evaluations import checkpoints
    from nesyseq.plugins.layers.tpru import recurrent_param_count

    model, cfg, task, _ = checkpoints.load_model(path, data, ("entailment_pairs",), "evaluate entailment")
    if not cpu:
        model = model.cuda()
    row = {"cell": str(cfg.model.cell), "N": cfg.model.num_roles if str(cfg.model.cell) == "tpru" else "",
           "recurrent_params": recurrent_param_count(model),
           "total_params": sum(p.numel() for p in model.parameters())}
    for split in splits:
        if os.path.exists(os.path.join(data, f"{split}.txt")):
            task.load_dataset(split)
            row[split] = round(accuracy(model, task, split, batch_size), 2)
    return row


def write_reports(rows, splits, out: Path):
    out.mkdir(parents=True, exist_ok=True)
    present = [s for s in splits if any(s in r for r in rows)]
    cols = ["name", "cell", "N", "recurrent_params", "total_params"] + present
    buf = io.StringIO()
    w = csv.DictWriter(buf, fieldnames=cols, extrasaction="ignore")
    w.writeheader()
    w.writerows(rows)
    atomic_write_bytes(str(out / "accuracy.csv"), buf.getvalue().encode())
    md = ["| " + " | ".join(cols) + " |", "|" + "---|" * len(cols)]
    for r in rows:
        md.append("| " + " | ".join(str(r.get(c, "")) for c in cols) + " |")
    atomic_write_bytes(str(out / "accuracy.md"), ("\n".join(md) + "\n").encode())
    from nesyseq.evaluations.plotting import pyplot, save_png

    plt = pyplot()
    fig, ax = plt.subplots(figsize=(6, 4))
    tp = sorted((r for r in rows if r["cell"] == "tpru"), key=lambda r: r["N"])
    for k, s in enumerate(present):
        color = f"C{k}"
        if tp:
            ax.plot([r["N"] for r in tp], [r.get(s) for r in tp], "o-", color=color, label=f"TPRU {s}")
        for r, ls in zip([r for r in rows if r["cell"] != "tpru"], ("--", ":", "-.")):
            ax.axhline(r.get(s, float("nan")), color=color, ls=ls, lw=0.8)
    ax.set_xscale("log", base=2)
    ax.set_xlabel("role vectors N (baselines: LSTM --, GRU : in the order given)")
    ax.set_ylabel("accuracy %")
    ax.legend(fontsize=6)
    fig.tight_layout()
    save_png(fig, out / "accuracy_vs_roles.png", dpi=120)
    return "\n".join(md) + "\n"


def write_curves(curves, out: Path, split: str = "validate") -> None:
    """curves: {name: [(updates, accuracy)]} -> OUT/curves.csv and OUT/curves.png."""
    out.mkdir(parents=True, exist_ok=True)
    buf = io.StringIO()
    w = csv.writer(buf)
    w.writerow(["name", "updates", f"{split}_accuracy"])
    for name, pts in curves.items():
        w.writerows([name, u, a] for u, a in pts)
    atomic_write_bytes(str(out / "curves.csv"), buf.getvalue().encode())
    from nesyseq.evaluations.plotting import pyplot, save_png

    plt = pyplot()
    fig, ax = plt.subplots(figsize=(6, 4))
    for name, pts in curves.items():
        ax.plot([u for u, _ in pts], [a for _, a in pts], "o-", ms=3, label=name)
    ax.set_xlabel("updates")
    ax.set_ylabel(f"{split} accuracy %")
    ax.legend(fontsize=7)
    fig.tight_layout()
    save_png(fig, out / "curves.png", dpi=120)


def _name_and_path(spec: str, flag: str, placeholder: str, kind: str, exists):
    """``NAME=PATH`` -> (NAME, PATH); one-line errors name the flag (bad form, missing ``kind``)."""
    from nesyseq.common.errors import UserError

    if "=" not in spec:
        if flag != "--checkpoint":
            raise UserError(f"{flag} {spec!r}: expected NAME={placeholder}")
        spec = f"{Path(spec).resolve().parent.name}={spec}"
    name, path = spec.split("=", 1)
    if not exists(path):
        raise UserError(f"{flag} {name}: no {kind} {path}")
    return name, path


def run(args) -> int:
    from nesyseq.common.errors import UserError

    from nesyseq.common import cli_args

    splits = [s for s in args.subset.split(",") if s]
    cpu = cli_args.use_cpu(args)
    paths = [_name_and_path(spec, "--checkpoint", "PATH", "file", os.path.isfile) for spec in args.checkpoint]
    out = cli_args.out_dir(args, paths[0][1], "eval_entailment")
    rows = []
    for name, path in paths:
        row = score_checkpoint(path, args.data, splits, args.batch_size, cpu)
        row["name"] = name
        rows.append(row)
    print(write_reports(rows, splits, out), end="")
    curves = {}
    for spec in args.curve:
        name, save_dir = _name_and_path(spec, "--curve", "SAVE_DIR", "directory", os.path.isdir)
        points = interval_checkpoints(save_dir)
        if not points:
            raise UserError(f"--curve {name}: no checkpoint_{{epoch}}_{{updates}}.pt in {save_dir} "
                            "(train with --save-interval-updates)")
        curves[name] = [(u, score_checkpoint(p, args.data, ["validate"], args.batch_size, cpu)["validate"])
                        for u, p in points]
    if curves:
        write_curves(curves, out)
        for name, pts in curves.items():
            print(f"{name}: " + " ".join(f"{u}:{a:.1f}" for u, a in pts))
    return 0
