"""``nesyseq analyze math-study``: the report of ``nesyseq launch math_study``.

Reads the run folder the launcher wrote (``RUN/evaluate/seed=S/arch=A/``: ``best.json``, the
``steps.csv`` of every saved step and each step's ``results.csv``; ``RUN/roles/seed=S/``) and
writes, over the seeds of every model:

    table1.csv / .md     the paper's Table 1 in miniature: mean accuracy over modules and modules
                         above 95%, interpolate and extrapolate, mean ± std over seeds, each run at
                         its checkpoint_best (chosen on the valid split)
    runs.csv             the same per run (model, seed, best step)
    modules.csv          accuracy per module (the paper's Fig. 2), mean ± std over seeds
    modules_<split>.png  Fig. 2: one bar per model per module, the seeds' std as error bars
    steps.csv            mean accuracy vs updates, mean ± std over seeds
    accuracy_vs_updates.png
    paired.csv           TP-T minus each baseline over (module, seed) pairs: mean difference and a
                         bootstrap 95% interval (pairs resampled with replacement)
    roles.csv            per seed: the weighted purity of TP-T's role clusters and its chance level
    results.md           all of the above as markdown

The std is the sample standard deviation (n - 1) over seeds.
"""
from __future__ import annotations

import argparse
import csv
import io
import json
import statistics
from collections import defaultdict
from dataclasses import dataclass
from pathlib import Path
from typing import Dict, List, Optional, Sequence, Tuple

from nesyseq.evaluations.math_compare import SPLITS, format_steps
from nesyseq.evaluations.plotting import pyplot, save_png
from nesyseq.common.atomic import atomic_write_bytes
from nesyseq.common.errors import UserError


@dataclass
class Run:
    model: str
    seed: str
    best_steps: int
    modules: Dict[str, Dict[str, float]]   # split -> module -> accuracy at best_steps
    steps: Dict[int, Dict[str, float]]     # steps -> split -> mean accuracy over modules

    def mean(self, split: str) -> Optional[float]:
        accs = list(self.modules.get(split, {}).values())
        return sum(accs) / len(accs) if accs else None

    def above_95(self, split: str) -> Optional[int]:
        accs = self.modules.get(split)
        return None if not accs else sum(a > 0.95 for a in accs.values())


def _keys(rel: Path) -> Dict[str, str]:
    return dict(part.split("=", 1) for part in rel.parts if "=" in part)


def _read_csv(path: Path) -> List[Dict[str, str]]:
    if not path.is_file():
        raise UserError(f"{path}: missing (written by 'nesyseq evaluate math')")
    with open(path, encoding="utf-8", newline="") as f:
        return list(csv.DictReader(f))


def read_runs(run_dir: Path, model_key: str = "arch", seed_key: str = "seed") -> List[Run]:
    """Every evaluated run of ``RUN/evaluate``; each needs best.json (nesyseq evaluate math with a
    run's folder as --checkpoint)."""
    root = Path(run_dir) / "evaluate"
    found = sorted(root.glob("**/best.json"))
    if not found:
        raise UserError(f"--runs {run_dir}: no evaluate/**/best.json (run the study's evaluate stage first)")
    runs = []
    for best_file in found:
        folder = best_file.parent
        keys = _keys(folder.relative_to(root))
        if model_key not in keys or seed_key not in keys:
            raise UserError(f"{folder}: expected {model_key}=... and {seed_key}=... in its path")
        try:
            best = json.loads(best_file.read_text(encoding="utf-8"))["steps"]
        except (ValueError, KeyError) as exc:
            raise UserError(f"{best_file}: not a best.json ({exc})") from None
        if best is None:
            raise UserError(f"{best_file}: the run has no checkpoint_best.pt")
        steps: Dict[int, Dict[str, float]] = {}
        for row in _read_csv(folder / "steps.csv"):
            steps[int(row["steps"])] = {s: float(row[f"{s}_accuracy"]) for s in SPLITS
                                        if row.get(f"{s}_accuracy") not in (None, "")}
        label = keys[model_key]
        results = folder / f"{label}_{format_steps(int(best))}" / "results.csv"
        modules: Dict[str, Dict[str, float]] = defaultdict(dict)
        for row in _read_csv(results):
            modules[row["split"]][row["module"]] = float(row["accuracy"])
        runs.append(Run(label, keys[seed_key], int(best), dict(modules), steps))
    return runs


def mean_std(values: Sequence[float]) -> Tuple[float, float]:
    vals = list(values)
    return statistics.fmean(vals), (statistics.stdev(vals) if len(vals) > 1 else 0.0)


