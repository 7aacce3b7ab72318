"""Table 1 of Salinas and Elsahar, "Symbol-Shift Equivariant Neural Networks" (ICLR 2021
submission, OpenReview ``whAxkamuuCU``): the 20 bAbI tasks, each trained on its own.

One run (a model, a recipe, a task, a seed) is scored by

    nesyseq evaluate qa-table1 --checkpoint SAVE_DIR/checkpoint_best.pt --data BIN --subset test \\
        --model stpr_sm --recipe paper --size 1k --task 3 --seed 0 --out RESULTS

which writes ``table1_run.csv`` (one row: the test error of ``checkpoint_best.pt``, the checkpoint
fairseq kept on the held-out valid loss, its updates and valid loss, the run's total updates) and
``table1_curve.csv`` (the test error of every ``checkpoint_<epoch>_<updates>.pt`` beside it, the
``--save-interval-updates`` checkpoints, and of ``checkpoint_last.pt``: the learning curve).
configs/experiments/qa_table1.yaml runs it once per run; ``nesyseq collect RUN_DIR`` then calls
:func:`collect_study`, which writes the study's report into RUN_DIR:

* ``collect.md``: per model (and recipe), the error per task as mean ± std over seeds beside the
  paper's Table 3 (1K) value, the aggregate (mean over the 20 tasks, per seed) as mean ± std
  over seeds beside the paper's Table 1, the tasks passed (error < 5%) per seed, the best seed
  (lowest aggregate test error: the paper's "best" rows, chosen on the test) and the seed of
  lowest mean valid loss (chosen without the test), and the tasks that fail;
* ``collect.csv`` (per task), ``table1_seeds.csv`` (per seed), ``table1_runs.csv`` (every run),
  ``table1_curve.csv`` and ``collect.png``: the average test error over tasks and seeds against
  updates (the paper's Fig. 4, as error).

std is the population std over seeds (0 for one seed), as every results table of
examples/symbolic_qa/.
"""
from __future__ import annotations

import argparse
import csv
import io
import statistics
from collections import OrderedDict
from pathlib import Path
from typing import Dict, List, Optional, Sequence, Tuple

from nesyseq.common.atomic import atomic_write_bytes
from nesyseq.common.errors import UserError

PASS = 5.0   # a task is passed below 5% error (the paper, after Weston et al.)
TASKS = tuple(range(1, 21))
RUN_COLUMNS = ("model", "recipe", "size", "task", "seed", "error", "questions", "best_updates", "valid_loss",
               "updates")
CURVE_COLUMNS = ("model", "recipe", "size", "task", "seed", "updates", "error")

