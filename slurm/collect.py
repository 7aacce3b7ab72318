"""``nesyseq collect RUN_DIR``: one table (mean ± std over the array) and one plot.

``collect.md`` shows a count that every member shares (questions, tokens) as that whole number,
one member's value as it is, and otherwise mean ± sample std; its headers name the unit of the
columns that have one (``error (%)``, ``valid_loss (bits)``).  ``collect.csv`` keeps mean and std
for every numeric column.

A run of ``qa_table1`` gets the Table-1 report instead (evaluations/qa_table1.py
``collect_study``: per-task and aggregate error, tasks passed per seed, the best seed, the
learning curve as ``collect.png``).  Otherwise it reads the first ``.csv`` output that the evaluate stage declares (for math:
``results.csv`` with split, module, n, correct, accuracy) from every array
member.  Rows are matched on their text columns; every numeric column becomes
mean ± sample std over the members (std 0 for a single member).  Writes
``RUN_DIR/collect.csv``, ``collect.md`` and ``collect.png``.

``nesyseq evaluate qa``'s ``qa_results.csv`` names its member in ``seed`` and ``ckpt``
(left out: they differ across an array by design) and labels rows with the numbers ``task`` and
``names``, and a diagnostic's fixed ``beta`` (matched on, like text).  Its ``valid_loss``
column (the checkpoint's validation loss) is averaged like any number, and ``collect.md`` also
names, per row, the member whose ``valid_loss`` is lowest (ties listed; no pick where a member has none) with
its metric: the model a user would keep without looking at the test.
"""
from __future__ import annotations

import argparse
import csv
import io
import statistics
from collections import OrderedDict
from pathlib import Path

from nesyseq.common.errors import UserError
from nesyseq.slurm.status import load_jobs


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("run_dir", help="the run folder that `nesyseq launch` printed")
    parser.add_argument("--stage", default="evaluate", help="the stage whose tables are gathered")
    parser.add_argument("--metric", default=None, help="numeric column to plot (default: accuracy, else error, else the last one)")


MEMBER_COLUMNS = ("seed", "ckpt")     # which array member a row came from: dropped
LABEL_COLUMNS = ("task", "names", "beta")   # numbers that label a row: matched on, not averaged
OPTIONAL_NUMBERS = ("valid_loss",)   # numbers that may be empty (a checkpoint saved without one): never a label


UNITS = {"error": "%", "valid_loss": "bits", "loss_base2": "bits"}   # what collect.md's headers name


def with_unit(column: str) -> str:
    return f"{column} ({UNITS[column]})" if column in UNITS else column


def cell_text(values) -> str:
    """One number of collect.md: a count that every member shares (questions, tokens) as that
    whole number, one member's value as it is, else mean ± sample std."""
    if not values:
        return ""
    if all(float(v).is_integer() for v in values) and len(set(values)) == 1:
        return str(int(values[0]))
    if len(values) == 1:
        return f"{values[0]:.4g}"
    return f"{statistics.fmean(values):.4g} ± {statistics.stdev(values):.2g}"


def _is_number(text: str) -> bool:
    try:
        float(text)
        return True
    except ValueError:
        return False


def _result_csv(rec: dict) -> Path:
    cfg_path = Path(rec["folder"]) / "config.yaml"
    from omegaconf import OmegaConf

    outputs = OmegaConf.load(cfg_path).stage.get("outputs") or []
    for out in outputs:
        if str(out).endswith(".csv"):
            return Path(out)
    raise UserError(f"{cfg_path}: the stage declares no .csv output to collect")