def bootstrap_mean_ci(diffs: Sequence[float], draws: int = 10000, seed: int = 0,
                      level: float = 0.95) -> Tuple[float, float, float]:
    """Mean of ``diffs`` and the percentile bootstrap interval of the mean (resampling with
    replacement)."""
    import numpy as np

    d = np.asarray(list(diffs), dtype=np.float64)
    if d.size == 0:
        raise ValueError("no pairs")
    rng = np.random.default_rng(seed)
    means = d[rng.integers(0, d.size, size=(draws, d.size))].mean(axis=1)
    lo, hi = np.quantile(means, [(1 - level) / 2, 1 - (1 - level) / 2])
    return float(d.mean()), float(lo), float(hi)


def models_in_order(runs: List[Run], tp_model: Optional[str]) -> Tuple[List[str], str]:
    models = list(dict.fromkeys(sorted(r.model for r in runs)))
    if tp_model is None:
        tps = [m for m in models if m.startswith("tp_")]
        if len(tps) != 1:
            raise UserError(f"--tp-arch: give the TP-Transformer's arch (models: {', '.join(models)})")
        tp_model = tps[0]
    if tp_model not in models:
        raise UserError(f"--tp-arch {tp_model}: no such model among {', '.join(models)}")
    return [tp_model] + [m for m in models if m != tp_model], tp_model


def paired(runs: List[Run], tp_model: str, baseline: str, split: str, draws: int = 10000):
    """TP-T minus ``baseline`` per (module, seed) pair, for the seeds and modules both have."""
    by = {(r.model, r.seed): r for r in runs}
    diffs = []
    for (model, seed), r in sorted(by.items()):
        if model != tp_model or (baseline, seed) not in by:
            continue
        other = by[(baseline, seed)].modules.get(split, {})
        for module, acc in sorted(r.modules.get(split, {}).items()):
            if module in other:
                diffs.append(acc - other[module])
    if not diffs:
        return None
    mean, lo, hi = bootstrap_mean_ci(diffs, draws=draws)
    return dict(comparison=f"{tp_model} - {baseline}", split=split, pairs=len(diffs), mean_difference=mean,
                ci95_low=lo, ci95_high=hi)


def _csv(rows: List[dict], fields: List[str]) -> bytes:
    buf = io.StringIO(newline="")
    w = csv.DictWriter(buf, fieldnames=fields)
    w.writeheader()
    for r in rows:
        w.writerow({k: (f"{v:.4f}" if isinstance(v, float) else v) for k, v in r.items()})
    return buf.getvalue().encode("utf-8")


def _pct(mean: float, std: float) -> str:
    return f"{100 * mean:.2f} ± {100 * std:.2f}"


