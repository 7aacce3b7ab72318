"""Fused kernels for FOLNet's trans operator, with an exact PyTorch reference.

FOLNet code calls ``triton_kernels.trans(K, v, mask)``; it picks the Triton
kernel on CUDA when Triton is available and the reference everywhere else.
``impl`` forces one path ('auto', 'triton' or 'torch').

    impl='auto'    Triton kernels for CUDA tensors in fp32/fp16/bf16 when the
                   triton package imports; the reference otherwise (CPU, fp64,
                   no triton).  CPU tensors always take the reference under
                   'auto', even with TRITON_INTERPRET=1.
    impl='triton'  the kernels, or a clear ``TransKernelUnavailable`` error when
                   they cannot run (CPU tensors without TRITON_INTERPRET=1, fp64,
                   no triton).  With TRITON_INTERPRET=1 CPU tensors run the
                   kernels under the Triton interpreter (tests only; slow).
    impl='torch'   the reference.
    impl='eager'   the same-dtype eager PyTorch path (``triton_kernels.eager``):
                   masked softmax, batched matmul, row mask.

On CUDA, 'auto' does not take the kernels blindly: ``auto_path`` sends the
unmasked case at long lengths, and in float32 at any length, to the eager path,
where the H100 benchmark (docs/benchmarks.md) measured the fused backward slower
than cuBLAS.
"""
import torch

from .devices import activation_dtype, autocast_dtype
from .eager import trans_eager
from .reference import MASK_KINDS, TransMask, allowed_masks, trans_reference
from . import trans_triton as _tt  # imports triton lazily
from .trans_triton import TransConfig, TransKernelUnavailable, trans_from_atoms

TRANS_IMPLS = ("auto", "triton", "torch", "eager")

# Unmasked trans with at least this many columns a runs eagerly under impl='auto' on CUDA.
# Measured on an H100 (bf16, D2 = 64, docs/benchmarks.md): kernel/eager forward+backward
# 1.16x at T = 512 but 0.72x at T = 1024 (its dV/dK backward loses to cuBLAS there);
# every masked kind won at both lengths (2.0-2.1x).  768 sits between the two measured
# lengths; the crossover itself has not been measured.
EAGER_UNMASKED_MIN_COLUMNS = 768
# Unmasked float32 trans runs eagerly at every length under impl='auto' on CUDA.  Measured on
# an H100 (2026-11-27, main's kernels, docs/benchmarks.md), T = 512, forward+backward: kernel/
# eager 0.52x in IEEE fp32 (its dK kernel alone 18 ms) and 0.96x with TF32; causal float32 at
# T = 1024 won (1.74x IEEE, 1.91x TF32), so masked float32 keeps the kernels.  Shorter
# unmasked lengths were not measured.
EAGER_UNMASKED_DTYPES = (torch.float32,)


def auto_path(K, mask) -> str:
    """'triton' or 'eager': the CUDA path impl='auto' takes for kernel logits K (B, H, Tq, A)."""
    kind = mask.kind if mask is not None else "none"
    # key padding does not change the choice: on the H100 (bf16, T = 1024) the kernels still won with
    # it (causal 1.87x, encdec 1.20x, against 2.36x / 2.05x without; docs/benchmarks.md)
    if kind == "none" and (K.shape[-1] >= EAGER_UNMASKED_MIN_COLUMNS or K.dtype in EAGER_UNMASKED_DTYPES):
        return "eager"
    return "triton"


def trans_path(K_dtype, device_type: str, K_shape, mask, impl: str, triton_ok=None) -> str:
    """The path ``trans`` takes for logits of this dtype / device type / shape: 'triton', 'eager' or 'torch'.

    The one dispatch table of trans (``trans`` and FOLNet's ``Trans`` both read it).  'auto' takes
    the kernels only for CUDA tensors of a kernel dtype when triton imports (``triton_ok``, a test
    may pass it), and then ``auto_path`` may still choose eager; CPU tensors never touch triton.
    """
    if impl not in TRANS_IMPLS:
        raise ValueError(f"--folnet-trans-impl={impl!r}; valid: {', '.join(TRANS_IMPLS)}")
    if impl != "auto":
        return impl
    if triton_ok is None:
        triton_ok = device_type == "cuda" and _triton_module() is not None
    if device_type == "cuda" and K_dtype in _tt.SUPPORTED_DTYPES and triton_ok:
        return auto_path(torch.empty(K_shape, dtype=K_dtype, device="meta"), mask)
    return "torch"


def _triton_module():
    """The wrapper module, or None when triton cannot be imported."""
    return _tt if _tt.triton_available() else None


def trans(K, v, mask=None, v_enc=None, impl: str = "auto"):
    """u_h(x, y) = sum_a softmax_a(K_h(x, ·))[a] v_h(a, y) under ``mask``.

    See ``triton_kernels.reference`` for shapes and mask semantics.
    """
    path = trans_path(K.dtype, K.device.type, K.shape, mask, impl)
    if path == "torch":
        return trans_reference(K, v, mask, v_enc)
    if path == "eager":
        return trans_eager(K, v, mask, v_enc)
    if _triton_module() is None:
        raise TransKernelUnavailable("--folnet-trans-impl=triton: the triton package is not importable")
    return _tt.trans_triton(K, v, mask, v_enc)


__all__ = ["EAGER_UNMASKED_DTYPES", "EAGER_UNMASKED_MIN_COLUMNS", "MASK_KINDS", "TRANS_IMPLS", "activation_dtype", "auto_path", "autocast_dtype", "trans_eager", "TransConfig", "TransKernelUnavailable", "TransMask", "allowed_masks", "trans", "trans_from_atoms", "trans_path",
           "trans_reference"]