# The paper's Table 3 (error % per task, 1K training examples, mean ± std over 10 seeds) and
# Table 1 (aggregate error), keyed by our model names.
PAPER_NAMES = {"memnet": "MN", "smn": "SMN", "tpr": "TPR", "tpr_sm": "TPR-sm", "stpr": "STPR", "stpr_sm": "STPR-sm"}
PAPER_TABLE3_1K = {
    "memnet": {1: (0.4, 0.3), 2: (71.0, 3.1), 3: (76.5, 1.2), 4: (21.6, 0.7), 5: (22.3, 0.9), 6: (23.8, 10.8),
               7: (23.4, 1.6), 8: (17.6, 0.8), 9: (19.6, 6.7), 10: (23.7, 6.4), 11: (10.5, 3.3), 12: (0.6, 0.2),
               13: (6.5, 1.1), 14: (3.8, 6.6), 15: (0.0, 0.1), 16: (52.1, 1.4), 17: (47.0, 1.6), 18: (48.9, 1.6),
               19: (76.8, 1.1), 20: (0.0, 0.1)},
    "smn": {1: (0.0, 0.1), 2: (69.4, 5.9), 3: (76.8, 1.0), 4: (21.5, 0.4), 5: (21.6, 0.8), 6: (16.7, 3.3),
            7: (18.0, 1.0), 8: (14.5, 1.3), 9: (10.8, 1.3), 10: (19.1, 1.9), 11: (10.8, 0.9), 12: (0.0, 0.0),
            13: (6.8, 1.3), 14: (10.9, 8.7), 15: (0.0, 0.0), 16: (52.5, 1.4), 17: (46.1, 2.2), 18: (48.1, 1.9),
            19: (74.3, 2.8), 20: (0.0, 0.0)},
    "tpr": {1: (0.0, 0.0), 2: (27.4, 33.7), 3: (73.6, 2.6), 4: (0.0, 0.1), 5: (2.1, 0.5), 6: (19.9, 11.5),
            7: (16.5, 4.7), 8: (10.4, 2.7), 9: (31.7, 6.8), 10: (39.1, 17.4), 11: (2.0, 0.8), 12: (0.4, 0.2),
            13: (8.1, 1.7), 14: (14.4, 12.6), 15: (0.0, 0.0), 16: (53.0, 2.1), 17: (42.5, 2.9), 18: (3.8, 1.3),
            19: (88.6, 3.7), 20: (0.0, 0.0)},
    "tpr_sm": {1: (1.0, 2.2), 2: (6.9, 18.3), 3: (68.4, 4.3), 4: (2.0, 4.2), 5: (2.4, 0.6), 6: (12.6, 1.9),
               7: (10.2, 2.8), 8: (4.4, 1.7), 9: (21.6, 3.6), 10: (21.2, 6.9), 11: (1.0, 1.4), 12: (0.1, 0.1),
               13: (4.9, 0.6), 14: (21.3, 3.8), 15: (0.3, 0.3), 16: (53.5, 1.0), 17: (32.6, 2.2), 18: (1.9, 1.1),
               19: (75.8, 6.8), 20: (0.4, 0.4)},
    "stpr": {1: (0.0, 0.0), 2: (15.6, 27.4), 3: (71.1, 6.5), 4: (0.1, 0.1), 5: (4.6, 2.9), 6: (24.0, 16.4),
             7: (17.9, 5.2), 8: (4.5, 1.6), 9: (35.9, 9.3), 10: (30.3, 14.2), 11: (7.6, 2.8), 12: (3.2, 3.1),
             13: (7.5, 1.8), 14: (6.5, 10.3), 15: (0.0, 0.0), 16: (39.1, 24.5), 17: (45.1, 2.0), 18: (5.5, 3.0),
             19: (86.7, 6.4), 20: (0.0, 0.0)},
    "stpr_sm": {1: (0.0, 0.0), 2: (2.1, 1.3), 3: (8.5, 3.8), 4: (0.0, 0.0), 5: (2.2, 1.9), 6: (4.1, 2.8),
                7: (1.5, 1.8), 8: (0.9, 0.6), 9: (4.9, 1.2), 10: (10.2, 3.3), 11: (1.2, 1.2), 12: (2.1, 0.8),
                13: (3.8, 1.6), 14: (1.8, 4.3), 15: (0.0, 0.1), 16: (0.3, 0.4), 17: (24.4, 13.0), 18: (0.9, 1.2),
                19: (43.9, 14.2), 20: (0.0, 0.0)},
}
PAPER_TABLE1 = {  # size -> model -> (mean, std) aggregate error; "best": the best seed's aggregate
    "1k": {"memnet": (27.3, 1.1), "smn": (25.9, 0.4), "tpr": (21.7, 2.0), "stpr": (20.3, 1.7),
           "tpr_sm": (17.1, 1.0), "stpr_sm": (5.6, 0.8)},
    "10k": {"memnet": (15.6, 0.3), "smn": (14.4, 1.8), "tpr": (2.2, 0.9), "stpr": (0.7, 0.6),
            "tpr_sm": (13.0, 1.6), "stpr_sm": (3.1, 0.4)},
}
PAPER_BEST = {"1k": {"tpr": 14.77, "tpr_sm": 13.56, "stpr": 11.65, "stpr_sm": 1.79},
              "10k": {"tpr": 0.14, "tpr_sm": 7.65, "stpr": 0.06, "stpr_sm": 1.82}}


