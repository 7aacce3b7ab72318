"""Tile-configuration sweep for the Triton trans kernels, one kernel group at a time.

    python benchmarks/tune_trans.py                       # CUDA: time every candidate
    python benchmarks/tune_trans.py --compile-only        # any machine: registers/spills for sm_90

Forward (lse + fwd), dK (delta + dk) and dV are independent launches with their
own TransConfig fields, so each group's candidates are timed separately (median of
CUDA-event timings) on the cases given, with the other groups at their defaults.
The candidates follow the issue's list: wider output tiles with a 64-wide reduction
block (fewer exp recomputations per (x, a)), more/less pipelining, and dV loading
K^T instead of transposing p.  The best of each group is printed, per case.
"""
from __future__ import annotations

import argparse
import dataclasses
import json
import os
import sys

import torch

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), ".."))

from nesyseq.triton_kernels import trans_triton as tt  # noqa: E402

FWD = [dict(block_x=bx, block_y=by, block_a=ba, num_warps=w, num_stages=st) for bx, by, ba, w, st in [
    (128, 128, 32, 8, 3), (128, 128, 64, 8, 3), (128, 128, 64, 8, 2), (128, 256, 64, 8, 2), (128, 256, 32, 8, 3),
    (64, 256, 64, 8, 3), (64, 128, 64, 4, 3), (256, 128, 32, 8, 3)]]
DK = [dict(dk_block_x=bx, dk_block_y=by, dk_block_a=ba, dk_num_warps=w, dk_num_stages=st) for bx, by, ba, w, st in [
    (64, 64, 64, 8, 2), (64, 64, 64, 4, 3), (64, 128, 64, 8, 2), (128, 64, 64, 8, 2), (64, 64, 128, 8, 2),
    (128, 128, 64, 8, 2)]]
DV = [dict(dv_block_x=bx, dv_block_y=by, dv_block_a=ba, dv_num_warps=w, dv_num_stages=st, dv_load_kt=kt)
      for bx, by, ba, w, st in [(64, 128, 64, 8, 2), (64, 128, 64, 8, 3), (64, 128, 128, 8, 2), (128, 128, 64, 8, 2)]
      for kt in (False, True)]
DTYPES = {"fp16": torch.float16, "bf16": torch.bfloat16, "fp32": torch.float32}


def time_ms(fn, rep=20):
    for _ in range(3):
        fn()
    torch.cuda.synchronize()
    ts = []
    for _ in range(rep):
        s, e = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        s.record()
        fn()
        e.record()
        torch.cuda.synchronize()
        ts.append(s.elapsed_time(e))
    ts.sort()
    return ts[len(ts) // 2]


def run_case(kind, T, dname, H=64):
    from benchmarks_bench_trans import make_case
    dtype = DTYPES[dname]
    B = max(1, 4096 // T)
    K, v, ve, mask = make_case(kind, T, B, H, dtype, torch.device("cuda"), False)
    pr = tt._prepare(K, v, mask, ve if kind == "encdec" else None)
    ve = ve if kind == "encdec" else None
    base = tt.default_config(dtype, pr.Ti + pr.Tt)
    out, lse = tt._forward(K, v, ve, pr, base, False)
    dout = torch.randn_like(out)
    res = {}
    for group, cands in (("fwd", FWD), ("dk", DK), ("dv", DV)):
        times = []
        for c in cands:
            cfg = dataclasses.replace(base, **c)
            if group == "fwd":
                fn = lambda: tt._forward(K, v, ve, pr, cfg, False)  # noqa: E731
            elif group == "dk":
                fn = lambda: tt._backward(dout, K, v, ve, out, lse, pr, cfg, False, True, False, False)  # noqa: E731
            else:
                fn = lambda: tt._backward(dout, K, v, ve, out, lse, pr, cfg, False, False, True, True)  # noqa: E731
            try:
                ms = time_ms(fn)
            except Exception as e:  # noqa: BLE001  (out of shared memory etc.)
                print(f"  {group} {c}: FAILED {type(e).__name__}: {str(e)[:200]}", flush=True)
                continue
            times.append((ms, c))
            print(f"  {kind} T={T} {dname} {group} {ms:8.3f} ms  {c}", flush=True)
        times.sort(key=lambda t: t[0])
        default = next((ms for ms, c in times if all(getattr(base, k) == val for k, val in c.items())), None)
        res[group] = dict(best=times[0][1], best_ms=times[0][0], default_ms=default)
        print(f"BEST {kind} T={T} {dname} {group}: {times[0][0]:.3f} ms (default {default}) {times[0][1]}", flush=True)
    return res


def compile_only():
    from nesyseq.triton_kernels.compile_check import compile_launch, ptxas_report, record_case
    for dname in ("bf16",):
        base = tt.default_config(DTYPES[dname], 1024)
        for group, cands in (("fwd", FWD), ("dk", DK), ("dv", DV)):
            want = {"fwd": "_fwd_kernel", "dk": "_dk_kernel", "dv": "_dv_kernel"}[group]
            for c in cands:
                cfg = dataclasses.replace(base, **c)
                for name, _, a, kw in record_case("causal", 1024, DTYPES[dname], False, config=cfg):
                    if name == want:
                        try:
                            print(f"{group} {c}: {ptxas_report(compile_launch(name, a, kw))}", flush=True)
                        except Exception as e:  # noqa: BLE001
                            print(f"{group} {c}: FAIL {type(e).__name__} {str(e)[:150]}", flush=True)
                        break


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--cases", nargs="+", default=["causal:1024:bf16", "none:512:bf16"])
    ap.add_argument("--compile-only", action="store_true")
    ap.add_argument("--json", help="write the results here")
    args = ap.parse_args()
    if args.compile_only:
        compile_only()
        return 0
    import importlib.util
    spec = importlib.util.spec_from_file_location("benchmarks_bench_trans",
                                                  os.path.join(os.path.dirname(__file__), "bench_trans.py"))
    mod = importlib.util.module_from_spec(spec)
    sys.modules["benchmarks_bench_trans"] = mod
    spec.loader.exec_module(mod)
    print(f"device: {torch.cuda.get_device_name()}")
    out = {}
    for c in args.cases:
        kind, T, dname = c.split(":")
        out[c] = run_case(kind, int(T), dname)
    if args.json:
        with open(args.json, "w") as f:
            json.dump(out, f, indent=1)
    return 0


if __name__ == "__main__":
    sys.exit(main())
