"""``nesyseq evaluate qa``: answer error of babi_qa checkpoints -> markdown table, CSV, PNGs.

    nesyseq evaluate qa --out reports/qa \\
        --run model=smn,task=1,seed=0,names=100,ckpt=ck/smn1/checkpoint_best.pt,data=data/n100/bin/task1 \\
        --run model=memnet,task=1,seed=0,names=100,ckpt=...,data=...

Each ``--run`` is one trained checkpoint with its labels (``model``, ``task``, ``seed`` required;
``names`` for the Fig. 1 sweep, ``split`` e.g. rooms/objects/people for the zero-shot table;
``ckpt`` and ``data`` the checkpoint and the ``bin/task{N}`` folder; ``subset`` default test;
``beta`` a diagnostic: evaluate with the symbolic output mixture weight β of eq. 4 fixed to
this value, e.g. ``beta=0`` for the symbolic part alone; label such rows with their own
``model=`` name, they are not the trained model).
The answer is the argmax of the model's distribution at target step 0 (the answer token);
error = % of questions answered wrongly.  Seeds are aggregated as mean ± std (population std
over the seeds given).  A task is passed when its mean error < 5% (bAbI convention).
Each row also carries the checkpoint's validation loss (``valid_loss``: fairseq's
``extra_state["val_loss"]``, bits per target token on the held-out valid split, rounded to 3
decimals by fairseq's logging), and where a model and task (plain rows: no ``split``, ``names``
or ``beta``) have two or more seeds that all have one, the table adds the seed a user would keep
without looking at the test: the lowest validation loss, ties listed (ours; the paper reports the
mean over seeds only).

A ``--run`` with ``arms=V1 V2 ...`` (space-separated) and ``{arm}`` in its ``ckpt`` is one
checkpoint per arm (``{arm}`` replaced by each value; the launch config's task-2 stage trained
from both relative-position tables, ``t2_relative_table=keep zero``): each arm gets a row of its
own, model ``MODEL_V``, and the row ``MODEL`` is the arm whose checkpoint has the lowest
validation loss (the first listed on a tie), the choice made without the test (ours).  With one
value it is a plain run.  :func:`choose_arm` is that rule, the only one: ``--choose-arm`` applies
it without any test (the launch config's ``choose_task2`` stage): for one ``--run`` with ``arms=``
it reads each arm's checkpoint validation loss and writes ``OUT/arm_choice.json`` and
``OUT/checkpoint_best.pt``, a link to the chosen arm's checkpoint.

Writes ``qa_results.csv`` (one row per run), ``qa_table.md`` (per model: error per task, mean
error, tasks passed; a zero-shot table when ``split`` labels are given; the names sweep when
``names`` labels are given), ``qa_errors.png`` and, with ``names``, ``qa_names_curve.png``.
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

REQUIRED = ("model", "task", "seed", "ckpt", "data")


def add_arguments(parser: argparse.ArgumentParser) -> None:
    from nesyseq.common import cli_args

    parser.add_argument("--run", action="append", metavar="K=V,...",
                        help="one checkpoint: model=,task=,seed=,ckpt=,data=[,names=][,split=][,subset=][,beta=]; "
                        "arms=\"V1 V2\" with {arm} in ckpt=: one per arm, and the lowest valid loss kept")
    cli_args.add_out(parser, "qa_eval/ beside the first checkpoint; required with --run")
    cli_args.add_subset(parser, "test", "the split a --run without subset= scores")
    cli_args.add_cpu(parser)
    parser.add_argument("--choose-arm", action="store_true",
                        help="with one --run that has arms=: no test, only the arm of lowest valid loss -> "
                        "OUT/arm_choice.json and OUT/checkpoint_best.pt (a link to its checkpoint)")
    parser.add_argument("--label", default="bAbI-style", help="data label used in titles (bAbI / bAbI-style)")
    parser.add_argument("--batch-size", type=int, default=256, help="questions per forward pass")
    ext = parser.add_argument_group("a trained checkpoint on bAbI-format files it never saw "
                                    "(evaluations/qa_external.py; no prepare qa, no retraining)")
    cli_args.add_checkpoint(ext, "babi_qa checkpoint(s) (e.g. one per seed; mean ± std per file)", required=False)
    ext.add_argument("--babi-file", action="append", metavar="FILE", help="bAbI-format file (repeatable)")
    cli_args.add_data(ext, "folder with the training dict.src.txt (default: the checkpoint's training data "
                           "folder)", required=False)
    ext.add_argument("--memory-size", type=int, help="story sentences kept (default: the training data's)")


def parse_run(text: str) -> Dict[str, str]:
    run = {}
    for part in text.split(","):
        key, sep, value = part.partition("=")
        if not sep or not key.strip():
            raise UserError(f"--run {text!r}: expected key=value pairs separated by commas")
        run[key.strip()] = value.strip()
    missing = [k for k in REQUIRED if k not in run]
    if missing:
        raise UserError(f"--run {text!r}: missing {', '.join(missing)}")
    if "arms" in run:
        arms = run["arms"].split()
        if not arms or len(set(arms)) != len(arms):
            raise UserError(f"--run {text!r}: arms={run['arms']!r}: expected distinct space-separated values")
        if "{arm}" not in run["ckpt"]:
            raise UserError(f"--run {text!r}: arms= needs {{arm}} in ckpt= (where each arm's checkpoint is)")
    elif "{arm}" in run["ckpt"]:
        raise UserError(f"--run {text!r}: ckpt= has {{arm}} but no arms= lists the values")
    return run


def expand_arms(run: Dict[str, str]) -> List[Dict[str, str]]:
    """The runs of one ``--run``: itself, or one per value of ``arms=`` (``{arm}`` in ``ckpt``
    replaced; with two or more, model ``MODEL_V`` and key ``arm`` = V)."""
    if "arms" not in run:
        return [run]
    base = {k: v for k, v in run.items() if k != "arms"}
    arms = run["arms"].split()
    if len(arms) == 1:
        return [dict(base, ckpt=base["ckpt"].replace("{arm}", arms[0]))]
    return [dict(base, model=f"{base['model']}_{a}", ckpt=base["ckpt"].replace("{arm}", a), arm=a) for a in arms]


def choose_arm(run: Dict[str, str], arm_rows: List[Dict[str, str]]) -> Dict[str, str]:
    """The arm rule, the one place it is written: of the rows of a ``--run``'s arms (keys ``arm``,
    ``ckpt``, ``valid_loss``: the checkpoint's ``extra_state["val_loss"]``), a copy of the row
    whose ``valid_loss`` is lowest, the first listed on a tie, as the row ``run['model']``, with
    ``chosen_arm`` and ``arm_losses`` for the report.  A row without a loss is an error: no arm
    is chosen by looking at the test."""
    missing = [r["ckpt"] for r in arm_rows if not r.get("valid_loss")]
    if missing:
        raise UserError(f"--run model={run['model']},arms={run['arms']}: {missing[0]} has no validation loss "
                        f"(extra_state val_loss), so no arm can be chosen without the test")
    best = min(arm_rows, key=lambda r: float(r["valid_loss"]))   # min keeps the first of equals
    losses = ", ".join(f"{r['arm']} {float(r['valid_loss']):.3f}" for r in arm_rows)
    return dict({k: v for k, v in best.items() if k != "arm"}, model=run["model"], chosen_arm=best["arm"],
                arm_losses=losses)


def _fix_beta(model, beta: str, ckpt: str) -> None:
    """Set every ``beta_logit`` (the eq. 4 mixture p = β p_sem + (1 − β) p_sym) to logit(β)."""
    import math

    import torch

    try:
        b = float(beta)
    except ValueError:
        b = -1.0
    if not 0.0 <= b <= 1.0:
        raise UserError(f"--run beta={beta}: expected a number in [0, 1]")
    params = [p for n, p in model.named_parameters() if n.split(".")[-1] == "beta_logit"]
    if not params:
        raise UserError(f"--run beta={beta}: {ckpt} has no symbolic output mixture (no beta_logit parameter)")
    logit = 30.0 if b >= 1 - 1e-13 else -30.0 if b <= 1e-13 else math.log(b / (1 - b))
    with torch.no_grad():
        for p in params:
            p.fill_(logit)


def valid_loss(state: dict) -> str:
    """The validation loss fairseq stored in a loaded checkpoint (``extra_state["val_loss"]``), or
    "" for one saved without it (e.g. a ``convert warm-start`` file)."""
    v = (state.get("extra_state") or {}).get("val_loss")
    return "" if v is None else repr(float(v))


def checkpoint_valid_loss(ckpt: str) -> str:
    """:func:`valid_loss` of the checkpoint file ``ckpt`` (read safely by evaluations/checkpoints.py;
    no model is built, so no data folder is needed)."""
    from nesyseq.evaluations import checkpoints

    return valid_loss(checkpoints.read_raw(ckpt, "--run ckpt=", mmap=True))


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
        raise UserError(f"--run data={data}: no such directory")
    state = checkpoints.read(ckpt, "--run ckpt=")
    checkpoints.require_task(state, ckpt, ("babi_qa",), "evaluate qa", "--run ckpt=")
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
    model, cfg, task, _ = checkpoints.load_model(ckpt, data, ("babi_qa",), "evaluate qa", "--run ckpt=",
                                                 state=state, data_flag="--run data=")
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


def choose_arm_only(run_: Dict[str, str], out: Path) -> Dict[str, str]:
    """``--choose-arm``: the arm of lowest validation loss of one ``--run`` (:func:`choose_arm`,
    losses read from the checkpoints, no test) -> ``out/arm_choice.json`` and
    ``out/checkpoint_best.pt``, a relative link to the chosen checkpoint (both replaced atomically)."""
    import json
    import os

    if "arms" not in run_:
        raise UserError(f"--choose-arm: the --run has no arms= to choose from (model={run_['model']})")
    rows = []
    for arm in run_["arms"].split():
        ckpt = run_["ckpt"].replace("{arm}", arm)
        rows.append(dict(run_, arm=arm, ckpt=ckpt, valid_loss=checkpoint_valid_loss(ckpt)))
    chosen = choose_arm(run_, rows)
    out.mkdir(parents=True, exist_ok=True)
    record = {"model": run_["model"], "task": run_["task"], "seed": run_["seed"],
              "valid_loss": {r["arm"]: float(r["valid_loss"]) for r in rows},
              "chosen": chosen["chosen_arm"], "checkpoint": chosen["ckpt"]}
    link, tmp = out / "checkpoint_best.pt", out / f".checkpoint_best.pt.tmp-{os.getpid()}"
    if tmp.is_symlink() or tmp.exists():
        tmp.unlink()
    os.symlink(os.path.relpath(chosen["ckpt"], out), tmp)
    os.replace(tmp, link)
    atomic_write_bytes(str(out / "arm_choice.json"), (json.dumps(record, indent=1) + "\n").encode())
    return chosen


def run(args) -> int:
    if getattr(args, "choose_arm", False):
        if getattr(args, "babi_file", None) or not args.run or len(args.run) != 1 or not args.out:
            raise UserError("--choose-arm takes one --run with arms= and --out DIR")
        chosen = choose_arm_only(parse_run(args.run[0]), Path(args.out))
        print(f"chosen: {chosen['chosen_arm']} (valid loss per arm: {chosen['arm_losses']})")
        return 0
    if getattr(args, "babi_file", None):
        if args.run:
            raise UserError("give either --run or --checkpoint/--babi-file, not both")
        from nesyseq.evaluations.qa_external import run_external

        return run_external(args)
    if not args.run or not args.out:
        raise UserError("evaluate qa needs --run ... --out DIR, or --checkpoint CKPT --babi-file FILE")
    from nesyseq.common import cli_args

    cpu = cli_args.use_cpu(args)
    default_subset = getattr(args, "subset", None) or "test"
    runs = [parse_run(t) for t in args.run]
    rows = []
    for run_ in runs:
        evaluated = []
        for r in expand_arms(run_):
            subset = r.get("subset", default_subset)
            res = answer_error(r["ckpt"], r["data"], subset, args.batch_size, r.get("beta"), cpu=cpu)
            evaluated.append(dict(r, subset=subset, error=f"{res['error']:.2f}",
                                  questions=str(res["questions"]), valid_loss=res["valid_loss"]))
        if len(evaluated) > 1:
            rows.append(choose_arm(run_, evaluated))
        rows += evaluated
    paths = write_reports(rows, Path(args.out), args.label)
    print(paths["md"].read_text(), end="")
    for p in paths.values():
        print(p)
    return 0