# -- one run ---------------------------------------------------------------------------------------

def add_arguments(parser: argparse.ArgumentParser) -> None:
    from nesyseq.common.cli_args import add_checkpoint, add_cpu, add_data, add_out, add_subset

    add_checkpoint(parser, "the run's checkpoint_best.pt; its folder's checkpoint_<epoch>_<updates>.pt files "
                           "and checkpoint_last.pt give the learning curve")
    add_data(parser, "the run's binarized task folder (prepare qa: bin/taskN)")
    add_subset(parser, "test", "the split scored")
    add_out(parser, "results/ beside the checkpoint")
    add_cpu(parser)
    run = parser.add_argument_group("the run's labels, copied into both CSVs")
    run.add_argument("--model", required=True, help="the model's name in the study (stpr_sm, tpr_sm, ...)")
    run.add_argument("--recipe", default="paper", help="the training recipe's name (default: paper)")
    run.add_argument("--size", default="1k", help="the training-set size's label (default: 1k)")
    run.add_argument("--task", required=True, type=int, choices=TASKS, metavar="N", help="the bAbI task, 1-20")
    run.add_argument("--seed", required=True, type=int, help="the training seed")
    parser.add_argument("--no-curve", action="store_true", help="score checkpoint_best.pt only")
    parser.add_argument("--batch-size", type=int, default=256, help="questions per forward pass")


def checkpoint_updates(state: dict) -> int:
    """The updates a loaded fairseq checkpoint was saved at (its optimizer history)."""
    history = state.get("optimizer_history") or [{}]
    updates = history[-1].get("num_updates")
    if updates is None:
        raise UserError("a checkpoint without num_updates in its optimizer history")
    return int(updates)


def curve_checkpoints(save_dir: Path) -> List[Tuple[int, str]]:
    """[(updates, path)] of the interval checkpoints in ``save_dir`` and of checkpoint_last.pt
    (its updates read from the file), by updates, one path per update count."""
    from nesyseq.evaluations.math_compare import checkpoint_steps, interval_checkpoints

    found = dict(interval_checkpoints(save_dir))
    last = save_dir / "checkpoint_last.pt"
    if last.is_file():
        found.setdefault(checkpoint_steps(last), str(last))
    return sorted(found.items())


def _csv(columns: Sequence[str], rows: List[Dict]) -> bytes:
    buf = io.StringIO(newline="")
    w = csv.writer(buf)
    w.writerow(columns)
    for r in rows:
        w.writerow([r[c] for c in columns])
    return buf.getvalue().encode()


def run(args) -> int:
    from nesyseq.common.cli_args import data_dir, out_dir, use_cpu
    from nesyseq.evaluations.qa_eval import answer_error, load_state

    if not args.checkpoint or len(args.checkpoint) != 1:
        raise UserError("--checkpoint: give the run's one checkpoint_best.pt")
    best = Path(args.checkpoint[0])
    data = data_dir(args)
    out = out_dir(args, str(best), "results")
    cpu = use_cpu(args)
    labels = dict(model=args.model, recipe=args.recipe, size=args.size, task=args.task, seed=args.seed)
    state = load_state(str(best), data)
    score = answer_error(str(best), data, args.subset, args.batch_size, cpu=cpu)
    curve = [] if args.no_curve else curve_checkpoints(best.parent)
    last = best.parent / "checkpoint_last.pt"
    from nesyseq.evaluations.math_compare import checkpoint_steps

    row = dict(labels, error=f"{score['error']:.4f}", questions=score["questions"],
               best_updates=checkpoint_updates(state), valid_loss=score["valid_loss"],
               updates=checkpoint_steps(last) if last.is_file() else "")
    points = [dict(labels, updates=u, error=f"{answer_error(p, data, args.subset, args.batch_size, cpu=cpu)['error']:.4f}")
              for u, p in curve]
    out.mkdir(parents=True, exist_ok=True)
    atomic_write_bytes(str(out / "table1_curve.csv"), _csv(CURVE_COLUMNS, points))
    atomic_write_bytes(str(out / "table1_run.csv"), _csv(RUN_COLUMNS, [row]))
    print(f"{args.model} ({args.recipe}, {args.size}) task {args.task} seed {args.seed}: test error "
          f"{score['error']:.2f}% at {row['best_updates']} updates (checkpoint_best.pt), "
          f"{len(points)} curve point(s)")
    print(out / "table1_run.csv")
    print(out / "table1_curve.csv")
    return 0


