"""Launch-side logic of the Triton trans wrapper, checked on CPU without running kernels.

* ``_dot_precision`` follows torch's CUDA fp32-matmul setting through both the
  legacy flag and the torch >= 2.9 ``fp32_precision`` API, and never raises
  ("mix of the legacy and new APIs").
* The launch grids stay inside CUDA's limits (axis 0 < 2^31, axes 1-2 <= 65535)
  for B * D2 = 1024 * 64: the wrappers are run with a recorder in place of the
  kernels (``triton_kernels.compile_check.record_case``), so no GPU is needed.
* ``compile_check.specialize`` derives the same argument specialisation as
  Triton's JIT (when this Triton exposes it), so the AOT check compiles the
  binaries that run.
"""
import importlib.util

import pytest
import torch

from nesyseq.triton_kernels import trans_triton as tt
from nesyseq.triton_kernels.compile_check import record_case, specialize

MATMUL = torch.backends.cuda.matmul
NEW_API = hasattr(MATMUL, "fp32_precision")


@pytest.fixture
def restore_precision():
    """Put torch's fp32 matmul settings back (both APIs) after a test."""
    old_new = (MATMUL.fp32_precision, torch.backends.fp32_precision) if NEW_API else None
    yield
    if NEW_API:
        torch.backends.fp32_precision = old_new[1]
        MATMUL.fp32_precision = old_new[0]
    else:
        MATMUL.allow_tf32 = False


@pytest.mark.usefixtures("restore_precision")
def test_dot_precision_legacy_flag():
    MATMUL.allow_tf32 = True
    assert tt._dot_precision(torch.float32, interpret=False) == "tf32"
    assert tt._dot_precision(torch.float32, interpret=True) == "ieee"   # the interpreter has no TF32
    assert tt._dot_precision(torch.bfloat16, interpret=False) == "ieee"  # unused for 16-bit inputs
    MATMUL.allow_tf32 = False
    assert tt._dot_precision(torch.float32, interpret=False) == "ieee"


@pytest.mark.skipif(not NEW_API, reason="torch without torch.backends.cuda.matmul.fp32_precision")
@pytest.mark.usefixtures("restore_precision")
def test_dot_precision_new_api_does_not_raise():
    MATMUL.fp32_precision = "tf32"
    with pytest.raises(RuntimeError, match="legacy and new"):
        MATMUL.allow_tf32  # noqa: B018  (what the old code read)
    assert tt._dot_precision(torch.float32, interpret=False) == "tf32"
    MATMUL.fp32_precision = "ieee"
    assert tt._dot_precision(torch.float32, interpret=False) == "ieee"
    torch.backends.fp32_precision = "tf32"   # the global default, inherited by cuda.matmul
    MATMUL.fp32_precision = "none"
    assert tt._dot_precision(torch.float32, interpret=False) == "tf32"
    torch.set_float32_matmul_precision("high")
    assert tt._dot_precision(torch.float32, interpret=False) == "tf32"
    torch.set_float32_matmul_precision("highest")
    assert tt._dot_precision(torch.float32, interpret=False) == "ieee"


@pytest.mark.parametrize("kind", ["causal", "encdec"])
def test_grid_fits_cuda_limits_for_1024_sequences_of_64_channels(kind):
    B, H, T = 1024, 64, 32
    launches = record_case(kind, T, torch.float16, padding=True, B=B, H=H)
    names = {n for n, *_ in launches}
    assert {"_lse_kernel", "_fwd_kernel", "_delta_kernel", "_dk_kernel", "_dv_kernel"} <= names
    for name, grid, _, _ in launches:
        assert 1 <= len(grid) <= 3, (name, grid)
        assert grid[0] <= 2**31 - 1 and all(g <= 65535 for g in grid[1:]), (name, grid)
        # every (b, h) matrix gets its programs: the flat grid is tiles x B*H
        assert grid[0] % (B * H) == 0 and grid[0] >= B * H, (name, grid)


def test_grid_rejects_launches_beyond_axis0():
    assert tt._grid(3, 1024 * 64) == (3 * 65536,)
    with pytest.raises(tt.TransKernelUnavailable, match="split the batch"):
        tt._grid(2**16, 2**16)


@pytest.mark.skipif(importlib.util.find_spec("triton") is None, reason="triton not installed")
def test_specialisation_matches_triton_jit():
    try:
        from triton.backends.compiler import BaseBackend
        from triton.runtime.jit import native_specialize_impl
    except ImportError:
        pytest.skip("this Triton does not expose native_specialize_impl")
    args = [1, 0, 16, 17, 48, 2**33, 2**33 + 3, torch.zeros(4, dtype=torch.bfloat16),
            torch.zeros(8, dtype=torch.int8)[1:], torch.zeros(4, dtype=torch.float32), torch.zeros(2, dtype=torch.int32)]
    for a in args:
        want = native_specialize_impl(BaseBackend, a, False, True, True)
        assert specialize(a) == tuple(want), (a, want)
