"""``nesyseq evaluate qa``: answer error of babi_qa checkpoints -> markdown table, CSV, PNGs.

    nesyseq evaluate qa --checkpoint ck/smn1_s0/checkpoint_best.pt ck/smn1_s1/checkpoint_best.pt \
        --seed 0 1 --data data/n100/bin/task1 --model smn --names 100 --out reports/qa

Each ``--checkpoint`` is one trained model and one row of the report, labelled ``--model`` (the
name the table shows), ``--seed`` (one for all checkpoints, or one each), the task (``--task``,
default the ``task`` of ``DATA/qa_meta.json``, as ``nesyseq prepare qa`` writes it) and, for the
Fig. 1 sweep, ``--names``.  ``--data`` is the ``bin/task{N}`` folder it is scored on (one for all,
or one per checkpoint), ``--subset`` the split (default test).  ``--zero-shot`` scores ``test`` and
every zero-shot subset of the data folder instead (``test_rooms`` / ``test_objects`` /
``test_people``, from ``prepare qa --zero-shot``), labelled original / rooms / objects / people
for the zero-shot table.  ``--beta B`` is a diagnostic: the symbolic output mixture weight β of
eq. 4 fixed to B, e.g. 0 for the symbolic part alone; give such rows their own ``--model`` name,
they are not the trained model.  ``--append`` adds the rows to the report already in ``--out``
(a row of the same model, task, seed, names, split, subset and β is replaced), so several calls
build one report, e.g. one per data folder of a names sweep.

The answer is the argmax of the model's distribution at target step 0 (the answer token);
error = % of questions answered wrongly.  Seeds are aggregated as mean ± std (population std
over the seeds given).  A task is passed when its mean error < 5% (bAbI convention).
Each row also carries the checkpoint's validation loss (``valid_loss``: fairseq's
``extra_state["val_loss"]``, bits per target token on the held-out valid split, rounded to 3
decimals by fairseq's logging), and where a model and task (plain rows: no split, names or β)
have two or more seeds that all have one, the table adds the seed a user would keep without
looking at the test: the lowest validation loss, ties listed (ours; the paper reports the mean
over seeds only).  A checkpoint that ``nesyseq choose-arm`` chose (the link it writes, with
``arm_choice.json`` beside it; evaluations/arm_choice.py) is scored as every arm it chose from:
each arm gets a row of its own, model ``MODEL_ARM``, and the row ``MODEL`` is the chosen arm's,
with each arm's validation loss in the table.

Writes ``qa_results.csv`` (one row per checkpoint and subset), ``qa_table.md`` (per model: error
per task, mean error, tasks passed; a zero-shot table when there are zero-shot rows; the names
sweep when ``--names`` labels are given), ``qa_errors.png`` and, with names, ``qa_names_curve.png``.
Results on generated data are labelled bAbI-style.

``--checkpoint CKPT --babi-file FILE`` instead evaluates one checkpoint on bAbI-format files it
never saw, words outside its dictionary included (``evaluations/qa_external.py``).
"""
from __future__ import annotations

import argparse
import csv
import io
import statistics
from pathlib import Path
from typing import Dict, List

from nesyseq.evaluations.seed_stats import aggregate
from nesyseq.common.atomic import atomic_write_bytes
from nesyseq.common.errors import UserError

KEY = ("model", "task", "seed", "names", "split", "subset", "beta")   # what tells two rows apart
SPLIT_OF_TEST = "original"   # the zero-shot table's name for the plain test subset


