"""``nesyseq evaluate math``: exact-match accuracy per Mathematics Dataset module.

Decoding is the stock ``fairseq-generate`` (greedy unless ``--beam`` > 1) on
the ``test`` (interpolate) and ``test1`` (extrapolate) subsets that
``nesyseq prepare math`` binarizes.  An answer counts only if every character
matches (the paper's metric).  Reported, as in the paper's Table 1:

    per module    n, correct, accuracy                        (results.csv, results.md)
    per split     mean accuracy over modules, modules > 95%   (summary.json, results.md)
    per module    bar chart like the paper's Fig. 2           (accuracy_<split>.png)

Checkpoint selection never looks at these sets: fairseq-train selects on the
``valid`` split that ``prepare math`` holds out of train.
"""
import argparse
import csv
import io
import json
from collections import OrderedDict
from dataclasses import dataclass, field
from pathlib import Path
from typing import Dict, List, Optional

from nesyseq.data_prep.math_preprocess import decode_chars
from nesyseq.evaluations.math_compare import (Entry, checkpoint_steps, format_steps, interval_checkpoints,
                                               write_comparison)
from nesyseq.evaluations.plotting import pyplot, save_png
from nesyseq.common.atomic import atomic_write_bytes
from nesyseq.common.errors import UserError
from nesyseq.common.fairseq_cli import USER_DIR, fairseq_generate
from nesyseq.common.generate_output import read_generate_output

SUBSETS = OrderedDict([("test", "interpolate"), ("test1", "extrapolate")])
# fairseq-generate prints T-lines with escape_unk=True: an unknown target symbol is "<<unk>>"
UNK_TOKENS = frozenset(["<<unk>>", "<unk>"])


@dataclass
class ModuleScore:
    module: str
    n: int = 0
    correct: int = 0
    unk_targets: int = 0  # references that contain <unk> can never be matched

    @property
    def accuracy(self) -> float:
        return self.correct / self.n if self.n else 0.0


@dataclass
class SplitScore:
    split: str
    modules: Dict[str, ModuleScore] = field(default_factory=dict)

    @property
    def mean_accuracy(self) -> float:
        accs = [m.accuracy for m in self.modules.values()]
        return sum(accs) / len(accs) if accs else 0.0

    @property
    def above_95(self) -> int:
        return sum(m.accuracy > 0.95 for m in self.modules.values())

    @property
    def n(self) -> int:
        return sum(m.n for m in self.modules.values())


def read_modules(path: Path) -> List[str]:
    if not path.exists():
        raise UserError(f"{path}: missing; it maps every test example to its module "
                        "(written by 'nesyseq prepare math')")
    with open(path, encoding="utf-8") as f:
        modules = [line.strip() for line in f]
    for i, m in enumerate(modules, 1):
        if not m:
            raise UserError(f"{path}:{i}: empty module name")
    return modules


def score(generate_file: Path, modules_file: Path, split: str) -> SplitScore:
    """Exact match per module, checking that every example was decoded once."""
    records = read_generate_output(generate_file)
    modules = read_modules(modules_file)
    missing = [i for i in range(len(modules)) if "H" not in records.get(i, {})]
    extra = [i for i in records if i >= len(modules)]
    if missing or extra:
        raise UserError(
            f"{generate_file}: {len(records)} decoded examples for {len(modules)} lines of "
            f"{modules_file} (missing ids {missing[:5]}, unknown ids {extra[:5]}); "
            "the hypotheses do not cover the test set")
    result = SplitScore(split)
    for i, module in enumerate(modules):
        rec = records[i]
        if "T" not in rec:
            raise UserError(f"{generate_file}: no T-{i} line (reference) for example id {i}; "
                            "decode a subset with targets (fairseq-generate prints T-lines then)")
        ms = result.modules.setdefault(module, ModuleScore(module))
        ms.n += 1
        if UNK_TOKENS.intersection(rec["T"].split(" ")):
            ms.unk_targets += 1
        elif decode_chars(rec["H"]) == decode_chars(rec["T"]):
            ms.correct += 1
    result.modules = dict(sorted(result.modules.items()))
    return result


