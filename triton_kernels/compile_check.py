"""Compile the trans kernels for a CUDA target without a GPU (ahead-of-time).

The Triton interpreter is lenient about types and control flow; the real
compiler is not.  This runs the full Triton -> PTX -> cubin pipeline (Triton's
bundled ptxas) for chosen kernel variants and reports registers, spills and
shared memory from the cubin.  It needs no GPU, so it can run in CI.

    python -m nesyseq.triton_kernels.compile_check [--arch 90] [--quick]

The binaries are the ones the runtime would build: each case runs the real
launch wrappers (``trans_triton._forward`` / ``_backward``) on CPU tensors of the
case's shape with a recorder in place of the kernels, and every recorded launch
is compiled with the argument specialisation Triton's JIT derives at launch
(``specialize``: pointers and integers divisible by 16 get the
``tt.divisibility = 16`` hint, integers equal to 1 become constants).  Cases with
T a multiple of 16 therefore compile the aligned binaries, and the ``T=1000``
cases the unaligned ones.

It proves the kernels *compile* for the target; it says nothing about speed
or about results on a device.
"""
from __future__ import annotations

import argparse
import contextlib
import os
import re
import subprocess
import tempfile
import time
from typing import Dict, List, Optional, Tuple

import torch

_TRITON_PTR = {torch.float16: "*fp16", torch.bfloat16: "*bf16", torch.float32: "*fp32",
               torch.int8: "*i8", torch.int32: "*i32", torch.int64: "*i64"}
_DTYPES = {"fp16": torch.float16, "bf16": torch.bfloat16, "fp32": torch.float32}


def specialize(arg) -> Tuple[str, object]:
    """(type, specialisation) of one launch argument, as Triton's JIT derives it:
    tensors -> ('*dtype', 'D' when the data pointer is 16-byte aligned); ints ->
    ('constexpr', 1) for 1, else ('i32' or 'i64', 'D' when divisible by 16);
    bools -> 'i1'."""
    if isinstance(arg, torch.Tensor):
        return _TRITON_PTR[arg.dtype], ("D" if arg.data_ptr() % 16 == 0 else "")
    if isinstance(arg, bool):
        return "i1", ""
    if isinstance(arg, int):
        if arg == 1:
            return "constexpr", 1
        kind = "i32" if -2**31 <= arg < 2**31 else "i64"
        return kind, ("D" if arg % 16 == 0 else "")
    raise TypeError(f"unexpected launch argument {type(arg).__name__}")


class _Recorder:
    """Stands in for the kernel module: ``kernel[grid](*args, **kw)`` records the launch."""

    def __init__(self):
        self.launches = []

    def __getattr__(self, name):
        rec = self

        class _K:
            def __getitem__(self, grid):
                def launch(*args, **kw):
                    rec.launches.append((name, tuple(grid), args, kw))
                return launch
        return _K()


@contextlib.contextmanager
def _recording(tf32: bool):
    from . import trans_triton as tt
    rec = _Recorder()
    saved_mod, saved_prec = tt._KERNEL_MODULES.get(False), tt._cuda_matmul_allows_tf32
    tt._KERNEL_MODULES[False] = rec
    tt._cuda_matmul_allows_tf32 = lambda: tf32
    try:
        yield rec
    finally:
        if saved_mod is None:
            tt._KERNEL_MODULES.pop(False, None)
        else:
            tt._KERNEL_MODULES[False] = saved_mod
        tt._cuda_matmul_allows_tf32 = saved_prec