# -- the study ---------------------------------------------------------------------------------

def read_rows(path: Path, columns: Sequence[str]) -> List[Dict[str, str]]:
    if not path.is_file():
        raise UserError(f"{path}: missing (is the run's evaluation finished? see nesyseq status)")
    with open(path, newline="") as f:
        rows = list(csv.reader(f))
    if not rows or tuple(rows[0]) != tuple(columns):
        raise UserError(f"{path}: expected the columns {','.join(columns)}")
    for lineno, r in enumerate(rows[1:], 2):
        if len(r) != len(columns):
            raise UserError(f"{path}:{lineno}: {len(r)} fields, the header has {len(columns)}")
    return [dict(zip(columns, r)) for r in rows[1:]]


def _number(path, row, key) -> float:
    try:
        return float(row[key])
    except ValueError:
        raise UserError(f"{path}: {key} {row[key]!r} is not a number") from None


def group_label(model: str, recipe: str) -> str:
    return model if recipe == "paper" else f"{model}, {recipe} recipe"


def mean_std(values: Sequence[float]) -> Tuple[float, float]:
    """Mean and population std (0 for one value)."""
    return statistics.fmean(values), statistics.pstdev(values)


def seed_summary(runs: List[Dict]) -> "OrderedDict[Tuple[str, str, str], List[Dict]]":
    """Per (model, recipe, size): one dict per seed, by seed: its tasks, the aggregate error (mean
    over its tasks), the tasks passed (error < 5%) and its mean valid loss ("" when a run has none)."""
    out: "OrderedDict[Tuple[str, str, str], List[Dict]]" = OrderedDict()
    groups: Dict[Tuple[str, str, str], Dict[int, List[Dict]]] = OrderedDict()
    for r in runs:
        groups.setdefault((r["model"], r["recipe"], r["size"]), {}).setdefault(int(r["seed"]), []).append(r)
    for key, by_seed in groups.items():
        rows = []
        for seed in sorted(by_seed):
            rs = by_seed[seed]
            errs = [float(r["error"]) for r in rs]
            losses = [float(r["valid_loss"]) for r in rs if r["valid_loss"] != ""]
            rows.append(dict(seed=seed, tasks=sorted(int(r["task"]) for r in rs), aggregate=statistics.fmean(errs),
                             passed=sum(e < PASS for e in errs),
                             valid_loss=statistics.fmean(losses) if len(losses) == len(rs) else None))
        out[key] = rows
    return out


def best_seeds(seeds: List[Dict]) -> Tuple[Optional[Dict], Optional[Dict]]:
    """(the seed of lowest aggregate test error, the seed of lowest mean valid loss), among the
    seeds that have the group's most tasks; the first seed on a tie; None when nothing qualifies."""
    full = max(len(s["tasks"]) for s in seeds)
    complete = [s for s in seeds if len(s["tasks"]) == full]
    by_test = min(complete, key=lambda s: s["aggregate"])
    with_loss = [s for s in complete if s["valid_loss"] is not None]
    by_valid = min(with_loss, key=lambda s: s["valid_loss"]) if with_loss else None
    return by_test, by_valid