def decode_on_cpu(cpu: Optional[bool]) -> bool:
    """``--cpu`` for fairseq-generate: as asked, else whenever torch sees no CUDA device."""
    if cpu is not None:
        return cpu
    import torch
    return not torch.cuda.is_available()


def run_generate(checkpoint: Path, data: Path, subset: str, out_dir: Path, beam: int,
                 batch_size: int, cpu: bool, extra_args: Optional[List[str]] = None) -> Path:
    """Decode ``subset`` with the stock fairseq-generate; returns generate-<subset>.txt."""
    args = [
        data, "--user-dir", USER_DIR, "--task", "translation", "-s", "src", "-t", "tgt",
        "--path", checkpoint, "--gen-subset", subset,
        "--beam", beam, "--nbest", "1", "--batch-size", batch_size,
        # fairseq drops the remainder batch when batch sizes must be multiples of 8
        "--required-batch-size-multiple", "1",
        "--max-len-a", "0", "--max-len-b", "64",
        "--results-path", out_dir,
    ] + list(extra_args or [])
    return fairseq_generate(args, out_dir, subset, cpu, what=f"subset {subset}")


def write_reports(scores: List[SplitScore], out_dir: Path, title: str = "") -> Dict[str, Path]:
    """results.csv, results.md, summary.json and one bar chart per split."""
    out_dir.mkdir(parents=True, exist_ok=True)
    paths = {}

    rows = [(s.split, m.module, m.n, m.correct, m.accuracy, m.unk_targets)
            for s in scores for m in s.modules.values()]
    buf = io.StringIO(newline="")
    w = csv.writer(buf)
    w.writerow(["split", "module", "n", "correct", "accuracy", "unk_targets"])
    for split, module, n, correct, acc, unk in rows:
        w.writerow([split, module, n, correct, f"{acc:.4f}", unk])
    _atomic_write(out_dir / "results.csv", buf.getvalue())
    paths["csv"] = out_dir / "results.csv"

    summary = {s.split: {"modules": len(s.modules), "examples": s.n,
                         "mean_accuracy": s.mean_accuracy, "modules_above_95": s.above_95,
                         "unk_targets": sum(m.unk_targets for m in s.modules.values())}
               for s in scores}
    _atomic_write(out_dir / "summary.json", json.dumps(summary, indent=2) + "\n")
    paths["summary"] = out_dir / "summary.json"

    _atomic_write(out_dir / "results.md", markdown_table(scores, title))
    paths["markdown"] = out_dir / "results.md"

    for s in scores:
        if s.modules:
            png = out_dir / f"accuracy_{s.split}.png"
            bar_chart(s, png, title)
            paths[f"png_{s.split}"] = png
    return paths


def markdown_table(scores: List[SplitScore], title: str = "") -> str:
    lines = []
    if title:
        lines += [f"# {title}", ""]
    lines += ["| split | modules | examples | mean accuracy | modules > 95% |",
              "|---|---:|---:|---:|---:|"]
    for s in scores:
        lines.append(f"| {s.split} | {len(s.modules)} | {s.n} | {100 * s.mean_accuracy:.2f}% | "
                     f"{s.above_95} |")
    lines += ["", "| split | module | n | correct | accuracy |", "|---|---|---:|---:|---:|"]
    for s in scores:
        for m in s.modules.values():
            lines.append(f"| {s.split} | {m.module} | {m.n} | {m.correct} | {100 * m.accuracy:.2f}% |")
    return "\n".join(lines) + "\n"


