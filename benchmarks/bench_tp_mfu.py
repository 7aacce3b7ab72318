"""TP-Transformer model-only step time and MFU, beside its baselines, in one process.

    python benchmarks/bench_tp_mfu.py --device cuda --dtype bf16 --batch 1024 --compile
    python benchmarks/bench_tp_mfu.py --device cpu --batch 8 --src 40 --tgt 10       # CPU check

For each model (``tp_transformer_math``, ``transformer_math`` and fairseq's stock ``transformer``
at the same sizes: d=512, FFN 2048, 8 heads, 6+6 layers, the Mathematics Dataset's ~72
characters): one step = forward with teacher forcing + sum of the output + backward, under
autocast in ``--dtype`` with fp32 weights, as ``--amp`` trains (``--dtype fp32``: no autocast).
Time: the median of ``--iters`` steps after ``--warmup`` (CUDA events on the GPU). FLOPs:
counted once by ``torch.utils.flop_counter.FlopCounterMode`` over one step; MFU = FLOPs / time /
``--peak-tflops`` (989 = H100 SXM dense bf16; the issue used 800). ``--compile`` also runs each
model with ``--compile`` (plugins/torch_compile.py), reports its first step (compilation
included) and the ``torch._dynamo.explain`` graph/break counts of its layers. Prints a table and
the ratios tp_transformer_math / transformer_math and each / stock transformer.
"""
import argparse
import statistics
import sys
import time
from pathlib import Path

import torch

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
from benchmarks._timing import Stopwatch, repeat  # noqa: E402
from nesyseq import plugins  # noqa: E402,F401  (registers the architectures)
from fairseq import options  # noqa: E402
from fairseq.data import Dictionary  # noqa: E402
from fairseq.models import ARCH_MODEL_REGISTRY  # noqa: E402

from nesyseq.plugins.torch_compile import compile_units  # noqa: E402


class _Task:
    def __init__(self, d):
        self.source_dictionary = self.target_dictionary = d


def build(arch, d, compile_=False, layers=None):
    argv = ["/dev/null", "--task", "translation", "--arch", arch]
    if layers is not None:
        argv += ["--encoder-layers", str(layers), "--decoder-layers", str(layers)]
    if compile_:
        argv += ["--compile"]
    args = options.parse_args_and_arch(options.get_training_parser(), argv)
    args.share_all_embeddings = arch == "transformer"  # one character vocabulary, as ours tie
    return ARCH_MODEL_REGISTRY[arch].build_model(args, _Task(d))


def batch(d, B, S, T, device, gen):
    lo, hi = d.nspecial, len(d)
    src = torch.randint(lo, hi, (B, S), generator=gen).to(device)
    prev = torch.randint(lo, hi, (B, T), generator=gen).to(device)
    prev[:, 0] = d.eos()
    return src, torch.full((B,), S, device=device), prev


def step(model, inputs, dtype):
    ctx = torch.autocast(inputs[0].device.type, dtype=dtype) if dtype != torch.float32 else torch.enable_grad()
    with ctx:
        out = model(*inputs)[0]
    out.float().sum().backward()


def timed(model, inputs, dtype, warmup, iters):
    dev = inputs[0].device
    with Stopwatch(dev) as sw:
        step(model, inputs, dtype)
    first = sw.wall

    def one():
        model.zero_grad(set_to_none=True)
        step(model, inputs, dtype)

    return first, statistics.median(repeat(one, dev, warmup, iters))


def flops(model, inputs, dtype):
    from torch.utils.flop_counter import FlopCounterMode

    with FlopCounterMode(display=False) as fc:
        step(model, inputs, dtype)
    model.zero_grad(set_to_none=True)
    return fc.get_total_flops()


