"""Benchmark: fused Triton trans kernels vs the PyTorch reference, in one run.

    python benchmarks/bench_trans.py                      # full sweep (CUDA device)
    python benchmarks/bench_trans.py --T 512 1024 --kinds causal --dtypes fp16
    python benchmarks/bench_trans.py --markdown out.md    # also write the table
    TRITON_INTERPRET=1 python benchmarks/bench_trans.py --smoke   # CPU: exercise the script only

For every T in {128, 256, 512, 1024, 2048}, mask kind (none, causal, prefix,
encdec), dtype (fp16, bf16) and mode (forward; forward+backward) it times
``triton_kernels.trans_reference`` (dense batched matmul + mask + softmax,
computed in fp32) and the Triton kernels, and prints time, speed-up, TFLOP/s on
*useful* FLOPs and the peak memory each call allocates on top of its inputs.

Useful FLOPs: 2 per (x, a, y) triple with an allowed kernel entry K(x, a) and an
allowed premise entry v(a, y), times H; forward+backward counts 3x that (dK needs
dP = dO v^T, dV needs p^T dO).  Exponentials and masks are not counted.

Shapes: H = 64 binary heads (FOLNet's D2); B = max(1, 4096 // T) so every row
has the same number of tokens; encdec uses Ti = Tt = T/2 (so the a and y axes
have length T); prefix uses P_b = T/2 (T/4 for odd b).  No padding unless
``--padding`` (then ~12% ragged right padding per sequence).

Peak memory = torch.cuda.max_memory_allocated() during one call minus the
memory allocated before it (inputs, and dO for backward).
"""
from __future__ import annotations

import argparse
import math
import os
import sys
import time

import torch

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), ".."))

from triton_kernels import TransMask, allowed_masks, trans_reference  # noqa: E402
from triton_kernels import trans_triton as tt  # noqa: E402

DTYPES = {"fp16": torch.float16, "bf16": torch.bfloat16, "fp32": torch.float32}
KINDS = ("none", "causal", "prefix", "encdec")