def add_arguments(parser: argparse.ArgumentParser) -> None:
    from nesyseq.common import cli_args

    cli_args.add_checkpoint(parser, "babi_qa checkpoint(s): one row each (e.g. one per seed)")
    parser.add_argument("--data", nargs="+", metavar="DIR",
                        help="the bin/task{N} folder the checkpoints are scored on: one for all, or one per "
                             "checkpoint; with --babi-file, the folder with the training dict.src.txt "
                             "(default: the checkpoint's training data folder)")
    cli_args.add_out(parser, "qa_eval/ beside the first checkpoint")
    cli_args.add_subset(parser, "test", "the split scored")
    cli_args.add_cpu(parser)
    parser.add_argument("--zero-shot", action="store_true",
                        help="score test and every test_* subset of the data folder (prepare qa --zero-shot), "
                             "for the zero-shot table")
    parser.add_argument("--model", metavar="NAME", help="the model's name in the report (required to score)")
    parser.add_argument("--seed", nargs="+", metavar="S", help="the training seed: one for all, or one per checkpoint")
    parser.add_argument("--task", metavar="N", help="the bAbI task (default: the data folder's qa_meta.json)")
    parser.add_argument("--names", metavar="N", help="the number of names the data was generated with (Fig. 1 sweep)")
    parser.add_argument("--beta", metavar="B", help="diagnostic: fix the symbolic output mixture weight β to B")
    parser.add_argument("--append", action="store_true",
                        help="add the rows to the report already in --out (a row with the same labels is replaced)")
    parser.add_argument("--label", default="bAbI-style", help="data label used in titles (bAbI / bAbI-style)")
    parser.add_argument("--batch-size", type=int, default=256, help="questions per forward pass")
    ext = parser.add_argument_group("a trained checkpoint on bAbI-format files it never saw "
                                    "(evaluations/qa_external.py; no prepare qa, no retraining)")
    ext.add_argument("--babi-file", action="append", metavar="FILE", help="bAbI-format file (repeatable)")
    ext.add_argument("--memory-size", type=int, help="story sentences kept (default: the training data's)")


def one_each(values: List[str], n: int, flag: str) -> List[str]:
    """``values`` for ``n`` checkpoints: one value for all of them, or one each."""
    if len(values) == 1:
        return values * n
    if len(values) != n:
        raise UserError(f"{flag}: {len(values)} values for {n} checkpoints (give one for all, or one each)")
    return list(values)


def data_meta(data: str) -> dict:
    """``DATA/qa_meta.json`` (``nesyseq prepare qa`` writes it), {} when there is none."""
    import json

    path = Path(data) / "qa_meta.json"
    if not path.is_file():
        return {}
    try:
        return json.loads(path.read_text(encoding="utf-8"))
    except ValueError as exc:
        raise UserError(f"{path}: not JSON ({exc})") from None


def task_of(data: str, given) -> str:
    if given:
        return str(given)
    task = data_meta(data).get("task")
    if task is None:
        raise UserError(f"--data {data}: no qa_meta.json with the task; give --task N")
    return str(task)


def subsets_of(data: str, args) -> List[tuple]:
    """[(subset, split label)] a checkpoint is scored on."""
    if not args.zero_shot:
        return [(args.subset or "test", "")]
    zero_shot = sorted(n for n in data_meta(data).get("examples", {}) if n.startswith("test_"))
    if not zero_shot:
        raise UserError(f"--zero-shot: {data} has no test_* subsets (prepare qa --zero-shot writes them)")
    return [("test", SPLIT_OF_TEST)] + [(n, n[len("test_"):]) for n in zero_shot]


def _fix_beta(model, beta: str, ckpt: str) -> None:
    """Set every ``beta_logit`` (the eq. 4 mixture p = β p_sem + (1 − β) p_sym) to logit(β)."""
    import math

    import torch

    try:
        b = float(beta)
    except ValueError:
        b = -1.0
    if not 0.0 <= b <= 1.0:
        raise UserError(f"--beta {beta}: expected a number in [0, 1]")
    params = [p for n, p in model.named_parameters() if n.split(".")[-1] == "beta_logit"]
    if not params:
        raise UserError(f"--beta {beta}: {ckpt} has no symbolic output mixture (no beta_logit parameter)")
    logit = 30.0 if b >= 1 - 1e-13 else -30.0 if b <= 1e-13 else math.log(b / (1 - b))
    with torch.no_grad():
        for p in params:
            p.fill_(logit)