def bar_chart(s: SplitScore, path: Path, title: str = "") -> None:
    plt = pyplot()
    names = list(s.modules)
    accs = [100 * s.modules[n].accuracy for n in names]
    fig, ax = plt.subplots(figsize=(max(6.0, 0.45 * len(names) + 1.5), 4.8))
    ax.bar(range(len(names)), accs, color="#3b75af")
    ax.set_xticks(range(len(names)))
    ax.set_xticklabels(names, rotation=75, ha="right", fontsize=7)
    ax.set_ylim(0, 100)
    ax.set_ylabel("exact-match accuracy (%)")
    ax.axhline(95, color="grey", lw=0.8, ls="--")
    ax.set_title(f"{title} {s.split}".strip() + f"\nmean {100 * s.mean_accuracy:.1f}% over "
                 f"{len(names)} modules, {s.above_95} above 95%", fontsize=9)
    fig.tight_layout()
    save_png(fig, path, dpi=110)


def _atomic_write(path: Path, text: str) -> None:
    atomic_write_bytes(str(path), text.encode("utf-8"))


def evaluate_math(checkpoint, data, out_dir=None, beam: int = 1, batch_size: int = 128,
                  cpu: Optional[bool] = None, subsets=("test", "test1"), title: str = ""):
    """Decode and score; returns (list of SplitScore, dict of report paths)."""
    checkpoint, data = Path(checkpoint).resolve(), Path(data).resolve()
    from nesyseq.common.cli_args import check_checkpoint_file
    from nesyseq.evaluations import checkpoints

    check_checkpoint_file(checkpoint)
    if not (data / "dict.src.txt").is_file():
        raise UserError(f"--data {data}: not a binarized directory (no dict.src.txt); "
                        "pass the bin/ folder written by 'nesyseq prepare math'")
    # a math checkpoint (translation, src-tgt) whose dictionaries are data's, before anything is decoded
    checkpoints.checked(checkpoint, data, ("translation",), "evaluate math", pair=("src", "tgt"), mmap=True)
    out_dir = Path(out_dir).resolve() if out_dir else checkpoint.parent / f"eval_{checkpoint.stem}"
    out_dir.mkdir(parents=True, exist_ok=True)
    cpu = decode_on_cpu(cpu)
    scores = []
    for subset in subsets:
        if subset not in SUBSETS:
            raise UserError(f"--subset: unknown subset {subset!r}; valid: {', '.join(SUBSETS)}")
        if not (data / f"{subset}.src-tgt.src.idx").is_file():
            if subset == "test":
                raise UserError(f"{data}/{subset}.src-tgt.src.idx: missing interpolate test set")
            continue  # no extrapolate modules were selected
        gen = run_generate(checkpoint, data, subset, out_dir, beam, batch_size, cpu)
        scores.append(score(gen, data / f"{subset}.modules", SUBSETS[subset]))
    paths = write_reports(scores, out_dir, title)
    return scores, paths


def add_arguments(parser: argparse.ArgumentParser) -> None:
    from nesyseq.common import cli_args

    cli_args.add_checkpoint(parser, "fairseq checkpoint(s) (.pt) to decode with; several (steps of one run "
                                    "or several runs) also give steps.md/.csv (Table 1 columns), "
                                    "accuracy_vs_steps.png and modules_<split>.png (Fig. 2); a training "
                                    "run's --save-dir: every checkpoint_<epoch>_<updates>.pt in it, and "
                                    "best.json naming the step checkpoint_best.pt is")
    cli_args.add_data(parser, "binarized data directory (DIR/bin from 'nesyseq prepare math')")
    cli_args.add_out(parser, "eval_<checkpoint name>/ beside the checkpoint; eval_math/ beside the first "
                             "of several")
    cli_args.add_subset(parser, "test,test1", "comma-separated: test (interpolate), test1 (extrapolate)",
                        aliases=["--subsets"])
    cli_args.add_cpu(parser)
    parser.add_argument("--labels", default=None,
                        help="comma-separated run name per checkpoint, or one name for all (default: "
                             "the checkpoint's directory name, e.g. tp / base)")
    parser.add_argument("--beam", type=int, default=1, help="beam size; 1 is greedy decoding (the paper)")
    parser.add_argument("--batch-size", type=int, default=128, help="sentences per decoding batch")
    parser.add_argument("--title", default="", help="title for the table and the charts")


