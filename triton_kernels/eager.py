"""Same-dtype eager PyTorch trans: masked softmax, then a batched matmul, then the row mask.

This is the honest baseline for the fused kernels (``benchmarks/bench_trans.py``)
and the path ``impl='auto'`` dispatches to where it measured faster than the
kernels (see ``triton_kernels.trans``).  Unlike ``trans_reference`` (fp32
arithmetic whatever the input dtype, for testing), it computes in the input
dtype the way a plain PyTorch model would: softmax in the input dtype (torch
accumulates it in fp32 internally), the matmul with the input dtype's tensor
cores and fp32 accumulation.

    p     = softmax_a( K(x, a) masked to the allowed a )      (B, H, Tq, A)
    p     = dropout(p)            (only with ``dropout`` > 0: training, as folnet.py:502-503)
    out   = p @ (v masked to the allowed (a, y))               (B, H, Tq, Y)
    out(x, ·) = 0 for rows x with no allowed a

Shapes and mask semantics are ``triton_kernels.reference``'s.
"""
from __future__ import annotations

from typing import Optional

import torch
import torch.nn.functional as F
from torch import Tensor

from .reference import TransMask, allowed_masks


def premise(v: Tensor, v_enc: Optional[Tensor], mask: TransMask) -> Tensor:
    """The full premise V over the (concatenated, for encdec) a and y axes."""
    if mask.kind != "encdec":
        return v
    B, H, Tt, _ = v.shape
    Ti = v_enc.shape[-1]
    top = torch.cat([v_enc.to(v.dtype), v.new_zeros(B, H, Ti, Tt)], dim=-1)
    return torch.cat([top, v], dim=-2)


def trans_eager(K: Tensor, v: Tensor, mask: Optional[TransMask] = None, v_enc: Optional[Tensor] = None,
                masks=None, dropout: float = 0.0) -> Tensor:
    """Masked softmax -> [dropout] -> matmul -> row mask, in K's dtype.  ``masks`` = (k_ok, v_ok)
    from ``allowed_masks`` may be passed in to keep their construction out of timings.
    ``dropout`` > 0 drops entries of the softmaxed kernel p (B, H, Tq, A) and rescales
    the kept ones by 1 / (1 - dropout), like ``F.dropout`` in training mode."""
    mask = mask or TransMask()
    k_ok, v_ok = masks if masks is not None else allowed_masks(K, v, mask, v_enc)
    k_ok, v_ok = k_ok[:, None], v_ok[:, None]                     # broadcast over heads
    V = premise(v.to(K.dtype), v_enc, mask)
    p = torch.softmax(K.masked_fill(~k_ok, torch.finfo(K.dtype).min), dim=-1)
    if dropout > 0:
        p = F.dropout(p, p=dropout, training=True)
    out = torch.matmul(p, V.masked_fill(~v_ok, 0))
    return out.masked_fill(~k_ok.any(-1, keepdim=True), 0)