def per_task(runs: List[Dict]) -> "OrderedDict[Tuple[str, str, str, int], Tuple[float, float, int]]":
    """(model, recipe, size, task) -> (mean, std, seeds) of the test error."""
    cells: Dict[Tuple[str, str, str, int], List[float]] = OrderedDict()
    for r in sorted(runs, key=lambda r: (int(r["task"]), int(r["seed"]))):
        cells.setdefault((r["model"], r["recipe"], r["size"], int(r["task"])), []).append(float(r["error"]))
    return OrderedDict((k, (*mean_std(v), len(v))) for k, v in cells.items())


def mean_curve(points: List[Dict]) -> "OrderedDict[Tuple[str, str, str], List[Tuple[int, float, int]]]":
    """Per (model, recipe, size): [(updates, mean error over the runs that have that point, runs)]."""
    acc: Dict[Tuple[str, str, str], Dict[int, List[float]]] = OrderedDict()
    for p in points:
        acc.setdefault((p["model"], p["recipe"], p["size"]), {}).setdefault(int(p["updates"]), []).append(
            float(p["error"]))
    return OrderedDict((k, [(u, statistics.fmean(v), len(v)) for u, v in sorted(d.items())]) for k, d in acc.items())


def _pm(mean: float, std: float) -> str:
    return f"{mean:.1f} ± {std:.1f}"


def report(runs: List[Dict], curve: "OrderedDict") -> str:
    cells = per_task(runs)
    seeds = seed_summary(runs)
    groups = list(seeds)
    md = ["# Table 1: the 20 bAbI tasks, each trained on its own", "",
          "Test error %, mean ± population std over seeds; paper: Salinas and Elsahar, Table 3 (1K, 10 seeds) "
          "and Table 1 (its aggregate only beside a group that has all 20 tasks). A task is passed below 5% "
          "error.", ""]
    md += ["## Aggregate (mean over tasks, per seed; then mean ± std over seeds)", "",
           "| model | size | seeds | tasks | ours | paper | passed per seed | best seed (test) | paper best "
           "| seed of lowest valid loss |", "|---|---|---|---|---|---|---|---|---|---|"]
    for (model, recipe, size) in groups:
        ss = seeds[(model, recipe, size)]
        agg = mean_std([s["aggregate"] for s in ss])
        by_test, by_valid = best_seeds(ss)
        ntasks = sorted({len(s["tasks"]) for s in ss})
        # the paper's aggregate is over the 20 tasks: beside a subset it would compare unlike things
        comparable = recipe == "paper" and ntasks == [len(TASKS)]
        paper = PAPER_TABLE1.get(size, {}).get(model) if comparable else None
        paper_best = PAPER_BEST.get(size, {}).get(model, "–") if comparable else "–"
        valid = (f"{by_valid['seed']}: {by_valid['aggregate']:.2f}, {by_valid['passed']} passed"
                 if by_valid else "(a run has no valid loss)")
        md.append(f"| {group_label(model, recipe)} | {size} | {len(ss)} | {'/'.join(map(str, ntasks))} | {_pm(*agg)} "
                  f"| {_pm(*paper) if paper else '–'} | {' / '.join(str(s['passed']) for s in ss)} "
                  f"| {by_test['seed']}: {by_test['aggregate']:.2f}, {by_test['passed']} passed "
                  f"| {paper_best} | {valid} |")
    md += ["", "## Per task", ""]
    header = "| task | " + " | ".join(f"{group_label(m, r)} ({s})" for m, r, s in groups) + " |"
    md += [header, "|" + "---|" * (len(groups) + 1)]
    tasks = sorted({k[3] for k in cells})
    for t in tasks:
        row = [str(t)]
        for (m, r, s) in groups:
            c = cells.get((m, r, s, t))
            paper = PAPER_TABLE3_1K.get(m, {}).get(t) if (r == "paper" and s == "1k") else None
            text = "" if c is None else _pm(c[0], c[1]) + ("" if c[0] < PASS else " ✗")
            row.append(text + (f" (paper {_pm(*paper)})" if paper and c is not None else ""))
        md.append("| " + " | ".join(row) + " |")
    md += ["", "✗: mean error ≥ 5% (failed).", "", "## Tasks failed (mean error ≥ 5%)", ""]
    for (m, r, s) in groups:
        failed = [f"{t} ({cells[(m, r, s, t)][0]:.1f})" for t in tasks
                  if (m, r, s, t) in cells and cells[(m, r, s, t)][0] >= PASS]
        md.append(f"- {group_label(m, r)} ({s}): {', '.join(failed) or 'none'}")
    md += ["", "## Learning curve (collect.png)", "",
           "Average test error over tasks and seeds at each saved update count:", ""]
    for (m, r, s), pts in curve.items():
        md.append(f"- {group_label(m, r)} ({s}): " + ", ".join(f"{u}: {e:.1f}" for u, e, _ in pts))
    return "\n".join(md) + "\n"


