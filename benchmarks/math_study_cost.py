"""What the math study costs at the paper's size: FLOPs of one training step counted on CPU,
scaled to a run, at stated GPU utilisations.

    python benchmarks/math_study_cost.py --data RUN/prepare/data --batch 1024 --updates 500000

The lengths come from the study's own text (DIR/text/train.src/.tgt, characters plus EOS): one
step is teacher-forced forward + backward of ``--arch`` on ``--count-batch`` questions padded to
the mean lengths, counted by ``torch.utils.flop_counter.FlopCounterMode`` (matmuls and
attention), scaled linearly to ``--batch`` (every FLOP counted is per question).  The optimizer's
Adam update (about 10 FLOPs per weight) is added.  GPU time = FLOPs / (peak x utilisation);
``--peak-tflops`` 989 is the H100 SXM's dense bf16 peak.  No GPU is measured here: the
utilisations are assumptions, printed as such.
"""
import argparse
import sys
from pathlib import Path

import torch

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
from bench_tp_mfu import batch, build, flops  # noqa: E402
from fairseq.data import Dictionary  # noqa: E402


def mean_lengths(text_dir: Path, limit: int = 20000):
    def mean(path):
        lines = path.read_text(encoding="utf-8").splitlines()[:limit]
        return sum(len(ln.split(" ")) + 1 for ln in lines) / len(lines)   # + EOS
    return mean(text_dir / "train.src"), mean(text_dir / "train.tgt")


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--data", required=True, help="the study's prepare/data folder (text/ and bin/)")
    ap.add_argument("--arch", nargs="+", default=["tp_transformer_math", "transformer_math", "transformer_math_wide"])
    ap.add_argument("--batch", type=int, default=1024, help="questions per update (the paper: 1024)")
    ap.add_argument("--updates", type=int, default=500000, help="updates per run (the paper: 500k)")
    ap.add_argument("--count-batch", type=int, default=4, help="questions in the counted step")
    ap.add_argument("--peak-tflops", type=float, default=989.0)
    ap.add_argument("--utilisation", type=float, nargs="+", default=[0.2, 0.4])
    args = ap.parse_args(argv)
    data = Path(args.data)
    d = Dictionary.load(str(data / "bin" / "dict.src.txt"))
    S, T = mean_lengths(data / "text")
    print(f"mean lengths: question {S:.1f}, answer {T:.1f} characters (with EOS)")
    gen = torch.Generator().manual_seed(0)
    inputs = batch(d, args.count_batch, round(S), round(T), torch.device("cpu"), gen)
    print(f"| arch | params | TFLOP per update (batch {args.batch}) | PFLOP per run ({args.updates:,} updates) | "
          + " | ".join(f"H100 hours at {100 * u:.0f}%" for u in args.utilisation) + " |")
    print("|---|---:|---:|---:|" + "---:|" * len(args.utilisation))
    for arch in args.arch:
        model = build(arch, d)
        n = sum(p.numel() for p in model.parameters())
        per_q = flops(model, inputs, torch.float32) / args.count_batch
        step = per_q * args.batch + 10 * n
        run = step * args.updates
        hours = [run / (args.peak_tflops * 1e12 * u) / 3600 for u in args.utilisation]
        print(f"| {arch} | {n / 1e6:.1f}M | {step / 1e12:.2f} | {run / 1e15:,.0f} | "
              + " | ".join(f"{h:,.0f}" for h in hours) + " |")


if __name__ == "__main__":
    main()
