"""``nesyseq quickstart``: the Mathematics Dataset job end to end, small enough for a laptop.

1. generate a few modules with DeepMind's generator and binarize them
   (``nesyseq prepare math``);
2. train ``tp_transformer_tiny`` with the stock ``fairseq-train --user-dir``;
   the checkpoint is selected on the held-out valid split, never on test;
3. decode the interpolate and extrapolate test sets with ``fairseq-generate``
   and score exact match per module (``nesyseq evaluate math``);
4. print the table and where the charts are.

Every number is computed in this run; the checkpoint folder is cleared first.
"""
import argparse
import shutil
import time
from pathlib import Path

from nesyseq.common.errors import UserError
from nesyseq.common.fairseq_cli import USER_DIR, fairseq_bin, small_cpu_env
from nesyseq.cli.train_progress import run_with_progress

DEFAULT_MODULES = "numbers__place_value,comparison__pair,arithmetic__add_or_sub,numbers__round_number"


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--out", default="quickstart", help="working folder (data, checkpoints, results)")
    parser.add_argument("--modules", default=DEFAULT_MODULES,
                        help="comma-separated module patterns to generate")
    parser.add_argument("--per-module", type=int, default=1200,
                        help="training problems per module over the three difficulties (N // 3 each)")
    parser.add_argument("--test-per-module", type=int, default=50,
                        help="interpolate / extrapolate problems per module")
    parser.add_argument("--arch", default="tp_transformer_tiny",
                        help="model architecture (e.g. transformer_math_tiny for the baseline)")
    parser.add_argument("--max-update", type=int, default=1500, help="training updates")
    parser.add_argument("--max-tokens", type=int, default=3000, help="tokens per batch")
    parser.add_argument("--lr", type=float, default=1e-3, help="Adam learning rate")
    parser.add_argument("--seed", type=int, default=1, help="seed for data generation and training")
    parser.add_argument("--workers", type=int, default=2, help="parallel generator processes")


def train_command(data: Path, save_dir: Path, args) -> list:
    return [
        fairseq_bin("fairseq-train"), str(data), "--user-dir", str(USER_DIR),
        "--task", "translation", "-s", "src", "-t", "tgt", "--arch", args.arch,
        "--criterion", "cross_entropy",
        # paper: Adam, betas (0.9, 0.995), grad-norm clip 0.1; a larger lr for the tiny model
        "--optimizer", "adam", "--adam-betas", "(0.9, 0.995)", "--clip-norm", "0.1",
        "--lr", str(args.lr), "--lr-scheduler", "inverse_sqrt", "--warmup-updates", "50",
        "--max-tokens", str(args.max_tokens), "--max-update", str(args.max_update),
        "--save-dir", str(save_dir), "--no-epoch-checkpoints",
        "--best-checkpoint-metric", "loss",  # on the valid split held out of train
        "--seed", str(args.seed), "--num-workers", "0",
        "--log-format", "simple", "--log-interval", "50",
    ] + ([] if _has_cuda() else ["--cpu"])


def _has_cuda() -> bool:
    import torch
    return torch.cuda.is_available()


def run(args) -> int:
    from nesyseq.data_prep.math_pipeline import prepare_math
    from nesyseq.evaluations.math_eval import evaluate_math

    from nesyseq.common.errors import UserError

    from nesyseq import plugins  # noqa: F401  (registers the architectures: an unknown --arch fails before any data work)
    from fairseq.models import ARCH_MODEL_REGISTRY

    if args.arch not in ARCH_MODEL_REGISTRY:
        close = sorted(a for a in ARCH_MODEL_REGISTRY if a.startswith(("tp_", "transformer_math")))
        raise UserError(f"--arch {args.arch}: no such architecture (e.g. {', '.join(close)})")
    from nesyseq.common.out_folder import check_out_path

    out = check_out_path(args.out).resolve()   # a file, or a folder that cannot be written: one line, now
    out.mkdir(parents=True, exist_ok=True)
    t0 = time.time()

    print(f"[1/3] generating and binarizing {args.modules} in {out / 'data'}", flush=True)
    data = prepare_math(out / "data", modules=args.modules, per_module=args.per_module,
                        test_per_module=args.test_per_module, seed=args.seed,
                        workers=args.workers, progress=True)
    print(f"      done in {time.time() - t0:.0f}s -> {data}", flush=True)

    save_dir = out / "checkpoints" / args.arch
    shutil.rmtree(save_dir, ignore_errors=True)
    save_dir.mkdir(parents=True)
    t1 = time.time()
    print(f"[2/3] fairseq-train --arch {args.arch} for {args.max_update} updates", flush=True)
    log = save_dir / "train.log"
    rc = run_with_progress(train_command(data, save_dir, args), log, args.max_update,
                           cwd=out, env=dict(small_cpu_env(), PYTHONUNBUFFERED="1"))
    if rc != 0:
        tail = "\n".join(log.read_text().splitlines()[-8:])
        raise UserError(f"fairseq-train failed (log: {log}):\n{tail}")
    print(f"      done in {time.time() - t1:.0f}s; log {log}", flush=True)

    t2 = time.time()
    print("[3/3] fairseq-generate (greedy) on interpolate and extrapolate, exact match", flush=True)
    scores, paths = evaluate_math(save_dir / "checkpoint_best.pt", data, out / "results" / args.arch,
                                  beam=1, cpu=not _has_cuda(), title=f"quickstart {args.arch}")
    print(f"      done in {time.time() - t2:.0f}s\n", flush=True)
    print(paths["markdown"].read_text())
    for key, p in paths.items():
        print(f"{key:>16}: {p}")
    print(f"\nquickstart finished in {time.time() - t0:.0f}s")
    return 0