def valid_loss(state: dict) -> str:
    """The validation loss fairseq stored in a loaded checkpoint (``extra_state["val_loss"]``), or
    "" for one saved without it (e.g. a ``convert warm-start`` file)."""
    v = (state.get("extra_state") or {}).get("val_loss")
    return "" if v is None else repr(float(v))


def select_by_valid(rows: List[Dict[str, str]]) -> List[Dict[str, str]]:
    """Per (model, task, subset) of the plain rows (no ``split`` / ``names`` / ``beta``), with two
    or more distinct seeds that all have a valid loss: the row of the seed whose valid loss is
    lowest (the first such row in ``rows`` on a tie), plus ``seeds`` (how many distinct seeds were
    compared) and ``tied`` (the other seeds with that same loss, comma-separated; fairseq stores
    the loss rounded to 3 decimals, so ties happen)."""
    groups: Dict[tuple, List[Dict[str, str]]] = {}
    for r in rows:
        if not (r.get("split") or r.get("names") or r.get("beta")):
            groups.setdefault((r["model"], r["task"], r.get("subset", "test")), []).append(r)
    picked = []
    for key in sorted(groups, key=lambda k: (k[0], _task_key(k[1]), k[2])):
        g = groups[key]
        seeds = {r["seed"] for r in g}
        if len(seeds) < 2 or any(not r.get("valid_loss") for r in g):
            continue
        best = min(g, key=lambda r: float(r["valid_loss"]))
        tied = sorted({r["seed"] for r in g if float(r["valid_loss"]) == float(best["valid_loss"])} - {best["seed"]})
        picked.append(dict(best, seeds=str(len(seeds)), tied=",".join(tied)))
    return picked


def load_state(ckpt: str, data: str) -> dict:
    """``ckpt`` read once (evaluations/checkpoints.py: safe load, one-line errors) and checked to be a
    babi_qa checkpoint."""
    from nesyseq.evaluations import checkpoints

    if not Path(data).is_dir():
        raise UserError(f"--data {data}: no such directory")
    state = checkpoints.read(ckpt)
    checkpoints.require_task(state, ckpt, ("babi_qa",), "evaluate qa")
    return state


def answers(ckpt: str, data: str, subset: str = "test", batch_size: int = 256, beta: str = None,
            state: dict = None, cpu: bool = True):
    """Yield ``(task, sample, pred, gold)`` batch by batch: ``ckpt``'s argmax answer (B,) and the
    gold answer (B,) on ``data``/``subset``; ``beta`` as in :func:`answer_error`; ``state``: the
    checkpoint already read by :func:`load_state` (read here otherwise).  The checkpoint's
    dictionaries are checked against ``data``'s before anything is scored."""
    import torch

    from nesyseq.evaluations import checkpoints

    if state is None:
        state = load_state(ckpt, data)
    model, cfg, task, _ = checkpoints.load_model(ckpt, data, ("babi_qa",), "evaluate qa",
                                                 state=state)
    if beta is not None:
        _fix_beta(model, beta, ckpt)
    if not cpu:
        model = model.cuda()
    task.load_dataset(subset)
    ds = task.dataset(subset)
    with torch.no_grad():
        for start in range(0, len(ds), batch_size):
            sample = ds.collater([ds[i] for i in range(start, min(len(ds), start + batch_size))])
            if not cpu:
                from fairseq import utils

                sample = utils.move_to_cuda(sample)
            out = model(**sample["net_input"])
            pred = model.get_normalized_probs(out, log_probs=True)[:, 0].argmax(-1)
            yield task, sample, pred, sample["target"][:, 0]


