"""Benchmark: fused Triton trans kernels against honest baselines, in one run.

    python benchmarks/bench_trans.py                      # default sweep (CUDA device)
    python benchmarks/bench_trans.py --T 512 1024 --kinds causal --dtypes bf16
    python benchmarks/bench_trans.py --markdown out.md    # also write the tables
    TRITON_INTERPRET=1 python benchmarks/bench_trans.py --smoke   # CPU: exercise the script only

Every case is timed, in the same process and on the same inputs, for
  eager     the same-dtype eager PyTorch op: masked softmax, torch.matmul, row mask
            (``triton_kernels.eager.trans_eager``; masks built once, outside the timing)
  compiled  ``torch.compile(mode="max-autotune")`` of that eager function (only the
            cases in ``--compile``: compiling takes minutes per shape)
  triton    the fused kernels (``trans_triton``)
  fp32-ref  ``trans_reference`` (fp32 arithmetic whatever the dtype; the old baseline)
and two speed-of-light rows:
  bmm       a dense ``torch.bmm`` of the same shape in the same dtype (forward: p @ V;
            backward: the two products dP = dO V^T and dV = p^T dO)
  copy      a device copy moving the bytes the kernels must move (see BYTES)
Forward and backward are timed separately (backward: ``autograd.grad`` on a kept
graph); "fwd+bwd" is their sum.  Speed-ups are against ``eager`` of the same dtype.

Useful FLOPs: 2 per (x, a, y) triple with an allowed kernel entry K(x, a) and an
allowed premise entry v(a, y), times H; backward counts 2x that.
BYTES (the least the op must move through HBM, every tensor once, full size):
forward reads K, v (, v_enc) and writes out; backward reads K, v (, v_enc), out,
dO and writes dK, dv (, dv_enc).  GB/s = BYTES / time, and % HBM = GB/s over the
device's nominal HBM bandwidth (H100 SXM 3.35 TB/s, H200 4.8 TB/s); the ``copy``
row gives the bandwidth a plain copy reaches in the same run.

Errors: ||out - ref|| / ||ref|| (Frobenius) against the fp64 reference on fp64
copies of the same inputs, taking the max over the output and every gradient,
computed on the first 8 heads.

Peak memory: torch.cuda.max_memory_allocated() during forward+backward minus
what was allocated before (inputs, dO).

Shapes: H = 64 (FOLNet's D2 binary channels); B = max(1, 4096 // T); encdec
uses Ti = Tt = T/2; prefix uses P_b = T/2 (T/4 for odd b).  ``--padding`` gives
~12% ragged right padding per sequence.  ``--decode`` rows are one incremental
step: Tq = 1 row at query_offset T - 1 against the full premise (forward only).
``--module`` rows time FOLNet's whole ``Trans`` module from channel-last binary
atoms (B, T, T, D2): projections, trans, output projection, forward+backward.
"""
from __future__ import annotations

import argparse
import math
import os
import sys
import time

import torch

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), ".."))

from nesyseq.triton_kernels import TransMask, allowed_masks, trans_reference  # noqa: E402
from nesyseq.triton_kernels import trans_triton as tt  # noqa: E402
from nesyseq.triton_kernels.eager import premise, trans_eager  # noqa: E402

DTYPES = {"fp16": torch.float16, "bf16": torch.bfloat16, "fp32": torch.float32, "tf32": torch.float32}
KINDS = ("none", "causal", "prefix", "encdec")
HBM_PEAK = {"H100": 3.35e12, "H200": 4.8e12}


def hbm_peak() -> float:
    if not torch.cuda.is_available():
        return float("nan")
    name = torch.cuda.get_device_name()
    for k, v in HBM_PEAK.items():
        if k in name:
            return v
    return float("nan")


def set_tf32(on: bool):
    m = torch.backends.cuda.matmul
    if hasattr(m, "fp32_precision"):
        m.fp32_precision = "tf32" if on else "ieee"
    else:
        m.allow_tf32 = on


