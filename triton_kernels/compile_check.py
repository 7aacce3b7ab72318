"""Compile the trans kernels for a CUDA target without a GPU (ahead-of-time).

The Triton interpreter is lenient about types and control flow; the real
compiler is not.  This runs the full Triton -> PTX -> cubin pipeline (Triton's
bundled ptxas) for chosen kernel variants and reports registers, spills and
shared memory from ``ptxas -v``.  It needs no GPU, so it can run in CI.

    python -m triton_kernels.compile_check [--arch 90] [--quick]

It proves the kernels *compile* for the target; it says nothing about speed
or about results on a device.
"""
from __future__ import annotations

import argparse
import os
import re
import subprocess
import tempfile
import time
from typing import Dict, List, Optional

_TRITON_DTYPES = {"fp16": "*fp16", "bf16": "*bf16", "fp32": "*fp32"}
# pointer arguments and their element types ('X' = the input dtype)
_PTRS = {
    "K": "X", "V": "X", "VE": "X", "O": "X", "DO": "X", "DK": "X", "DV": "X",
    "LSE": "*fp32", "DELTA": "*fp32", "DVALID": "*i8", "EVALID": "*i8",
    "DLO": "*i32", "DHI": "*i32", "ELO": "*i32", "EHI": "*i32", "PLEN": "*i32",
    "DSPAN": "*i8", "ESPAN": "*i8",
}
# strides of the last (contiguous) dimension: the wrapper guarantees 1, and the
# JIT specialises an integer argument equal to 1 to a constant as well
_UNIT_STRIDES = ("sKa", "sVy", "sEy", "sOy", "sGy", "sDa", "sWy")


def compile_kernel(name: str, dtype: str, constexprs: Dict[str, object], arch: int = 90,
                   num_warps: int = 4, num_stages: int = 2):
    """Compile one kernel variant; returns the CompiledKernel."""
    import triton
    from triton.backends.compiler import GPUTarget
    from triton.compiler import ASTSource

    from .trans_triton import _kernels

    fn = getattr(_kernels(False), name)
    sig, const = {}, dict(constexprs)
    for arg in fn.arg_names:
        if arg in const:
            sig[arg] = "constexpr"
        elif arg in _UNIT_STRIDES:
            sig[arg] = "constexpr"
            const[arg] = 1
        elif arg in _PTRS:
            t = _PTRS[arg]
            sig[arg] = _TRITON_DTYPES[dtype] if t == "X" else t
        else:
            sig[arg] = "i32"
    src = ASTSource(fn, sig, const)
    return triton.compile(src, target=GPUTarget("cuda", arch, 32),
                          options=dict(num_warps=num_warps, num_stages=num_stages))


def ptxas_report(kernel, arch: int = 90) -> str:
    """Registers, stack (spills) and shared memory of the cubin Triton built."""
    import triton.backends.nvidia as nv

    cuobjdump = os.path.join(os.path.dirname(nv.__file__), "bin", "cuobjdump")
    with tempfile.TemporaryDirectory() as d:
        p = os.path.join(d, "k.cubin")
        with open(p, "wb") as f:
            f.write(kernel.asm["cubin"])
        r = subprocess.run([cuobjdump, "--dump-resource-usage", p], capture_output=True, text=True)
    m = re.search(r"REG:(\d+) STACK:(\d+) SHARED:(\d+) LOCAL:(\d+)", r.stdout)
    if not m:
        return "resource usage unavailable"
    return (f"REG {m.group(1)}, STACK {m.group(2)} B, LOCAL {m.group(4)} B, "
            f"dynamic smem {kernel.metadata.shared} B")


def variants(quick: bool) -> List[tuple]:
    """(kernel, dtype, constexprs, warps, stages) covering every code path."""
    from .trans_triton import default_config

    out = []
    kinds = [(1, True, False), (3, True, True)] if quick else \
        [(0, False, False), (0, True, False), (1, False, False), (1, True, False), (2, True, False),
         (3, False, False), (3, True, True)]
    dtypes = ["fp16"] if quick else ["fp16", "bf16", "fp32"]
    for dtype in dtypes:
        import torch
        cfg = default_config(T=1024, dtype={"fp16": torch.float16, "bf16": torch.bfloat16, "fp32": torch.float32}[dtype])
        # fp32: IEEE by default (torch.backends.cuda.matmul.allow_tf32 is off), TF32 when enabled
        for prec in (("ieee", "tf32") if dtype == "fp32" else ("ieee",)):
            for kind, dpad, epad in kinds:
                m = dict(KIND=kind, HAS_DPAD=dpad, HAS_EPAD=epad)
                if prec == "ieee":
                    out.append(("_lse_kernel", dtype, dict(m, BX=cfg.lse_block_x, BA=cfg.lse_block_a), 4, 1))
                out.append(("_fwd_kernel", dtype, dict(m, BX=cfg.block_x, BY=cfg.block_y, BA=cfg.block_a,
                                                       DOT_PREC=prec), cfg.num_warps, cfg.num_stages))
                for seg in ((0, 1) if kind == 3 else (1,)):
                    out.append(("_dk_kernel", dtype, dict(m, SEG=seg, BX=cfg.dk_block_x, BY=cfg.dk_block_y,
                                                          BA=cfg.dk_block_a, DOT_PREC=prec),
                                cfg.dk_num_warps, cfg.dk_num_stages))
                    out.append(("_dv_kernel", dtype, dict(m, SEG=seg, BX=cfg.dv_block_x, BY=cfg.dv_block_y,
                                                          BA=cfg.dv_block_a, DOT_PREC=prec),
                                cfg.dv_num_warps, cfg.dv_num_stages))
        if dtype != "fp32" and not quick:  # the smaller forward tiles used below T = 512
            small = default_config(torch.float16, T=256)
            for kind, dpad, epad in kinds:
                out.append(("_fwd_kernel", dtype, dict(KIND=kind, HAS_DPAD=dpad, HAS_EPAD=epad, BX=small.block_x,
                                                       BY=small.block_y, BA=small.block_a, DOT_PREC=prec),
                            small.num_warps, small.num_stages))
        out.append(("_delta_kernel", dtype, dict(BX=32, BY=64), 4, 1))
    return out


def main(argv: Optional[List[str]] = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--arch", type=int, default=90, help="CUDA compute capability x10 (90 = H100/H200)")
    ap.add_argument("--quick", action="store_true", help="fp16, causal+padding and encdec+padding only")
    args = ap.parse_args(argv)
    os.environ.setdefault("TRITON_DEFAULT_FP_FUSION", "1")
    import triton.language as tl
    if type(tl.zeros).__name__ == "InterpretedFunction":
        print("triton was imported with TRITON_INTERPRET=1; run compile_check in a process without it")
        return 2
    failures = 0
    for name, dtype, const, warps, stages in variants(args.quick):
        label = f"{name:14s} {dtype} " + " ".join(f"{k}={v}" for k, v in const.items())
        t0 = time.time()
        try:
            k = compile_kernel(name, dtype, const, args.arch, warps, stages)
            print(f"ok   {label}  [{ptxas_report(k, args.arch)}; {time.time() - t0:.0f}s]", flush=True)
        except Exception as e:  # report every failing variant, then fail
            failures += 1
            print(f"FAIL {label}: {type(e).__name__}: {str(e)[:2000]}", flush=True)
    print(f"{failures} failures")
    return 1 if failures else 0


if __name__ == "__main__":
    raise SystemExit(main())