def answer_error(ckpt: str, data: str, subset: str = "test", batch_size: int = 256,
                 beta: str = None, cpu: bool = True) -> Dict[str, object]:
    """% wrong answers of ``ckpt`` on ``data``/``subset`` (teacher-forced argmax at the answer step:
    fairseq-generate ``--beam 1`` except where that argmax is EOS, which generate forbids at the
    first step and which counts as wrong here; docs/qa.md, "10,000 names, 64 buckets"), the number
    of questions, and the checkpoint's stored validation loss (:func:`valid_loss`); ``beta``:
    evaluate with the output mixture weight fixed (a diagnostic, see the module doc)."""
    state = load_state(ckpt, data)
    loss = valid_loss(state)
    wrong = total = 0
    for _, _, pred, gold in answers(ckpt, data, subset, batch_size, beta, state=state, cpu=cpu):
        wrong += int(pred.ne(gold).sum())
        total += gold.numel()
    if total == 0:
        raise UserError(f"{data}: subset {subset} is empty")
    return {"error": 100.0 * wrong / total, "questions": total, "valid_loss": loss}


def _task_key(t: str):
    return (0, int(t)) if t.isdigit() else (1, t)


SPLIT_ORDER = ("original", "rooms", "objects", "people")   # the paper's Table 2 columns


def _split_key(split: str):
    return (SPLIT_ORDER.index(split), "") if split in SPLIT_ORDER else (len(SPLIT_ORDER), split)


def markdown(rows: List[Dict[str, str]], label: str) -> str:
    lines = []
    plain = [r for r in rows if not r.get("split") and not r.get("names")]
    for title, subset in ((f"Error (%) per task, {label}", plain),):
        if not subset:
            continue
        agg = aggregate(subset, ("model", "task"))
        models = sorted({k[0] for k in agg})
        tasks = sorted({k[1] for k in agg}, key=_task_key)
        lines += [f"### {title} (mean ± std over seeds)", "",
                  "| model | " + " | ".join(f"task {t}" for t in tasks) + " | mean | passed (<5%) |",
                  "|---" * (len(tasks) + 3) + "|"]
        for m in models:
            cells, means = [], []
            for t in tasks:
                a = agg.get((m, t))
                cells.append("" if a is None else f"{a['mean']:.1f} ± {a['std']:.1f} (n={a['n']})")
                if a is not None:
                    means.append(a["mean"])
            passed = sum(1 for x in means if x < 5.0)
            lines.append(f"| {m} | " + " | ".join(cells) + f" | {statistics.fmean(means):.1f} | {passed}/{len(means)} |")
        lines.append("")
    picked = select_by_valid(rows)
    if picked:
        lines += [f"### The seed with the lowest validation loss, {label} (chosen without the test)", "",
                  "| model | task | subset | seed | valid loss (bits) | error (%) | seeds compared | tied with |",
                  "|---" * 8 + "|"]
        lines += [f"| {r['model']} | {r['task']} | {r.get('subset', 'test')} | {r['seed']} | {float(r['valid_loss']):.3f} "
                  f"| {float(r['error']):.2f} | {r['seeds']} | {r['tied']} |" for r in picked]
        lines.append("")
    chosen = [r for r in rows if r.get("chosen_arm")]
    if chosen:
        lines += [f"### The arm with the lowest validation loss, {label} (chosen without the test)", "",
                  "| model | task | subset | seed | chosen | valid loss per arm (bits) | error (%) |", "|---" * 7 + "|"]
        lines += [f"| {r['model']} | {r['task']} | {r.get('subset', 'test')} | {r['seed']} | {r['chosen_arm']} "
                  f"| {r['arm_losses']} | {float(r['error']):.2f} |" for r in chosen]
        lines.append("")
    zs = [r for r in rows if r.get("split")]
    if zs:
        agg = aggregate(zs, ("split", "task", "model"))
        models = sorted({k[2] for k in agg})
        lines += [f"### Zero-shot error (%), {label} (Table 2 layout; mean ± std over seeds)", "",
                  "| unseen | task | " + " | ".join(models) + " |", "|---" * (len(models) + 2) + "|"]
        for split, task in sorted({(k[0], k[1]) for k in agg}, key=lambda x: (_task_key(x[1]), _split_key(x[0]))):
            cells = [agg.get((split, task, m)) for m in models]
            lines.append(f"| {split} | {task} | " + " | ".join(
                "" if a is None else f"{a['mean']:.1f} ± {a['std']:.1f}" for a in cells) + " |")
        lines.append("")
    sweep = [r for r in rows if r.get("names")]
    if sweep:
        agg = aggregate(sweep, ("task", "model", "names"))
        names = sorted({k[2] for k in agg}, key=int)
        lines += [f"### Error (%) vs number of names, {label} (Fig. 1 protocol)", "",
                  "| task | model | " + " | ".join(f"{n} names" for n in names) + " |", "|---" * (len(names) + 2) + "|"]
        for task, model in sorted({(k[0], k[1]) for k in agg}):
            lines.append(f"| {task} | {model} | " + " | ".join(
                "" if (a := agg.get((task, model, n))) is None else f"{a['mean']:.1f} ± {a['std']:.1f}"
                for n in names) + " |")
        lines.append("")
    return "\n".join(lines) + "\n"


