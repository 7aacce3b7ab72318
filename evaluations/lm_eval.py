"""``nesyseq evaluate lm``: a language model's test loss as a table ``nesyseq collect`` reads.

    fairseq's own eval-lm (fairseq_cli/eval_lm.py ``main``, in this process: its returned loss,
    not a parsed log line) on DATA's --gen-subset
      -> OUT/results.json and OUT/results.csv (subset, loss_base2, perplexity)

``--fairseq-args "…"`` goes to fairseq-eval-lm unchanged (e.g. ``--fairseq-args "--context-window 64"``).
"""
from __future__ import annotations

import argparse
import csv
import io
import json
from pathlib import Path

from nesyseq.common.atomic import atomic_write_text
from nesyseq.common.errors import UserError
from nesyseq.common.fairseq_cli import USER_DIR


def add_arguments(parser: argparse.ArgumentParser) -> None:
    from nesyseq.common import cli_args

    cli_args.add_checkpoint(parser, "the checkpoint(s) to score, one row each", aliases=["--path"])
    cli_args.add_data(parser, "the binarised folder (fairseq-preprocess --only-source)", positional_alias=True)
    cli_args.add_out(parser, "eval-lm/ beside the (first) checkpoint; results.json and results.csv")
    cli_args.add_subset(parser, "test", "which split of DATA", aliases=["--gen-subset"])
    cli_args.add_cpu(parser)
    parser.add_argument("--tokens-per-sample", type=int, default=512, help="block size (as in training)")
    parser.add_argument("--max-tokens", type=int, default=2048, help="tokens per batch")
    parser.add_argument("--fairseq-args", default="",
                        help="more fairseq-eval-lm options, one string, passed unchanged (shell-split); "
                             "a single option needs the = form: --fairseq-args=--context-window=64")


def evaluate_lm(data, path, out, subset="test", tokens_per_sample=512, max_tokens=2048, cpu=False, extra=()):
    """Score ``path`` on ``data``'s ``subset`` with fairseq's eval-lm; write and return the row."""
    from fairseq import options
    from fairseq.dataclass.utils import convert_namespace_to_omegaconf
    from fairseq_cli import eval_lm

    data, path, out = Path(data), Path(path), Path(out)
    from nesyseq.common.cli_args import check_checkpoint_file
    from nesyseq.evaluations import checkpoints

    check_checkpoint_file(path)
    if not (data / "dict.txt").is_file():
        raise UserError(f"{data}: no dict.txt (is it a fairseq-preprocess --only-source folder?)")
    if not (data / f"{subset}.bin").is_file():
        raise UserError(f"{data}: no {subset}.bin (--subset {subset}; fairseq-preprocess --{subset}pref …)")
    # a language model whose dictionary is data's, before anything is scored
    checkpoints.checked(path, data, checkpoints.LM_TASKS, "evaluate lm", mmap=True)
    argv = [str(data), "--user-dir", str(USER_DIR), "--path", str(path), "--gen-subset", subset,
            "--tokens-per-sample", str(tokens_per_sample), "--max-tokens", str(max_tokens),
            "--num-workers", "0"] + (["--cpu"] if cpu else []) + list(extra)
    args = options.parse_args_and_arch(options.get_eval_lm_parser(), input_args=argv)
    results = eval_lm.main(convert_namespace_to_omegaconf(args))
    row = {"subset": subset, "loss_base2": float(results["loss"]), "perplexity": float(results["perplexity"])}
    out.mkdir(parents=True, exist_ok=True)
    atomic_write_text(out / "results.json", json.dumps(dict(row, checkpoint=str(path), data=str(data)), indent=2) + "\n")
    buf = io.StringIO()
    writer = csv.writer(buf, lineterminator="\n")
    writer.writerow(["subset", "loss_base2", "perplexity"])
    writer.writerow([subset, f"{row['loss_base2']:.6f}", f"{row['perplexity']:.6f}"])
    atomic_write_text(out / "results.csv", buf.getvalue())
    return row


def run(args) -> int:
    import shlex

    from nesyseq.common import cli_args

    try:
        extra = shlex.split(args.fairseq_args)
    except ValueError as exc:
        raise UserError(f"--fairseq-args {args.fairseq_args!r}: {exc}") from None
    if not args.checkpoint:
        raise UserError("--checkpoint CKPT is required")
    data = cli_args.data_dir(args)
    base = cli_args.out_dir(args, args.checkpoint[0], "eval-lm")
    for ckpt in args.checkpoint:
        out = base / Path(ckpt).stem if len(args.checkpoint) > 1 else base
        row = evaluate_lm(data, ckpt, out, args.subset, args.tokens_per_sample, args.max_tokens,
                          cli_args.use_cpu(args), extra)
        print(f"{ckpt} on {args.subset}: loss {row['loss_base2']:.4f} bits/token, "
              f"perplexity {row['perplexity']:.2f}; {out / 'results.csv'}")
    return 0