def make_case(kind, T, B, H, dtype, device, padding):
    g = torch.Generator(device="cpu").manual_seed(T)
    lengths = torch.full((B,), T)
    if padding:
        lengths = T - torch.randint(0, max(1, T // 4), (B,), generator=g)
    if kind == "encdec":
        Ti = Tt = T // 2
        kp = (torch.arange(Tt)[None] >= (lengths[:, None] // 2)) if padding else None
        ep = (torch.arange(Ti)[None] >= (lengths.flip(0)[:, None] // 2)) if padding else None
        mask = TransMask("encdec", key_padding=None if kp is None else kp.to(device),
                         enc_padding=None if ep is None else ep.to(device))
        K = torch.randn(B, H, Tt, Ti + Tt, generator=g).to(device, dtype)
        v = torch.randn(B, H, Tt, Ti + Tt, generator=g).to(device, dtype)
        ve = torch.randn(B, H, Ti, Ti, generator=g).to(device, dtype)
        return K, v, ve, mask
    kp = (torch.arange(T)[None] >= lengths[:, None]).to(device) if padding else None
    P = torch.tensor([T // 2 if b % 2 == 0 else T // 4 for b in range(B)], device=device)
    mask = TransMask(kind, key_padding=kp, prefix_lengths=P if kind == "prefix" else None)
    K = torch.randn(B, H, T, T, generator=g).to(device, dtype)
    v = torch.randn(B, H, T, T, generator=g).to(device, dtype)
    return K, v, None, mask


def useful_flops(K, v, ve, mask) -> float:
    """2 * H * #{(b, x, a, y): kernel(x, a) and premise(a, y) allowed} (forward)."""
    k_ok, v_ok = allowed_masks(K, v, mask, ve)
    B = K.shape[0]
    k_ok = k_ok.expand(B, *k_ok.shape[1:]).float()
    v_ok = v_ok.expand(B, *v_ok.shape[1:]).float()
    count = sum(float((k_ok[b] @ v_ok[b]).double().sum()) for b in range(B))
    return 2.0 * K.shape[1] * count


def _sync(device):
    if device.type == "cuda":
        torch.cuda.synchronize()


def timed(fn, device, warmup=3, rep=10) -> float:
    """Median milliseconds per call (CUDA events on GPU)."""
    for _ in range(warmup):
        fn()
    _sync(device)
    times = []
    for _ in range(rep):
        if device.type == "cuda":
            s, e = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
            s.record()
            fn()
            e.record()
            torch.cuda.synchronize()
            times.append(s.elapsed_time(e))
        else:
            t0 = time.perf_counter()
            fn()
            times.append(1e3 * (time.perf_counter() - t0))
    times.sort()
    return times[len(times) // 2]


def peak_mib(fn, device) -> float:
    if device.type != "cuda":
        return float("nan")
    _sync(device)
    torch.cuda.empty_cache()
    base = torch.cuda.memory_allocated()
    torch.cuda.reset_peak_memory_stats()
    fn()
    _sync(device)
    return (torch.cuda.max_memory_allocated() - base) / 2**20


def make_call(impl, K, v, ve, mask, backward: bool, dout=None):
    fn = trans_reference if impl == "torch" else tt.trans_triton
    if not backward:
        def call():
            with torch.no_grad():
                fn(K, v, mask, ve)
        return call
    ins = [K, v] + ([ve] if ve is not None else [])

    def call():
        for t in ins:
            t.grad = None
        fn(K, v, mask, ve).backward(dout)
    return call


def max_errors(K, v, ve, mask, backward, dout):
    """max |triton - reference| / max |reference| over the output (and each gradient for fwd+bwd)."""
    ins = [K, v] + ([ve] if ve is not None else [])
    res = []
    for fn in (trans_reference, tt.trans_triton):
        for t in ins:
            t.grad = None
        if backward:
            out = fn(K, v, mask, ve)
            out.backward(dout)
            res.append([out.detach().float()] + [t.grad.float() for t in ins])
        else:
            with torch.no_grad():
                res.append([fn(K, v, mask, ve).float()])
    for t in ins:
        t.grad = None
    return max(float((a - b).abs().max() / b.abs().max().clamp_min(1e-30)) for a, b in zip(*res))


def run(args) -> list:
    device = torch.device("cuda" if torch.cuda.is_available() else "cpu")
    rows = []
    for T in args.T:
        B = args.batch or max(1, 4096 // T)
        for kind in args.kinds:
            for dname in args.dtypes:
                dtype = DTYPES[dname]
                K, v, ve, mask = make_case(kind, T, B, args.heads, dtype, device, args.padding)
                flops = useful_flops(K, v, ve, mask)
                dense = 2.0 * args.heads * B * K.shape[2] * K.shape[3] * v.shape[-1]
                for mode in args.modes:
                    backward = mode == "fwd+bwd"
                    for t in (K, v, ve):
                        if t is not None:
                            t.requires_grad_(backward)
                    dout = torch.randn(K.shape[0], K.shape[1], K.shape[2], v.shape[-1],
                                       device=device, dtype=dtype) if backward else None
                    mult = 3.0 if backward else 1.0
                    row = dict(T=T, B=B, kind=kind, dtype=dname, mode=mode, useful=flops / dense)
                    for impl in ("torch", "triton"):
                        call = make_call(impl, K, v, ve, mask, backward, dout)
                        try:
                            ms = timed(call, device, args.warmup, args.rep)
                            mem = peak_mib(call, device)
                        except torch.cuda.OutOfMemoryError:
                            ms, mem = float("nan"), float("nan")
                            torch.cuda.empty_cache()
                        row[impl + "_ms"] = ms
                        row[impl + "_tflops"] = mult * flops / (ms * 1e-3) / 1e12 if ms == ms else float("nan")
                        row[impl + "_mib"] = mem
                    row["err"] = max_errors(K, v, ve, mask, backward, dout) if args.check else float("nan")
                    rows.append(row)
                    print(format_row(row), flush=True)
                del K, v, ve
                if device.type == "cuda":
                    torch.cuda.empty_cache()
    return rows


HEADER = ("| T | B | mask | dtype | mode | useful/dense | torch ms | triton ms | speed-up | "
          "torch TFLOP/s | triton TFLOP/s | torch peak MiB | triton peak MiB | memory ratio | max rel err |")
RULE = "|" + "---|" * (HEADER.count("|") - 1)


def _f(x, spec, suffix=""):
    return "n/a" if x != x else format(x, spec) + suffix


def format_row(r) -> str:
    speed = r["torch_ms"] / r["triton_ms"] if r["triton_ms"] == r["triton_ms"] else float("nan")
    memr = r["torch_mib"] / r["triton_mib"] if r["triton_mib"] and r["triton_mib"] == r["triton_mib"] \
        else float("nan")
    return (f"| {r['T']} | {r['B']} | {r['kind']} | {r['dtype']} | {r['mode']} | {r['useful']:.3f} | "
            f"{_f(r['torch_ms'], '.3f')} | {_f(r['triton_ms'], '.3f')} | {_f(speed, '.2f', 'x')} | "
            f"{_f(r['torch_tflops'], '.1f')} | {_f(r['triton_tflops'], '.1f')} | "
            f"{_f(r['torch_mib'], '.0f')} | {_f(r['triton_mib'], '.0f')} | {_f(memr, '.1f', 'x')} | "
            f"{_f(r['err'], '.1e')} |")


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--T", type=int, nargs="+", default=[128, 256, 512, 1024, 2048])
    ap.add_argument("--kinds", nargs="+", default=list(KINDS), choices=KINDS)
    ap.add_argument("--dtypes", nargs="+", default=["fp16", "bf16"], choices=list(DTYPES))
    ap.add_argument("--modes", nargs="+", default=["fwd", "fwd+bwd"], choices=["fwd", "fwd+bwd"])
    ap.add_argument("--heads", type=int, default=64)
    ap.add_argument("--batch", type=int, default=0, help="0: max(1, 4096 // T)")
    ap.add_argument("--padding", action="store_true", help="ragged right padding (up to T/4)")
    ap.add_argument("--warmup", type=int, default=3)
    ap.add_argument("--rep", type=int, default=10)
    ap.add_argument("--no-check", dest="check", action="store_false",
                    help="skip the max-rel-error column (saves one extra call per row)")
    ap.add_argument("--markdown", help="also write the table to this file")
    ap.add_argument("--smoke", action="store_true",
                    help="CPU + TRITON_INTERPRET=1: tiny sizes, to exercise this script (no figures)")
    args = ap.parse_args(argv)

    if args.smoke:
        if torch.cuda.is_available() or not tt.interpreter_usable():
            sys.exit("--smoke is for CPU runs with TRITON_INTERPRET=1 set before starting Python")
        args.T, args.heads, args.batch, args.rep, args.warmup = [32], 2, 2, 1, 0
        args.dtypes = [d for d in args.dtypes if d != "bf16"] or ["fp16"]  # no bf16 in the interpreter
        print("SMOKE RUN on the CPU Triton interpreter: the times below are NOT performance figures.")
    elif not torch.cuda.is_available():
        print("No CUDA device: the Triton kernels cannot be timed here (GPU figures are still owed). "
              "Run on a CUDA machine, or use --smoke with TRITON_INTERPRET=1 to exercise the script.")
        return 0

    dev = torch.cuda.get_device_name() if torch.cuda.is_available() else "CPU (Triton interpreter smoke run)"
    import triton
    meta = (f"device: {dev}; torch {torch.__version__}; triton {triton.__version__}; H={args.heads}; "
            f"padding={'ragged' if args.padding else 'none'}; autotune={'on' if tt._autotune_enabled() else 'off'}")
    print(meta)
    print(HEADER)
    print(RULE)
    rows = run(args)
    if args.markdown:
        with open(args.markdown, "w") as f:
            f.write(meta + "\n\n" + HEADER + "\n" + RULE + "\n" + "\n".join(format_row(r) for r in rows) + "\n")
    bad = [r for r in rows if args.check and not (r["err"] < (2e-2 if r["dtype"] != "fp32" else 1e-3))]
    if bad:
        print(f"WARNING: {len(bad)} rows exceed the error bound", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