def write_reports(rows: List[Dict[str, str]], out: Path, label: str) -> Dict[str, Path]:
    from nesyseq.evaluations.plotting import pyplot, save_png

    out.mkdir(parents=True, exist_ok=True)
    fields = ["model", "task", "seed", "names", "split", "subset", "beta", "error", "questions", "ckpt", "data",
              "valid_loss"]
    buf = io.StringIO()
    w = csv.DictWriter(buf, fieldnames=fields, extrasaction="ignore")
    w.writeheader()
    for r in rows:
        w.writerow(r)
    paths = {"csv": out / "qa_results.csv", "md": out / "qa_table.md", "png": out / "qa_errors.png"}
    atomic_write_bytes(str(paths["csv"]), buf.getvalue().encode())
    atomic_write_bytes(str(paths["md"]), markdown(rows, label).encode())
    plt = pyplot()
    agg = aggregate(rows, ("model", "task", "split", "names"))
    labels = [" ".join(x for x in k if x) for k in agg]
    fig, ax = plt.subplots(figsize=(max(4, 0.6 * len(labels)), 3.5))
    ax.bar(range(len(labels)), [a["mean"] for a in agg.values()], yerr=[a["std"] for a in agg.values()])
    ax.set_xticks(range(len(labels)), labels, rotation=60, ha="right", fontsize=7)
    ax.set_ylabel("error (%)")
    ax.set_title(f"answer error, {label}")
    fig.tight_layout()
    save_png(fig, paths["png"], 120)
    sweep = [r for r in rows if r.get("names")]
    if sweep:
        agg = aggregate(sweep, ("task", "model", "names"))
        fig, ax = plt.subplots(figsize=(4.5, 3.5))
        for task, model in sorted({(k[0], k[1]) for k in agg}):
            pts = sorted((int(k[2]), a) for k, a in agg.items() if k[:2] == (task, model))
            ax.errorbar([p[0] for p in pts], [p[1]["mean"] for p in pts], yerr=[p[1]["std"] for p in pts],
                        marker="o", label=f"{model} (task {task})")
        ax.set_xscale("log")
        ax.set_xlabel("number of names")
        ax.set_ylabel("error (%)")
        ax.set_title(f"Fig. 1 protocol, {label}")
        ax.legend(fontsize=7)
        fig.tight_layout()
        paths["curve"] = out / "qa_names_curve.png"
        save_png(fig, paths["curve"], 120)
    return paths


