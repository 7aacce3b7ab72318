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
    parser.add_argument("data", help="the binarised folder (fairseq-preprocess --only-source)")
    parser.add_argument("--path", required=True, help="the checkpoint to score")
    parser.add_argument("--gen-subset", default="test", help="which split of DATA")
    parser.add_argument("--tokens-per-sample", type=int, default=512, help="block size (as in training)")
    parser.add_argument("--max-tokens", type=int, default=2048, help="tokens per batch")
    parser.add_argument("--cpu", action="store_true", help="score on CPU")
    parser.add_argument("--out", required=True, help="folder for results.json and results.csv")
    parser.add_argument("--fairseq-args", default="",
                        help="more fairseq-eval-lm options, one string, passed unchanged (shell-split); "
                             "a single option needs the = form: --fairseq-args=--context-window=64")


def evaluate_lm(data, path, out, subset="test", tokens_per_sample=512, max_tokens=2048, cpu=False, extra=()):
    """Score ``path`` on ``data``'s ``subset`` with fairseq's eval-lm; write and return the row."""
    from fairseq import options
    from fairseq.dataclass.utils import convert_namespace_to_omegaconf
    from fairseq_cli import eval_lm

    data, path, out = Path(data), Path(path), Path(out)
    if not path.is_file():
        raise UserError(f"--path {path}: no such checkpoint")
    if not (data / "dict.txt").is_file():
        raise UserError(f"{data}: no dict.txt (is it a fairseq-preprocess --only-source folder?)")
    if not (data / f"{subset}.bin").is_file():
        raise UserError(f"{data}: no {subset}.bin (--gen-subset {subset}; fairseq-preprocess --{subset}pref …)")
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

    try:
        extra = shlex.split(args.fairseq_args)
    except ValueError as exc:
        raise UserError(f"--fairseq-args {args.fairseq_args!r}: {exc}") from None
    row = evaluate_lm(args.data, args.path, args.out, args.gen_subset, args.tokens_per_sample,
                      args.max_tokens, args.cpu, extra)
    print(f"{args.path} on {args.gen_subset}: loss {row['loss_base2']:.4f} bits/token, "
          f"perplexity {row['perplexity']:.2f}; {Path(args.out) / 'results.csv'}")
    return 0
