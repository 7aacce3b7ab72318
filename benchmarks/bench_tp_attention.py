"""Training-step cost of TP-attention: tp_transformer_math vs transformer_math.

Both models are built in this process with the same seed and trained on the
same batch (Mathematics-Dataset-like lengths: questions up to 160 characters,
answers up to 30).  Runs alternate between the two models so that drift in the
machine's speed hits both alike; the median step time is reported.

Memory: on CUDA, the peak allocated memory of a step; on CPU (no allocator
statistics), the bytes of tensors autograd saves for backward, which is what
dominates a training step's peak.

    python benchmarks/bench_tp_attention.py            # paper sizes
    python benchmarks/bench_tp_attention.py --tiny     # quick check
Goal: time ratio <= 1.15.
"""
import argparse
import statistics
import sys
import time
from pathlib import Path

import torch
import torch.nn.functional as F

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
from benchmarks._timing import Stopwatch  # noqa: E402

from nesyseq import plugins  # noqa: E402,F401
from fairseq import models  # noqa: E402
from fairseq.data import Dictionary  # noqa: E402
from nesyseq.plugins.models.tp_transformer import TPTransformerConfig, TPTransformerModel  # noqa: E402


def build(arch: str, dictionary: Dictionary, device):
    args = argparse.Namespace(arch=arch)
    models.ARCH_CONFIG_REGISTRY[arch](args)
    cfg = TPTransformerConfig.from_namespace(args)

    class Task:
        source_dictionary = target_dictionary = dictionary

    torch.manual_seed(0)
    return TPTransformerModel.build_model(cfg, Task()).to(device)


def make_batch(dictionary, batch, src_len, tgt_len, device):
    g = torch.Generator().manual_seed(0)
    lo, hi = dictionary.nspecial, len(dictionary)
    src = torch.randint(lo, hi, (batch, src_len), generator=g)
    tgt = torch.randint(lo, hi, (batch, tgt_len), generator=g)
    # ragged lengths with fairseq's padding sides: source left, target right
    src_lens = torch.randint(src_len // 3, src_len + 1, (batch,), generator=g)
    tgt_lens = torch.randint(2, tgt_len + 1, (batch,), generator=g)
    for i in range(batch):
        src[i, : src_len - src_lens[i]] = dictionary.pad()
        tgt[i, tgt_lens[i]:] = dictionary.pad()
    prev = torch.cat([torch.full((batch, 1), dictionary.eos()), tgt[:, :-1]], 1)
    return src.to(device), src_lens.to(device), prev.to(device), tgt.to(device)


def step(model, opt, batch, dictionary):
    src, src_lens, prev, tgt = batch
    logits, _ = model(src, src_lens, prev)
    loss = F.cross_entropy(logits.float().view(-1, logits.size(-1)), tgt.view(-1),
                           ignore_index=dictionary.pad())
    loss.backward()
    opt.step()
    opt.zero_grad(set_to_none=True)


def saved_activation_bytes(model, batch, dictionary) -> int:
    total = 0

    def pack(t):
        nonlocal total
        total += t.numel() * t.element_size()
        return t

    with torch.autograd.graph.saved_tensors_hooks(pack, lambda t: t):
        src, src_lens, prev, tgt = batch
        logits, _ = model(src, src_lens, prev)
        loss = F.cross_entropy(logits.float().view(-1, logits.size(-1)), tgt.view(-1),
                               ignore_index=dictionary.pad())
    loss.backward()
    model.zero_grad(set_to_none=True)
    return total


def main(argv=None):
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--tiny", action="store_true", help="tiny presets (smoke run)")
    p.add_argument("--batch", type=int, default=16, help="sequences per batch")
    p.add_argument("--src-len", type=int, default=160)
    p.add_argument("--tgt-len", type=int, default=30)
    p.add_argument("--steps", type=int, default=10, help="timed steps per model")
    p.add_argument("--warmup", type=int, default=2)
    p.add_argument("--dtype", default="float32", choices=["float32", "bfloat16", "float16"])
    args = p.parse_args(argv)

    device = torch.device("cuda" if torch.cuda.is_available() else "cpu")
    dictionary = Dictionary()
    for i in range(68):  # the paper's ~72-symbol character vocabulary
        dictionary.add_symbol(f"c{i}")
    archs = ["tp_transformer_tiny", "transformer_math_tiny"] if args.tiny else ["tp_transformer_math", "transformer_math"]
    batch = make_batch(dictionary, args.batch, args.src_len, args.tgt_len, device)
    runs = {}
    for arch in archs:
        model = build(arch, dictionary, device).train()
        if args.dtype != "float32":
            model = model.to(getattr(torch, args.dtype))
        opt = torch.optim.Adam(model.parameters(), lr=1e-4, betas=(0.9, 0.995))
        runs[arch] = (model, opt)

    times = {a: [] for a in archs}
    for i in range(args.warmup + args.steps):
        for arch in (archs if i % 2 == 0 else archs[::-1]):  # alternate the order
            model, opt = runs[arch]
            with Stopwatch(device) as sw:
                step(model, opt, batch, dictionary)
            if i >= args.warmup:
                times[arch].append(sw.wall)

    mem = {}
    for arch in archs:
        model, opt = runs[arch]
        if device.type == "cuda":
            torch.cuda.empty_cache()
            torch.cuda.reset_peak_memory_stats()
            step(model, opt, batch, dictionary)
            torch.cuda.synchronize()
            mem[arch] = torch.cuda.max_memory_allocated()
        else:
            mem[arch] = saved_activation_bytes(model, batch, dictionary)

    dev_name = torch.cuda.get_device_name() if device.type == "cuda" else f"CPU ({torch.get_num_threads()} threads)"
    mem_kind = "peak allocated" if device.type == "cuda" else "saved activations"
    print(f"device: {dev_name}; torch {torch.__version__}; dtype {args.dtype}; "
          f"batch {args.batch} x (src {args.src_len}, tgt {args.tgt_len}); {args.steps} steps")
    print(f"| model | params | step time (median) | {mem_kind} |")
    print("|---|---:|---:|---:|")
    for arch in archs:
        n = sum(p.numel() for p in runs[arch][0].parameters())
        print(f"| {arch} | {n / 1e6:.2f}M | {1e3 * statistics.median(times[arch]):.1f} ms | "
              f"{mem[arch] / 2**20:.1f} MiB |")
    tp, base = archs
    ratio_t = statistics.median(times[tp]) / statistics.median(times[base])
    ratio_m = mem[tp] / mem[base]
    print(f"ratio TP / baseline: time {ratio_t:.3f} (goal <= 1.15), memory {ratio_m:.3f}")
    return ratio_t, ratio_m


if __name__ == "__main__":
    main()