def explain_counts(model, inputs, dtype):
    """(graphs, breaks) summed over one call of each layer type as the training step calls it."""
    seen = {}

    def hook(mod, args, kwargs):
        seen.setdefault((type(mod).__name__, tuple(a is None for a in args)), (mod, args, kwargs))

    hs = [m.register_forward_pre_hook(hook, with_kwargs=True) for m in compile_units(model)]
    step(model, inputs, dtype)
    for h in hs:
        h.remove()
    model.zero_grad(set_to_none=True)
    graphs = breaks = 0
    for mod, args, kwargs in seen.values():
        e = torch._dynamo.explain(mod._call_impl)(*args, **kwargs)
        graphs, breaks = graphs + e.graph_count, breaks + e.graph_break_count
    return graphs, breaks


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--device", default="cuda" if torch.cuda.is_available() else "cpu")
    ap.add_argument("--dtype", choices=("bf16", "fp16", "fp32"), default="bf16")
    ap.add_argument("--batch", type=int, default=256)
    ap.add_argument("--src", type=int, default=160, help="source length (the dataset's longest question)")
    ap.add_argument("--tgt", type=int, default=30, help="target length")
    ap.add_argument("--layers", type=int, default=None, help="encoder = decoder layers (default: the presets' 6)")
    ap.add_argument("--archs", default="tp_transformer_math,transformer_math,transformer")
    ap.add_argument("--compile", action="store_true", help="also the --compile models (not the stock transformer)")
    ap.add_argument("--warmup", type=int, default=3)
    ap.add_argument("--iters", type=int, default=10)
    ap.add_argument("--peak-tflops", type=float, default=989.0)
    ap.add_argument("--threads", type=int, default=None)
    a = ap.parse_args(argv)
    if a.threads:
        torch.set_num_threads(a.threads)
    dtype = {"bf16": torch.bfloat16, "fp16": torch.float16, "fp32": torch.float32}[a.dtype]
    d = Dictionary()
    for i in range(68):
        d.add_symbol(chr(33 + i))
    gen = torch.Generator().manual_seed(0)
    inputs = batch(d, a.batch, a.src, a.tgt, a.device, gen)
    rows = []
    for arch in a.archs.split(","):
        f = None
        for comp in ([False, True] if a.compile and arch != "transformer" else [False]):
            torch.manual_seed(0)
            torch._dynamo.reset()
            model = build(arch, d, comp, a.layers).to(a.device).train()
            counts = explain_counts(model, inputs, dtype) if comp else None
            first, med = timed(model, inputs, dtype, a.warmup, a.iters)  # first: compilation included
            if f is None:  # counted on the eager model: compiled kernels hide their ops from the counter
                f = flops(model, inputs, dtype)
            name = arch + (" --compile" if comp else "")
            rows.append(dict(name=name, arch=arch, comp=comp, ms=med * 1e3, first_s=first, tflop=f / 1e12,
                             mfu=f / med / (a.peak_tflops * 1e12), counts=counts,
                             params=sum(p.numel() for p in model.parameters())))
            del model
            if a.device == "cuda":
                torch.cuda.empty_cache()
    dev = torch.cuda.get_device_name(0) if a.device == "cuda" else "cpu"
    print(f"# {dev}, torch {torch.__version__}, {a.dtype if a.dtype != 'fp32' else 'no'} autocast, B={a.batch} src={a.src} tgt={a.tgt}, "
          f"median of {a.iters}")
    base = {r["comp"]: r["ms"] for r in rows if r["arch"] == "transformer"} or None
    print("| model | params | step ms | first step s | TFLOP/step | MFU | vs stock transformer | dynamo graphs/breaks |")
    print("|---|---|---|---|---|---|---|---|")
    for r in rows:
        rel = f"{r['ms'] / base[False]:.2f}x" if base else "-"
        cnt = "-" if r["counts"] is None else f"{r['counts'][0]}/{r['counts'][1]}"
        print(f"| {r['name']} | {r['params'] / 1e6:.1f}M | {r['ms']:.1f} | {r['first_s']:.1f} | {r['tflop']:.3f} | "
              f"{100 * r['mfu']:.1f}% | {rel} | {cnt} |")
    by = {r["name"]: r["ms"] for r in rows}
    for suffix in ("", " --compile"):
        if f"tp_transformer_math{suffix}" in by and f"transformer_math{suffix}" in by:
            print(f"tp_transformer_math / transformer_math{suffix}: "
                  f"{by['tp_transformer_math' + suffix] / by['transformer_math' + suffix]:.2f}")
    return rows


if __name__ == "__main__":
    main()