def saved_steps(save_dir: Path) -> List[Path]:
    """A training run's folder -> its step checkpoints ``checkpoint_<epoch>_<updates>.pt`` in
    update order (fairseq's --save-interval-updates with --keep-interval-updates -1)."""
    steps = interval_checkpoints(save_dir)
    if not steps:
        raise UserError(f"--checkpoint {save_dir}: a folder without step checkpoints "
                        "(checkpoint_<epoch>_<updates>.pt; train with --save-interval-updates N "
                        "--keep-interval-updates -1)")
    return [Path(p) for _, p in steps]


def run(args) -> int:
    if args.beam < 1:
        raise UserError(f"--beam {args.beam}: must be >= 1")
    checkpoints = [args.checkpoint] if isinstance(args.checkpoint, str) else list(args.checkpoint)
    kw = dict(beam=args.beam, batch_size=args.batch_size, cpu=True if args.cpu else None,
              subsets=[s for s in args.subset.split(",") if s], title=args.title)
    if len(checkpoints) > 1 and not args.out:
        args.out = str(Path(checkpoints[0]).resolve().parent / "eval_math")
    if len(checkpoints) == 1 and Path(checkpoints[0]).is_dir():
        return _run_folder(Path(checkpoints[0]), args, kw)
    if len(checkpoints) > 1:
        return _run_several(checkpoints, args, kw)
    scores, paths = evaluate_math(checkpoints[0], args.data, args.out, **kw)
    print(paths["markdown"].read_text())
    for key, p in paths.items():
        print(f"{key:>16}: {p}")
    return 0


def _run_folder(save_dir: Path, args, kw) -> int:
    """A training run's folder: every saved step (checkpoint_best.pt too when it is none of them),
    the comparison over steps, and best.json naming the step that checkpoint_best.pt is (chosen
    by fairseq on the valid split)."""
    steps = saved_steps(save_dir)
    best_path = save_dir / "checkpoint_best.pt"
    best = checkpoint_steps(best_path) if best_path.is_file() else None
    if best is not None and best not in [checkpoint_steps(p) for p in steps]:
        steps.append(best_path)
    if not args.out:
        args.out = str(save_dir.resolve() / "eval_math")
    code = _run_several([str(p) for p in steps], args, kw)
    atomic_write_bytes(str(Path(args.out).resolve() / "best.json"),
                       (json.dumps({"checkpoint": str(best_path.resolve()) if best is not None else None,
                                    "steps": best}, indent=1) + "\n").encode("utf-8"))
    return code


def _run_several(checkpoints, args, kw) -> int:
    """One evaluation per checkpoint (OUT/<run>_<steps>/), then the comparison in OUT."""
    labels = [x for x in args.labels.split(",")] if args.labels else None
    if labels is not None and len(labels) == 1:   # one run's steps
        labels = labels * len(checkpoints)
    if labels is not None and len(labels) != len(checkpoints):
        raise UserError(f"--labels: {len(labels)} names for {len(checkpoints)} checkpoints")
    out = Path(args.out).resolve()
    entries = []
    for i, ckpt in enumerate(checkpoints):
        ckpt = Path(ckpt)
        if not ckpt.is_file():
            raise UserError(f"--checkpoint {ckpt}: no such file")
        run_name = labels[i] if labels else ckpt.resolve().parent.name
        steps = checkpoint_steps(ckpt)
        sub = out / f"{run_name}_{format_steps(steps)}"
        scores, _ = evaluate_math(ckpt, args.data, sub, **kw)
        entries.append(Entry(run_name, steps, {s.split: s for s in scores}))
    paths = write_comparison(entries, out, args.title)
    print(paths["steps_md"].read_text())
    for key, p in paths.items():
        print(f"{key:>20}: {p}")
    return 0