def build_report(run_dir: Path, out: Path, tp_model: Optional[str] = None, draws: int = 10000) -> Dict[str, Path]:
    runs = read_runs(run_dir)
    models, tp_model = models_in_order(runs, tp_model)
    out.mkdir(parents=True, exist_ok=True)
    paths: Dict[str, Path] = {}

    def write(name: str, data: bytes) -> None:
        atomic_write_bytes(str(out / name), data)
        paths[name] = out / name

    splits = [s for s in SPLITS if any(s in r.modules for r in runs)]
    # Table 1 in miniature
    t1 = []
    for m in models:
        mine = [r for r in runs if r.model == m]
        row = dict(model=m, seeds=" ".join(sorted((r.seed for r in mine), key=str)),
                   best_steps=" ".join(str(r.best_steps) for r in sorted(mine, key=lambda r: r.seed)))
        for s in splits:
            acc = mean_std([r.mean(s) for r in mine])
            a95 = mean_std([float(r.above_95(s)) for r in mine])
            row.update({f"{s}_mean": acc[0], f"{s}_std": acc[1], f"{s}_above95_mean": a95[0],
                        f"{s}_above95_std": a95[1]})
        t1.append(row)
    fields = ["model", "seeds", "best_steps"] + [f"{s}_{k}" for s in splits
                                                 for k in ("mean", "std", "above95_mean", "above95_std")]
    write("table1.csv", _csv(t1, fields))
    write("runs.csv", _csv([dict(model=r.model, seed=r.seed, best_steps=r.best_steps,
                                 **{f"{s}_accuracy": r.mean(s) for s in splits},
                                 **{f"{s}_above95": r.above_95(s) for s in splits})
                            for r in sorted(runs, key=lambda r: (models.index(r.model), r.seed))],
                           ["model", "seed", "best_steps"] + [f"{s}_accuracy" for s in splits]
                           + [f"{s}_above95" for s in splits]))
    # per module (Fig. 2)
    mod_rows = []
    for s in splits:
        names = sorted({mod for r in runs for mod in r.modules.get(s, {})})
        for mod in names:
            for m in models:
                accs = [r.modules[s][mod] for r in runs if r.model == m and mod in r.modules.get(s, {})]
                if accs:
                    mu, sd = mean_std(accs)
                    mod_rows.append(dict(split=s, module=mod, model=m, seeds=len(accs), mean=mu, std=sd))
    write("modules.csv", _csv(mod_rows, ["split", "module", "model", "seeds", "mean", "std"]))
    # accuracy vs updates
    step_rows = []
    for m in models:
        for st in sorted({st for r in runs if r.model == m for st in r.steps}):
            for s in splits:
                accs = [r.steps[st][s] for r in runs if r.model == m and st in r.steps and s in r.steps[st]]
                if accs:
                    mu, sd = mean_std(accs)
                    step_rows.append(dict(model=m, steps=st, split=s, seeds=len(accs), mean=mu, std=sd))
    write("steps.csv", _csv(step_rows, ["model", "steps", "split", "seeds", "mean", "std"]))
    # paired comparison
    pair_rows = [p for b in models[1:] for s in splits
                 if (p := paired(runs, tp_model, b, s, draws=draws)) is not None]
    write("paired.csv", _csv(pair_rows, ["comparison", "split", "pairs", "mean_difference", "ci95_low",
                                         "ci95_high"]))
    # role clusters
    role_rows = []
    for summary in sorted((Path(run_dir) / "roles").glob("**/roles_summary.json")):
        d = json.loads(summary.read_text(encoding="utf-8"))
        keys = _keys(summary.parent.relative_to(Path(run_dir) / "roles"))
        role_rows.append(dict(seed=keys.get("seed", ""), module=d.get("module"), problems=d.get("problems"),
                              k=d.get("k"), head=d.get("head"), weighted_purity=d["weighted_purity"],
                              chance_purity=d["chance_purity"]))
    if role_rows:
        write("roles.csv", _csv(role_rows, ["seed", "module", "problems", "k", "head", "weighted_purity",
                                            "chance_purity"]))
    _charts(runs, models, splits, mod_rows, step_rows, out, paths)
    write("results.md", _markdown(t1, mod_rows, step_rows, pair_rows, role_rows, models, splits).encode("utf-8"))
    return paths


def _markdown(t1, mod_rows, step_rows, pair_rows, role_rows, models, splits) -> str:
    lines = ["# TP-Transformer vs Transformer: the Mathematics Dataset study", "",
             "Accuracy in %, mean ± std over seeds, each run at its checkpoint_best (valid split).", "",
             "| model | seeds | " + " | ".join(f"{s} | >95% ({s})" for s in splits) + " |",
             "|---|---|" + "---:|---:|" * len(splits)]
    for r in t1:
        cells = [r["model"], str(len(r["seeds"].split()))]
        for s in splits:
            cells += [_pct(r[f"{s}_mean"], r[f"{s}_std"]), f"{r[f'{s}_above95_mean']:.1f} ± {r[f'{s}_above95_std']:.1f}"]
        lines.append("| " + " | ".join(cells) + " |")
    lines += ["", "## Paired: TP-T minus baseline over (module, seed) pairs", "",
              "| comparison | split | pairs | mean difference | bootstrap 95% interval |", "|---|---|---:|---:|---|"]
    for p in pair_rows:
        lines.append(f"| {p['comparison']} | {p['split']} | {p['pairs']} | {100 * p['mean_difference']:+.2f} | "
                     f"[{100 * p['ci95_low']:+.2f}, {100 * p['ci95_high']:+.2f}] |")
    for s in splits:
        lines += ["", f"## Per module, {s}", "", "| module | " + " | ".join(models) + " |",
                  "|---|" + "---:|" * len(models)]
        by = {(r["module"], r["model"]): r for r in mod_rows if r["split"] == s}
        for mod in sorted({r["module"] for r in mod_rows if r["split"] == s}):
            cells = [_pct(by[(mod, m)]["mean"], by[(mod, m)]["std"]) if (mod, m) in by else "–" for m in models]
            lines.append(f"| {mod} | " + " | ".join(cells) + " |")
    lines += ["", "## Accuracy vs updates (interpolate)", "", "| updates | " + " | ".join(models) + " |",
              "|---:|" + "---:|" * len(models)]
    by = {(r["steps"], r["model"]): r for r in step_rows if r["split"] == "interpolate"}
    for st in sorted({r["steps"] for r in step_rows}):
        cells = [_pct(by[(st, m)]["mean"], by[(st, m)]["std"]) if (st, m) in by else "–" for m in models]
        lines.append(f"| {st} | " + " | ".join(cells) + " |")
    if role_rows:
        lines += ["", "## TP-T role clusters", "", "| seed | module | problems | k | head | weighted purity | chance |",
                  "|---|---|---:|---:|---:|---:|---:|"]
        for r in role_rows:
            lines.append(f"| {r['seed']} | {r['module']} | {r['problems']} | {r['k']} | {r['head']} | "
                         f"{r['weighted_purity']:.3f} | {r['chance_purity']:.3f} |")
    return "\n".join(lines) + "\n"