def record_case(kind: str, T: int, dtype: torch.dtype, padding: bool, tf32: bool = False, B: int = 2, H: int = 64,
                config=None):
    """Launches (name, grid, args, kwargs) of one forward + backward on CPU tensors
    of the given shape, with ``config`` or the default tile configuration for (dtype, T)."""
    from . import trans_triton as tt
    from .reference import TransMask

    Ti = Tt = T // 2 if kind == "encdec" else 0
    Tt = Tt or T
    kp = torch.zeros(B, Tt, dtype=torch.bool)
    ep = torch.zeros(B, Ti, dtype=torch.bool) if kind == "encdec" else None
    if padding:
        kp[0, Tt - 5:] = True
        if ep is not None:
            ep[1, :3] = True
    mask = TransMask(kind, key_padding=kp if padding else None, enc_padding=ep if padding else None,
                     prefix_lengths=torch.full((B,), T // 3) if kind == "prefix" else None)
    A = Ti + Tt
    K = torch.empty(B, H, Tt, A, dtype=dtype)
    v = torch.empty(B, H, Tt, A, dtype=dtype)
    ve = torch.empty(B, H, Ti, Ti, dtype=dtype) if kind == "encdec" else None
    pr = tt._prepare(K, v, mask, ve)
    cfg = config or tt.default_config(dtype, A)
    with _recording(tf32) as rec:
        out, lse = tt._forward(K, v, ve, pr, cfg, False)
        tt._backward(torch.empty_like(out), K, v, ve, out, lse, pr, cfg, False)
    return rec.launches


def compile_launch(name: str, args, kw, arch: int = 90):
    """Compile one recorded launch exactly as the JIT would specialise it."""
    import triton
    from triton.backends.compiler import BaseBackend, GPUTarget
    from triton.compiler import ASTSource

    from .trans_triton import _kernels

    fn = getattr(_kernels(False), name)
    kw = dict(kw)
    options = dict(num_warps=kw.pop("num_warps", 4), num_stages=kw.pop("num_stages", 3))
    bound = dict(zip(fn.arg_names, args))
    bound.update(kw)
    sig, const, attrs = {}, {}, {}
    for i, arg_name in enumerate(fn.arg_names):
        val = bound[arg_name]
        if arg_name in kw:
            sig[arg_name] = "constexpr"
            const[(i,)] = val
            continue
        ty, spec = specialize(val)
        sig[arg_name] = ty
        if ty == "constexpr":
            const[(i,)] = spec
        elif spec:
            attrs[(i,)] = BaseBackend.parse_attr(spec)
    src = ASTSource(fn, sig, const, attrs)
    return triton.compile(src, target=GPUTarget("cuda", arch, 32), options=options)


def ptxas_report(kernel) -> str:
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


def cases(quick: bool) -> List[tuple]:
    """(kind, T, dtype name, padding, tf32) cases whose launches are compiled."""
    if quick:
        # CI subset: every kernel and both dK/dV segments, in each input dtype
        return [("causal", 1024, "fp16", True, False), ("encdec", 1024, "fp16", True, False),
                ("causal", 1024, "bf16", True, False), ("causal", 1024, "fp32", True, True)]
    out = []
    for dt in ("fp16", "bf16", "fp32"):
        for prec in ((False, True) if dt == "fp32" else (False,)):
            for kind in ("none", "causal", "prefix", "encdec"):
                for pad in (False, True):
                    out.append((kind, 1024, dt, pad, prec))
            out.append(("causal", 1000, dt, True, prec))        # unaligned sizes: no divisibility hints
            if dt != "fp32":
                out.append(("causal", 256, dt, False, prec))    # the smaller tiles below T = 512
    return out


def main(argv: Optional[List[str]] = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--arch", type=int, default=90, help="CUDA compute capability x10 (90 = H100/H200)")
    ap.add_argument("--quick", action="store_true",
                    help="CI subset: fp16 causal+padding and encdec+padding, bf16 causal+padding, "
                         "fp32 (TF32) causal+padding")
    args = ap.parse_args(argv)
    os.environ.setdefault("TRITON_DEFAULT_FP_FUSION", "1")
    import triton.language as tl
    if type(tl.zeros).__name__ == "InterpretedFunction":
        print("triton was imported with TRITON_INTERPRET=1; run compile_check in a process without it")
        return 2
    failures = 0
    seen: Dict[str, bool] = {}
    for kind, T, dname, pad, tf32 in cases(args.quick):
        for name, grid, largs, kw in record_case(kind, T, _DTYPES[dname], pad, tf32):
            sig = " ".join(f"{specialize(a)}" for a in largs) + repr(sorted(kw.items()))
            key = name + sig
            if key in seen:
                continue
            seen[key] = True
            consts = " ".join(f"{k}={v}" for k, v in kw.items() if k not in ("num_warps", "num_stages"))
            label = f"{name:14s} {dname} T={T} {consts}"
            t0 = time.time()
            try:
                k = compile_launch(name, largs, kw, args.arch)
                print(f"ok   {label}  [{ptxas_report(k)}; {time.time() - t0:.0f}s]", flush=True)
            except Exception as e:  # report every failing variant, then fail
                failures += 1
                print(f"FAIL {label}: {type(e).__name__}: {str(e)[:2000]}", flush=True)
    print(f"{len(seen)} variants, {failures} failures")
    return 1 if failures else 0


if __name__ == "__main__":
    raise SystemExit(main())