def collect(run_dir, stage="evaluate", metric=None):
    from nesyseq.common.atomic import atomic_write_bytes

    run_dir = Path(run_dir).resolve()
    jobs = load_jobs(run_dir)
    recs = [r for r in jobs["jobs"] if r["stage"] == stage]
    if not recs:
        raise UserError(f"{run_dir}/jobs.json: no jobs of stage {stage!r}")
    if jobs.get("experiment") == "qa_table1" and stage == "evaluate":
        from nesyseq.evaluations.qa_table1 import collect_study

        return collect_study(run_dir, [_result_csv(r).parent for r in recs])
    header = None
    members = []
    per_member: "OrderedDict[tuple, list]" = OrderedDict()   # key -> [(member, {numeric column: value})]
    for rec in recs:
        path = _result_csv(rec)
        if not path.is_file():
            raise UserError(f"{path}: missing (is job {rec['job_id']} finished? see nesyseq status {run_dir})")
        with open(path, newline="") as f:
            rows = list(csv.reader(f))
        if not rows:
            raise UserError(f"{path}: empty table")
        if header is None:
            header = rows[0]
        elif rows[0] != header:
            raise UserError(f"{path}: columns {rows[0]} differ from {header}")
        keep = [i for i, h in enumerate(header) if h not in MEMBER_COLUMNS]
        label = ",".join(f"{k}={v}" for k, v in (rec.get("array") or {}).items()) or rec["job_id"]
        members.append(label)
        for lineno, row in enumerate(rows[1:], 2):
            if len(row) != len(header):
                raise UserError(f"{path}:{lineno}: {len(row)} fields, header has {len(header)}")
            is_label = [header[i] in LABEL_COLUMNS or (header[i] not in OPTIONAL_NUMBERS and not _is_number(row[i]))
                        for i in keep]
            for i, lab in zip(keep, is_label):
                if not lab and row[i] and not _is_number(row[i]):
                    raise UserError(f"{path}:{lineno}: {header[i]} {row[i]!r} is not a number")
            key = tuple(row[i] for i, lab in zip(keep, is_label) if lab)
            nums = {header[i]: float(row[i]) for i, lab in zip(keep, is_label) if not lab and row[i]}
            per_member.setdefault(key, []).append((label, nums))
    # key -> {numeric column: the values of the members that have it}
    groups = OrderedDict((key, {c: [v[c] for _, v in recs_ if c in v] for c in {c for _, v in recs_ for c in v}})
                         for key, recs_ in per_member.items())
    num_cols = [h for h in header if any(h in g for g in groups.values())]
    key_cols = [h for h in header if h not in num_cols and h not in MEMBER_COLUMNS and h not in OPTIONAL_NUMBERS]
    metric = metric or next((m for m in ("accuracy", "error") if m in num_cols), num_cols[-1])
    if metric not in num_cols:
        raise UserError(f"--metric {metric}: not a numeric column of {header}")

    def mean_std(vals):
        return statistics.fmean(vals), (statistics.stdev(vals) if len(vals) > 1 else 0.0)

    buf = io.StringIO(newline="")
    w = csv.writer(buf)
    w.writerow(key_cols + [f"{c}_{s}" for c in num_cols for s in ("mean", "std")] + ["members"])
    md = [f"# {run_dir.name}: {stage} over {len(members)} runs ({', '.join(members)})", "",
          "| " + " | ".join(key_cols + [with_unit(c) for c in num_cols]) + " |",
          "|" + "---|" * (len(key_cols) + len(num_cols))]
    for key, cell in groups.items():
        stats = [mean_std(cell[c]) if cell.get(c) else None for c in num_cols]   # None: no member had one
        w.writerow(list(key) + [("" if ms is None else f"{v:.6g}") for ms in stats for v in (ms or (0, 0))]
                   + [len(per_member[key])])
        md.append("| " + " | ".join(list(key) + [cell_text(cell.get(c) or []) for c in num_cols]) + " |")
    if "valid_loss" in num_cols:
        md += ["", f"Member with the lowest valid_loss per row (chosen without the test), its {metric}:", "",
               "| " + " | ".join(key_cols + ["member", "valid_loss", metric]) + " |",
               "|" + "---|" * (len(key_cols) + 3)]
        for key, recs_ in per_member.items():
            if any("valid_loss" not in v for _, v in recs_):   # a member without one: no fair pick
                md.append("| " + " | ".join(list(key) + ["(a member has no valid_loss)", "", ""]) + " |")
                continue
            m, v = min(recs_, key=lambda mv: mv[1]["valid_loss"])
            tied = [o for o, ov in recs_ if o != m and ov["valid_loss"] == v["valid_loss"]]
            md.append("| " + " | ".join(list(key) + [m + (f" (tied with {', '.join(tied)})" if tied else ""),
                                                      f"{v['valid_loss']:.4g}",
                                                      f"{v[metric]:.4g}" if metric in v else ""]) + " |")
    atomic_write_bytes(str(run_dir / "collect.csv"), buf.getvalue().encode())
    atomic_write_bytes(str(run_dir / "collect.md"), ("\n".join(md) + "\n").encode())

    from nesyseq.evaluations.plotting import pyplot, save_png

    plt = pyplot()
    plotted = [k for k in groups if groups[k].get(metric)]
    labels = ["/".join(k) for k in plotted]
    means = [mean_std(groups[k][metric])[0] for k in plotted]
    stds = [mean_std(groups[k][metric])[1] for k in plotted]
    fig, ax = plt.subplots(figsize=(max(4, 0.6 * len(labels) + 2), 4))
    ax.bar(range(len(labels)), means, yerr=stds, capsize=3)
    ax.set_xticks(range(len(labels)))
    ax.set_xticklabels(labels, rotation=60, ha="right", fontsize=7)
    ax.set_ylabel(f"{with_unit(metric)}, mean ± std, n={len(members)}")
    ax.set_title(f"{run_dir.name}: {stage}")
    fig.tight_layout()
    save_png(fig, run_dir / "collect.png", dpi=120)
    return run_dir / "collect.csv", run_dir / "collect.md", run_dir / "collect.png"


def run(args) -> int:
    paths = collect(args.run_dir, args.stage, args.metric)
    print(paths[1].read_text())
    for p in paths:
        print(p)
    return 0