def make_case(kind, T, B, H, dtype, device, padding, q_off=None):
    g = torch.Generator(device="cpu").manual_seed(T)
    lengths = torch.full((B,), T)
    if padding:
        lengths = T - torch.randint(0, max(1, T // 4), (B,), generator=g)
    if kind == "encdec":
        Ti = Tt = T // 2
        kp = (torch.arange(Tt)[None] >= (lengths[:, None] // 2)) if padding else None
        ep = (torch.arange(Ti)[None] >= (lengths.flip(0)[:, None] // 2)) if padding else None
        q = Tt - 1 if q_off is not None else 0
        mask = TransMask("encdec", key_padding=None if kp is None else kp.to(device),
                         enc_padding=None if ep is None else ep.to(device), query_offset=q)
        K = torch.randn(B, H, Tt - q, Ti + Tt, generator=g).to(device, dtype)
        v = torch.randn(B, H, Tt, Ti + Tt, generator=g).to(device, dtype)
        ve = torch.randn(B, H, Ti, Ti, generator=g).to(device, dtype)
        return K, v, ve, mask
    kp = (torch.arange(T)[None] >= lengths[:, None]).to(device) if padding else None
    P = torch.tensor([T // 2 if b % 2 == 0 else T // 4 for b in range(B)], device=device)
    q = T - 1 if q_off is not None else 0
    mask = TransMask(kind, key_padding=kp, prefix_lengths=P if kind == "prefix" else None, query_offset=q)
    K = torch.randn(B, H, T - q, T, generator=g).to(device, dtype)
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


def nbytes(*ts) -> int:
    return sum(t.numel() * t.element_size() for t in ts if t is not None)


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


def impl_fn(name, mask, masks, compiled):
    if name == "eager":
        return lambda K, v, ve: trans_eager(K, v, mask, ve, masks=masks)
    if name == "compiled":
        return lambda K, v, ve: compiled(K, v, ve)
    if name == "triton":
        return lambda K, v, ve: tt.trans_triton(K, v, mask, ve)
    if name == "fp32-ref":
        return lambda K, v, ve: trans_reference(K, v, mask, ve)
    raise ValueError(name)


def fwd_bwd_times(fn, ins, dout, device, args, backward=True):
    """(forward ms, backward ms, peak MiB of forward+backward)."""
    def fwd():
        with torch.no_grad():
            fn(*ins)
    t_f = timed(fwd, device, args.warmup, args.rep)
    if not backward:
        return t_f, float("nan"), peak_mib(fwd, device)
    leaves = [t for t in ins if t is not None]
    for t in leaves:
        t.requires_grad_(True)
    out = fn(*ins)

    def bwd():
        torch.autograd.grad(out, leaves, dout, retain_graph=True)
    t_b = timed(bwd, device, args.warmup, args.rep)
    del out

    def both():
        torch.autograd.grad(fn(*ins), leaves, dout)
    mem = peak_mib(both, device)
    for t in leaves:
        t.requires_grad_(False)
    return t_f, t_b, mem


def rel_error(fn, ins, dout, backward) -> float:
    """max over output (and grads) of ||x - ref|| / ||ref||, vs fp64, on the first 8 heads."""
    sub = [None if t is None else t[:, :8].detach().clone() for t in ins]
    d = dout[:, :8] if dout is not None else None
    ref_ins = [None if t is None else t.double().requires_grad_(backward) for t in sub]
    got_ins = [None if t is None else t.requires_grad_(backward) for t in sub]
    mask = None
    return _err(fn, got_ins, ref_ins, d, backward, mask)


def _err(fn, got_ins, ref_ins, d, backward, _):
    res = []
    for f, ins in ((fn, got_ins), (fn.ref, ref_ins)):
        out = f(*ins)
        vals = [out.detach().double()]
        if backward:
            leaves = [t for t in ins if t is not None]
            vals += [g.double() for g in torch.autograd.grad(out, leaves, d.to(out.dtype))]
        res.append(vals)
    return max(float((a - b).norm() / b.norm().clamp_min(1e-300)) for a, b in zip(*res))


class Row(dict):
    pass


def bench_case(args, device, kind, T, dname, padding, decode=False):
    dtype = DTYPES[dname]
    set_tf32(dname == "tf32")
    B = args.batch or max(1, 4096 // T)
    K, v, ve, mask = make_case(kind, T, B, args.heads, dtype, device, padding, q_off=0 if decode else None)
    masks = allowed_masks(K, v, mask, ve)
    flops = useful_flops(K, v, ve, mask)
    backward = not decode
    dout = torch.randn(K.shape[0], K.shape[1], K.shape[2], v.shape[-1], device=device, dtype=dtype) \
        if backward else None
    ins = [K, v, ve]
    case = dict(T=T, B=B, kind=kind + ("+pad" if padding else "") + (" Tq=1" if decode else ""), dtype=dname)
    out_t = torch.empty(K.shape[0], K.shape[1], K.shape[2], v.shape[-1], device=device, dtype=dtype)
    fwd_bytes = nbytes(K, v, ve, out_t)
    bwd_bytes = nbytes(K, v, ve, out_t, dout) + nbytes(K, v, ve)
    rows = []
    names = ["eager", "triton", "fp32-ref"]
    key = f"{kind}:{T}:{dname}"
    compiled = None
    if device.type == "cuda" and key in args.compile and not decode and not padding:
        names.insert(1, "compiled")
        compiled = torch.compile(lambda K, v, ve: trans_eager(K, v, mask, ve, masks=masks), mode="max-autotune",
                                 dynamic=False)
    eager_total = None
    for name in names:
        fn = impl_fn(name, mask, masks, compiled)
        fn_ref = (lambda K, v, ve: trans_reference(K, v, mask, ve))
        r = Row(case, impl=name)
        try:
            t0 = time.time()
            r["fwd"], r["bwd"], r["mib"] = fwd_bwd_times(fn, ins, dout, device, args, backward)
            r["setup_s"] = time.time() - t0
        except torch.cuda.OutOfMemoryError:
            r["fwd"] = r["bwd"] = r["mib"] = float("nan")
            torch.cuda.empty_cache()
        r["total"] = r["fwd"] + (r["bwd"] if backward else 0.0)
        if name == "eager":
            eager_total = r["total"]
        r["speedup"] = eager_total / r["total"] if eager_total else float("nan")
        r["tflops"] = (3.0 if backward else 1.0) * flops / (r["total"] * 1e-3) / 1e12
        r["gbs"] = fwd_bytes / (r["fwd"] * 1e-3) / 1e9
        r["gbs_b"] = bwd_bytes / (r["bwd"] * 1e-3) / 1e9 if backward else float("nan")
        if args.check:
            wrapped = fn
            wrapped_ref = fn_ref

            class F:
                def __call__(self, *a):
                    return wrapped(*a)
                ref = staticmethod(wrapped_ref)
            try:
                r["err"] = rel_error(F(), ins, dout, backward)
            except Exception as e:  # noqa: BLE001  (report, do not abort the sweep)
                print(f"error check failed for {name}: {e}", file=sys.stderr)
                r["err"] = float("nan")
        else:
            r["err"] = float("nan")
        if name == "triton" and device.type == "cuda" and args.kernel_times:
            r["kernels"] = kernel_times(fn, ins, dout, backward)
        rows.append(r)
        print(format_row(r), flush=True)
    if device.type == "cuda":
        rows += speed_of_light(case, K, v, ve, mask, dout, fwd_bytes, bwd_bytes, backward, device, args,
                               eager_total, flops)
    del K, v, ve, dout, masks
    if device.type == "cuda":
        torch.cuda.empty_cache()
    set_tf32(False)
    return rows


def speed_of_light(case, K, v, ve, mask, dout, fwd_bytes, bwd_bytes, backward, device, args, eager_total, flops):
    """Dense bmm of the same shapes (same dtype) and a copy of the bytes the kernels move."""
    rows = []
    BH = K.shape[0] * K.shape[1]
    V = premise(v, ve, mask)
    P = K.reshape(BH, K.shape[2], K.shape[3])
    Vm = V.reshape(BH, V.shape[2], V.shape[3])
    r = Row(case, impl="bmm (dense)")
    r["fwd"] = timed(lambda: torch.bmm(P, Vm), device, args.warmup, args.rep)
    if backward:
        G = dout.reshape(BH, dout.shape[2], dout.shape[3])
        r["bwd"] = timed(lambda: (torch.bmm(G, Vm.transpose(1, 2)), torch.bmm(P.transpose(1, 2), G)),
                         device, args.warmup, args.rep)
    else:
        r["bwd"] = float("nan")
    r["total"] = r["fwd"] + (r["bwd"] if backward else 0.0)
    r["speedup"] = eager_total / r["total"]
    r["tflops"] = (3.0 if backward else 1.0) * 2.0 * BH * P.shape[1] * P.shape[2] * Vm.shape[2] / (r["total"] * 1e-3) / 1e12
    r["gbs"] = r["gbs_b"] = r["mib"] = r["err"] = float("nan")
    rows.append(r)
    print(format_row(r), flush=True)
    r = Row(case, impl="copy (bytes)")
    src = torch.empty(fwd_bytes // 2, dtype=torch.uint8, device=device)
    dst = torch.empty_like(src)
    r["fwd"] = timed(lambda: dst.copy_(src), device, args.warmup, args.rep)
    r["gbs"] = fwd_bytes / (r["fwd"] * 1e-3) / 1e9
    del src, dst
    if backward:
        src = torch.empty(bwd_bytes // 2, dtype=torch.uint8, device=device)
        dst = torch.empty_like(src)
        r["bwd"] = timed(lambda: dst.copy_(src), device, args.warmup, args.rep)
        r["gbs_b"] = bwd_bytes / (r["bwd"] * 1e-3) / 1e9
        del src, dst
    else:
        r["bwd"] = r["gbs_b"] = float("nan")
    r["total"] = r["fwd"] + (r["bwd"] if backward else 0.0)
    r["speedup"] = eager_total / r["total"]
    r["tflops"] = r["mib"] = r["err"] = float("nan")
    rows.append(r)
    print(format_row(r), flush=True)
    return rows


def kernel_times(fn, ins, dout, backward) -> str:
    """Device time per Triton kernel over one forward(+backward), from the profiler."""
    from torch.profiler import ProfilerActivity, profile
    leaves = [t for t in ins if t is not None]
    for t in leaves:
        t.requires_grad_(backward)
    fn(*ins)
    torch.cuda.synchronize()
    with profile(activities=[ProfilerActivity.CUDA]) as prof:
        out = fn(*ins)
        if backward:
            torch.autograd.grad(out, leaves, dout)
        torch.cuda.synchronize()
    for t in leaves:
        t.requires_grad_(False)
    acc = {}
    for e in prof.events():
        if e.device_type == torch.autograd.DeviceType.CUDA and e.name.startswith("_"):
            name = e.name.split("_kernel")[0].lstrip("_")
            acc[name] = acc.get(name, 0.0) + e.device_time_total / 1e3
    return ", ".join(f"{k} {v:.3f}" for k, v in acc.items())


def module_rows(args, device, T, dname):
    """FOLNet's Trans module from channel-last atoms (B, T, T, D2), fwd+bwd, causal."""
    import torch.nn as nn
    from nesyseq.plugins.layers.folnet_ops import Trans
    dtype = DTYPES[dname]
    set_tf32(dname == "tf32")
    D2 = args.heads
    B = args.batch or max(1, 4096 // T)
    torch.manual_seed(0)
    mod = Trans(D2, D2, 1, impl="triton").to(device, dtype)
    writer = nn.Linear(D2, D2).to(device, dtype)
    lin_k, lin_v = mod.kernel, mod.premise
    u2n = torch.randn(B, T, T, D2, device=device, dtype=dtype)
    mask = TransMask("causal")
    Kd = torch.empty(B, D2, T, T, device=device, dtype=dtype)
    masks = allowed_masks(Kd, Kd, mask)
    del Kd
    dout = torch.randn(B, T, T, D2, device=device, dtype=dtype)

    def channel_last_eager(u):   # the naive channel-last module, same dtype, eager op
        K = lin_k(u).permute(0, 3, 1, 2)
        v = lin_v(u).permute(0, 3, 1, 2)
        return writer(trans_eager(K, v, mask, masks=masks).permute(0, 2, 3, 1))

    def trans_module(impl):
        def f(u):
            mod.impl = impl
            return mod(u, mod.rows(u), mask, writer=writer)
        return f

    rows = []
    eager_total = None
    for name, f in (("module: channel-last eager", channel_last_eager),
                    ("module: Trans (triton)", trans_module("triton")),
                    ("module: Trans (auto)", trans_module("auto"))):
        r = Row(T=T, B=B, kind="causal module", dtype=dname, impl=name)
        r["fwd"], r["bwd"], r["mib"] = fwd_bwd_times(lambda u, _a, _b: f(u), [u2n, None, None], dout, device, args)
        r["total"] = r["fwd"] + r["bwd"]
        eager_total = eager_total or r["total"]
        r["speedup"] = eager_total / r["total"]
        r["tflops"] = r["gbs"] = r["gbs_b"] = r["err"] = float("nan")
        rows.append(r)
        print(format_row(r), flush=True)
    set_tf32(False)
    return rows


HEADER = ("| T | B | mask | dtype | impl | fwd ms | bwd ms | fwd+bwd ms | vs eager | useful TFLOP/s | "
          "fwd GB/s (% HBM) | bwd GB/s (% HBM) | peak MiB | rel err vs fp64 |")
RULE = "|" + "---|" * (HEADER.count("|") - 1)
PEAK = [float("nan")]


def _f(x, spec, suffix=""):
    return "n/a" if x != x else format(x, spec) + suffix


def _bw(x):
    if x != x:
        return "n/a"
    pct = 100 * x * 1e9 / PEAK[0]
    return f"{x:.0f} ({pct:.0f}%)" if pct == pct else f"{x:.0f}"


def format_row(r) -> str:
    return (f"| {r['T']} | {r['B']} | {r['kind']} | {r['dtype']} | {r['impl']} | {_f(r['fwd'], '.3f')} | "
            f"{_f(r['bwd'], '.3f')} | {_f(r['total'], '.3f')} | {_f(r['speedup'], '.2f', 'x')} | "
            f"{_f(r['tflops'], '.1f')} | {_bw(r['gbs'])} | {_bw(r['gbs_b'])} | {_f(r['mib'], '.0f')} | "
            f"{_f(r['err'], '.1e')} |")


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--T", type=int, nargs="+", default=[256, 512, 1024, 2048])
    ap.add_argument("--kinds", nargs="+", default=list(KINDS), choices=KINDS)
    ap.add_argument("--dtypes", nargs="+", default=["bf16"], choices=list(DTYPES),
                    help="tf32 = fp32 inputs with torch's TF32 matmul setting on")
    ap.add_argument("--fp32-cases", nargs="*", default=["causal:1024", "none:512"],
                    help="kind:T cases also run in fp32 (IEEE) and tf32")
    ap.add_argument("--padding-cases", nargs="*", default=["causal:1024", "encdec:1024"],
                    help="kind:T cases also run with ragged padding (bf16)")
    ap.add_argument("--decode", type=int, nargs="*", default=[1024, 2048], help="T of the Tq=1 decode rows (causal)")
    ap.add_argument("--module", type=int, nargs="*", default=[512, 1024], help="T of the whole-module rows")
    ap.add_argument("--compile", nargs="*", default=["causal:1024:bf16", "none:512:bf16"],
                    help="kind:T:dtype cases that also time torch.compile(max-autotune)")
    ap.add_argument("--heads", type=int, default=64)
    ap.add_argument("--batch", type=int, default=0, help="0: max(1, 4096 // T)")
    ap.add_argument("--warmup", type=int, default=3)
    ap.add_argument("--rep", type=int, default=10)
    ap.add_argument("--no-check", dest="check", action="store_false", help="skip the error column")
    ap.add_argument("--no-kernel-times", dest="kernel_times", action="store_false")
    ap.add_argument("--markdown", help="also write the tables to this file")
    ap.add_argument("--smoke", action="store_true",
                    help="CPU + TRITON_INTERPRET=1: tiny sizes, to exercise this script (no figures)")
    args = ap.parse_args(argv)

    device = torch.device("cuda" if torch.cuda.is_available() else "cpu")
    if args.smoke:
        if torch.cuda.is_available() or not tt.interpreter_usable():
            sys.exit("--smoke is for CPU runs with TRITON_INTERPRET=1 set before starting Python")
        args.T, args.heads, args.batch, args.rep, args.warmup = [32], 2, 2, 1, 0
        args.dtypes = ["fp16"]   # no bf16 in the interpreter
        args.fp32_cases = ["causal:32"]
        args.padding_cases = ["causal:32", "encdec:32"]
        args.decode, args.module, args.compile = [32], [16], []
        print("SMOKE RUN on the CPU Triton interpreter: the times below are NOT performance figures.")
    elif not torch.cuda.is_available():
        print("No CUDA device: the Triton kernels cannot be timed here. Run on a CUDA machine, "
              "or use --smoke with TRITON_INTERPRET=1 to exercise the script.")
        return 0
    args.compile = set(args.compile)
    PEAK[0] = hbm_peak()
    dev = torch.cuda.get_device_name() if torch.cuda.is_available() else "CPU (Triton interpreter smoke run)"
    import triton
    meta = (f"device: {dev}; torch {torch.__version__}; triton {triton.__version__}; H={args.heads}; "
            f"nominal HBM {PEAK[0] / 1e12:.2f} TB/s; autotune={'on' if tt._autotune_enabled() else 'off'}")
    print(meta)
    print(HEADER)
    print(RULE)
    rows = []
    for T in args.T:
        for kind in args.kinds:
            for dname in args.dtypes:
                rows += bench_case(args, device, kind, T, dname, padding=False)
    for spec in args.fp32_cases:
        kind, T = spec.split(":")
        for dname in ("fp32", "tf32"):
            rows += bench_case(args, device, kind, int(T), dname, padding=False)
    for spec in args.padding_cases:
        kind, T = spec.split(":")
        rows += bench_case(args, device, kind, int(T), args.dtypes[0], padding=True)
    for T in args.decode:
        rows += bench_case(args, device, "causal", T, args.dtypes[0], padding=False, decode=True)
    for T in args.module:
        rows += module_rows(args, device, T, args.dtypes[0])
    ktab = [f"| {r['T']} | {r['kind']} | {r['dtype']} | {r['kernels']} |" for r in rows if r.get("kernels")]
    if ktab:
        print("\nper-kernel device time (ms), one forward + backward (profiler):")
        print("| T | mask | dtype | kernels |\n|---|---|---|---|")
        print("\n".join(ktab))
    if args.markdown:
        with open(args.markdown, "w") as f:
            f.write(meta + "\n\n" + HEADER + "\n" + RULE + "\n" + "\n".join(format_row(r) for r in rows) + "\n")
            if ktab:
                f.write("\n| T | mask | dtype | per-kernel ms (fwd+bwd) |\n|---|---|---|---|\n" + "\n".join(ktab) + "\n")
    bound = {"fp16": 1e-2, "bf16": 2e-2, "tf32": 5e-3, "fp32": 1e-4}
    bad = [r for r in rows if r["impl"] == "triton" and args.check and not (r["err"] < bound[r["dtype"]])]
    if bad:
        print(f"WARNING: {len(bad)} triton rows exceed the error bound", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