def arms_of(ckpt: str) -> Dict[str, str]:
    """{arm: checkpoint} when ``ckpt`` is a ``nesyseq choose-arm`` link over two or more arms, else {}."""
    from nesyseq.evaluations.arm_choice import read_choice

    choice = read_choice(ckpt)
    arms = (choice or {}).get("checkpoints") or {}
    return arms if len(arms) > 1 else {}


def with_arm_choice(rows: List[Dict[str, str]]) -> List[Dict[str, str]]:
    """Rows whose checkpoint ``nesyseq choose-arm`` chose among two or more arms, with the chosen
    arm and each arm's loss (for the table)."""
    from nesyseq.evaluations.arm_choice import read_choice

    out = []
    for r in rows:
        if arms_of(r["ckpt"]):
            choice = read_choice(r["ckpt"])
            losses = ", ".join(f"{a} {v:.3f}" for a, v in choice["valid_loss"].items())
            r = dict(r, chosen_arm=choice["chosen"], arm_losses=losses)
        out.append(r)
    return out


def earlier_rows(out: Path) -> List[Dict[str, str]]:
    path = out / "qa_results.csv"
    if not path.is_file():
        return []
    return [{k: v for k, v in r.items() if v} for r in csv.DictReader(io.StringIO(path.read_text(encoding="utf-8")))]


def score(args, ckpt: str, data: str, seed: str, cpu: bool) -> List[Dict[str, str]]:
    """The rows of one checkpoint: one per subset; a choose-arm link adds one row per arm, model
    ``MODEL_ARM``, and its own row repeats the chosen arm's numbers."""
    from nesyseq.evaluations.arm_choice import read_choice

    task, arms = task_of(data, args.task), arms_of(ckpt)
    rows = []
    for subset, split in subsets_of(data, args):
        labels = dict(task=task, seed=str(seed), names=args.names or "", split=split, subset=subset,
                      beta=args.beta if args.beta is not None else "")
        labels = {k: v for k, v in labels.items() if v}

        def row(path, model):
            res = answer_error(path, data, subset, args.batch_size, args.beta, cpu=cpu)
            return dict(labels, model=model, error=f"{res['error']:.2f}", questions=str(res["questions"]),
                        ckpt=path, data=data, valid_loss=res["valid_loss"])

        if not arms:
            rows.append(row(ckpt, args.model))
            continue
        per_arm = {a: row(path, f"{args.model}_{a}") for a, path in arms.items()}
        rows.append(dict(per_arm[read_choice(ckpt)["chosen"]], model=args.model, ckpt=ckpt))
        rows += per_arm.values()
    return rows


def run(args) -> int:
    if getattr(args, "babi_file", None):
        from nesyseq.evaluations.qa_external import run_external

        if args.data and len(args.data) > 1:
            raise UserError("--babi-file: one --data folder (the training dictionary's)")
        args.data = args.data[0] if args.data else None
        return run_external(args)
    from nesyseq.common import cli_args

    ckpts = args.checkpoint
    if not args.data or not args.model or not args.seed:
        raise UserError("evaluate qa needs --checkpoint CKPT ... --data DIR --model NAME --seed S "
                        "(or --checkpoint CKPT --babi-file FILE)")
    datas, seeds = one_each(args.data, len(ckpts), "--data"), one_each(args.seed, len(ckpts), "--seed")
    out = cli_args.out_dir(args, ckpts[0], "qa_eval")
    cpu = cli_args.use_cpu(args)
    rows = [r for ckpt, data, seed in zip(ckpts, datas, seeds) for r in score(args, ckpt, data, seed, cpu)]
    if args.append:
        new = {tuple(r.get(k, "") for k in KEY) for r in rows}
        rows = [r for r in earlier_rows(out) if tuple(r.get(k, "") for k in KEY) not in new] + rows
    paths = write_reports(with_arm_choice(rows), out, args.label)
    print(paths["md"].read_text(), end="")
    for p in paths.values():
        print(p)
    return 0