def plot_curve(curve: "OrderedDict", path: Path, title: str) -> None:
    from nesyseq.evaluations.plotting import pyplot, save_png

    plt = pyplot()
    fig, ax = plt.subplots(figsize=(6, 4))
    for (m, r, s), pts in curve.items():
        ax.plot([u for u, _, _ in pts], [e for _, e, _ in pts], marker="o", markersize=3,
                label=f"{group_label(m, r)} ({s})")
    ax.set_xlabel("updates")
    ax.set_ylabel("average test error % (tasks and seeds)")
    ax.set_title(title)
    ax.grid(alpha=0.3)
    if curve:
        ax.legend(fontsize=8)
    fig.tight_layout()
    save_png(fig, path, dpi=120)


def collect_study(run_dir: Path, result_dirs: List[Path]) -> Tuple[Path, Path, Path]:
    """The study's report from the evaluate jobs' ``results`` folders (see the module doc)."""
    runs, points = [], []
    for d in result_dirs:
        for r in read_rows(d / "table1_run.csv", RUN_COLUMNS):
            for k in ("error", "task", "seed"):
                _number(d / "table1_run.csv", r, k)
            runs.append(r)
        points += read_rows(d / "table1_curve.csv", CURVE_COLUMNS)
    if not runs:
        raise UserError(f"{run_dir}: no runs to collect")
    curve = mean_curve(points)
    cells = per_task(runs)
    per_task_rows = [dict(model=m, recipe=r, size=s, task=t, error_mean=f"{mu:.4f}", error_std=f"{sd:.4f}",
                          seeds=n) for (m, r, s, t), (mu, sd, n) in cells.items()]
    seed_rows = [dict(model=m, recipe=r, size=s, seed=x["seed"], tasks=len(x["tasks"]),
                      aggregate_error=f"{x['aggregate']:.4f}", passed=x["passed"],
                      mean_valid_loss="" if x["valid_loss"] is None else f"{x['valid_loss']:.4f}")
                 for (m, r, s), xs in seed_summary(runs).items() for x in xs]
    curve_rows = [dict(model=m, recipe=r, size=s, updates=u, error_mean=f"{e:.4f}", runs=n)
                  for (m, r, s), pts in curve.items() for u, e, n in pts]
    atomic_write_bytes(str(run_dir / "collect.csv"),
                       _csv(("model", "recipe", "size", "task", "error_mean", "error_std", "seeds"), per_task_rows))
    atomic_write_bytes(str(run_dir / "table1_seeds.csv"),
                       _csv(("model", "recipe", "size", "seed", "tasks", "aggregate_error", "passed",
                             "mean_valid_loss"), seed_rows))
    atomic_write_bytes(str(run_dir / "table1_runs.csv"), _csv(RUN_COLUMNS, runs))
    atomic_write_bytes(str(run_dir / "table1_curve.csv"),
                       _csv(("model", "recipe", "size", "updates", "error_mean", "runs"), curve_rows))
    atomic_write_bytes(str(run_dir / "collect.md"), report(runs, curve).encode())
    plot_curve(curve, run_dir / "collect.png", f"{run_dir.name}: average test error vs updates (Fig. 4)")
    return run_dir / "collect.csv", run_dir / "collect.md", run_dir / "collect.png"
