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
"""
from .reference import MASK_KINDS, TransMask, allowed_masks, trans_reference
from . import trans_triton as _tt  # imports triton lazily
from .trans_triton import TransConfig, TransKernelUnavailable

TRANS_IMPLS = ("auto", "triton", "torch")


def _triton_module():
    """The wrapper module, or None when triton cannot be imported."""
    return _tt if _tt.triton_available() else None


def trans(K, v, mask=None, v_enc=None, impl: str = "auto"):
    """u_h(x, y) = sum_a softmax_a(K_h(x, ·))[a] v_h(a, y) under ``mask``.

    See ``triton_kernels.reference`` for shapes and mask semantics.
    """
    if impl not in TRANS_IMPLS:
        raise ValueError(f"--folnet-trans-impl={impl!r}; valid: {', '.join(TRANS_IMPLS)}")
    if impl == "torch":
        return trans_reference(K, v, mask, v_enc)
    if impl == "auto":
        # CPU tensors never touch triton (not even its import)
        if K.is_cuda and K.dtype in _tt.SUPPORTED_DTYPES and _triton_module() is not None:
            return _tt.trans_triton(K, v, mask, v_enc)
        return trans_reference(K, v, mask, v_enc)
    mod = _triton_module()
    # impl == "triton"
    if mod is None:
        raise TransKernelUnavailable("--folnet-trans-impl=triton: the triton package is not importable")
    return mod.trans_triton(K, v, mask, v_enc)


__all__ = ["MASK_KINDS", "TRANS_IMPLS", "TransConfig", "TransKernelUnavailable", "TransMask", "allowed_masks", "trans",
           "trans_reference"]
