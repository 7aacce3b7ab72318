"""The Triton trans kernels compile for sm_90 (H100/H200) without a GPU.

Runs ``python -m nesyseq.triton_kernels.compile_check --quick`` in a fresh process
without TRITON_INTERPRET (the interpreter tests set it in this process): the
real Triton -> PTX -> cubin pipeline, with Triton's bundled ptxas, on the
launches the wrappers make (with the divisibility hints Triton's JIT adds at
run time) for fp16 causal+padding and encdec+padding (every kernel and both
dK/dV segments), bf16 causal+padding and fp32 (TF32) causal+padding.  Nothing
runs on a device.  The full matrix (all kinds, padding on
and off, fp16/bf16/fp32) is ``python -m nesyseq.triton_kernels.compile_check``.
"""
import os
import re
import subprocess
import sys

import importlib.util

import pytest

# find_spec, not ``import triton``: importing triton here, at collection, would
# stop test_trans_triton.py from putting triton in interpreter mode in-process.
pytestmark = [pytest.mark.slow,
              pytest.mark.skipif(importlib.util.find_spec("triton") is None, reason="triton not installed")]


def test_kernels_compile_for_sm90_without_spills():
    env = {k: v for k, v in os.environ.items() if k != "TRITON_INTERPRET"}
    env.setdefault("TRITON_DEFAULT_FP_FUSION", "1")
    root = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
    r = subprocess.run([sys.executable, "-m", "nesyseq.triton_kernels.compile_check", "--quick"], cwd=root, env=env,
                       capture_output=True, text=True, timeout=1200)
    assert r.returncode == 0, r.stdout[-4000:] + r.stderr[-4000:]
    ok = [line for line in r.stdout.splitlines() if line.startswith("ok ")]
    assert len(ok) >= 20, r.stdout
    for dtype in ("fp16", "bf16", "fp32"):
        assert any(f" {dtype} " in line for line in ok), dtype
    stacks = [int(m) for m in re.findall(r"STACK (\d+) B", r.stdout)]
    assert len(stacks) == len(ok) and max(stacks) == 0, "register spills:\n" + r.stdout