def _charts(runs, models, splits, mod_rows, step_rows, out: Path, paths: Dict[str, Path]) -> None:
    plt = pyplot()
    colors = ["#c0392b", "#2c7fb8", "#7fcdbb", "#999999"]
    for s in splits:
        rows = [r for r in mod_rows if r["split"] == s]
        names = sorted({r["module"] for r in rows})
        if not names:
            continue
        by = {(r["module"], r["model"]): r for r in rows}
        fig, ax = plt.subplots(figsize=(max(6.0, 0.9 * len(names) + 2), 4.8))
        width = 0.8 / len(models)
        for i, m in enumerate(models):
            xs = [j + (i - (len(models) - 1) / 2) * width for j in range(len(names))]
            ys = [100 * by[(n, m)]["mean"] if (n, m) in by else 0 for n in names]
            es = [100 * by[(n, m)]["std"] if (n, m) in by else 0 for n in names]
            ax.bar(xs, ys, width, yerr=es, capsize=2, label=m, color=colors[i % len(colors)])
        ax.set_xticks(range(len(names)))
        ax.set_xticklabels(names, rotation=60, ha="right", fontsize=7)
        ax.set_ylim(0, 100)
        ax.set_ylabel("exact-match accuracy (%)")
        ax.axhline(95, color="grey", lw=0.8, ls="--")
        ax.legend(fontsize=7)
        ax.set_title(f"{s}: accuracy per module, mean ± std over seeds", fontsize=9)
        fig.tight_layout()
        name = f"modules_{s}.png"
        save_png(fig, out / name, dpi=110)
        paths[name] = out / name
    fig, axes = plt.subplots(1, len(splits), figsize=(5 * len(splits), 4), squeeze=False)
    for ax, s in zip(axes[0], splits):
        for i, m in enumerate(models):
            rows = sorted((r for r in step_rows if r["model"] == m and r["split"] == s), key=lambda r: r["steps"])
            xs = [r["steps"] for r in rows]
            ys = [100 * r["mean"] for r in rows]
            sd = [100 * r["std"] for r in rows]
            ax.plot(xs, ys, marker="o", label=m, color=colors[i % len(colors)])
            ax.fill_between(xs, [y - e for y, e in zip(ys, sd)], [y + e for y, e in zip(ys, sd)],
                            color=colors[i % len(colors)], alpha=0.2)
        ax.set_xlabel("updates")
        ax.set_ylabel("mean accuracy over modules (%)")
        ax.set_title(s, fontsize=9)
        ax.legend(fontsize=7)
    fig.tight_layout()
    save_png(fig, out / "accuracy_vs_updates.png", dpi=110)
    paths["accuracy_vs_updates.png"] = out / "accuracy_vs_updates.png"


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--runs", required=True, metavar="RUN_DIR",
                        help="the run folder of 'nesyseq launch math_study' (its evaluate/ and roles/)")
    parser.add_argument("--out", default=None, metavar="DIR", help="report folder (default: RUN_DIR/report)")
    parser.add_argument("--tp-arch", default=None,
                        help="the TP-Transformer's arch, compared with every other (default: the one "
                             "named tp_*)")
    parser.add_argument("--bootstrap", type=int, default=10000, help="bootstrap resamples (default 10000)")


def run(args) -> int:
    run_dir = Path(args.runs).resolve()
    out = Path(args.out).resolve() if args.out else run_dir / "report"
    paths = build_report(run_dir, out, args.tp_arch, draws=args.bootstrap)
    print(paths["results.md"].read_text(encoding="utf-8"))
    for name, p in paths.items():
        print(f"{name:>26}: {p}")
    return 0
