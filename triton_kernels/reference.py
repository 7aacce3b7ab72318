"""Exact PyTorch reference for FOLNet's masked trans operator.

    u_h(x, y) = sum_a softmax_a( K_h(x, ·) )[a] * v_h(a, y)

The softmax runs only over the allowed a (see ``TransMask``); a row with no
allowed a gives zeros.  Everything here is plain tensor code, so it runs on any
device and dtype; it computes in fp32 (or fp64 when given fp64) and returns the
input dtype.  The Triton kernels in this folder are checked against it.

Shapes:
    self kinds (none / causal / prefix):
        K (B, H, Tq, T)   logits, row i is absolute position ``query_offset + i``
        v (B, H, T, T)    premise v(a, y)
        out (B, H, Tq, T)
    encdec (appendix A.5):
        K     (B, H, Tq, Ti + Tt)   a runs over [encoder I ; decoder T]
        v     (B, H, Tt, Ti + Tt)   decoder premise v^D(a, y), a in T, y in I ∪ T
        v_enc (B, H, Ti, Ti)        encoder premise v^E(a, y), a, y in I
        out   (B, H, Tq, Ti + Tt)
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Optional

import torch
from torch import Tensor

MASK_KINDS = ("none", "causal", "prefix", "encdec")


@dataclass(frozen=True)
class TransMask:
    """Which (x, a) kernel entries and (a, y) premise entries are allowed.

    kind            one of ``none``, ``causal``, ``prefix``, ``encdec``.
    key_padding     (B, T) bool, True marks padding of the self (decoder) sequence.
    prefix_lengths  (B,) long, kind ``prefix`` only: positions j < P_b form the
                    bidirectional prefix (absolute positions, padding included).
    enc_padding     (B, Ti) bool, kind ``encdec`` only: encoder padding.
    query_offset    absolute position of the first kernel row (incremental
                    decoding computes only the newest rows).

    Allowed relation rel(i, j) between positions of the self sequence:
        none:   always
        causal: j <= i
        prefix: j <= i or j < P_b
    and valid(i) = not key_padding[b, i].  Then
        kernel  K(x, a) is kept iff valid(x) and valid(a) and rel(x, a)
        premise v(a, y) is kept iff valid(a) and valid(y) and rel(a, y)
    For ``encdec`` the self sequence is the decoder (rel = causal); encoder
    columns a in I are always allowed when not padded, and the premise block
    (a in I, y in T) is zero.
    """

    kind: str = "none"
    key_padding: Optional[Tensor] = None
    prefix_lengths: Optional[Tensor] = None
    enc_padding: Optional[Tensor] = None
    query_offset: int = 0

    def __post_init__(self):
        if self.kind not in MASK_KINDS:
            raise ValueError(f"TransMask.kind={self.kind!r}; valid kinds: {', '.join(MASK_KINDS)}")
        if self.kind == "prefix" and self.prefix_lengths is None:
            raise ValueError("TransMask(kind='prefix') needs prefix_lengths (B,)")


def _rel(kind: str, rows: Tensor, cols: Tensor, prefix_lengths: Optional[Tensor]) -> Tensor:
    """rel(i, j) for absolute positions; returns (B or 1, len(rows), len(cols)) bool."""
    i = rows[:, None]
    j = cols[None, :]
    if kind == "none":
        return torch.ones(1, len(rows), len(cols), dtype=torch.bool, device=rows.device)
    causal = (j <= i)[None]
    if kind in ("causal", "encdec"):
        return causal
    # prefix: bidirectional among j < P_b
    P = prefix_lengths.to(rows.device)[:, None, None]
    return causal | (j[None] < P)


def _valid(padding: Optional[Tensor], B: int, T: int, device) -> Tensor:
    if padding is None:
        return torch.ones(B, T, dtype=torch.bool, device=device)
    return ~padding.to(device=device, dtype=torch.bool)


def allowed_masks(K: Tensor, v: Tensor, mask: TransMask, v_enc: Optional[Tensor] = None):
    """Boolean masks (B, Tq, A) for the kernel and (B, A, Y) for the premise,
    both over the full (concatenated, for encdec) axes."""
    B, _, Tq, A = K.shape
    dev = K.device
    rows = torch.arange(Tq, device=dev) + mask.query_offset
    if mask.kind != "encdec":
        T = v.shape[-1]
        valid = _valid(mask.key_padding, B, T, dev)
        cols = torch.arange(T, device=dev)
        vq = valid[:, rows]
        k_ok = vq[:, :, None] & valid[:, None, :] & _rel(mask.kind, rows, cols, mask.prefix_lengths)
        v_ok = valid[:, :, None] & valid[:, None, :] & _rel(mask.kind, cols, cols, mask.prefix_lengths)
        return k_ok, v_ok
    Ti = v_enc.shape[-1]
    Tt = v.shape[-2]
    vd = _valid(mask.key_padding, B, Tt, dev)
    ve = _valid(mask.enc_padding, B, Ti, dev)
    tcols = torch.arange(Tt, device=dev)
    k_ok = torch.cat(
        [vd[:, rows, None] & ve[:, None, :],
         vd[:, rows, None] & vd[:, None, :] & _rel("causal", rows, tcols, None)], dim=-1)
    top = torch.cat([ve[:, :, None] & ve[:, None, :],
                     torch.zeros(B, Ti, Tt, dtype=torch.bool, device=dev)], dim=-1)
    bottom = torch.cat([vd[:, :, None] & ve[:, None, :],
                        vd[:, :, None] & vd[:, None, :] & _rel("causal", tcols, tcols, None)], dim=-1)
    return k_ok, torch.cat([top, bottom], dim=1)


def trans_reference(K: Tensor, v: Tensor, mask: Optional[TransMask] = None,
                    v_enc: Optional[Tensor] = None) -> Tensor:
    """Dense masked trans: u(x, y) = sum_a softmax_{allowed a} K(x, a) * v(a, y)."""
    mask = mask or TransMask()
    if mask.kind == "encdec":
        if v_enc is None:
            raise ValueError("trans(kind='encdec') needs v_enc (B, H, Ti, Ti)")
        B, H, Tt, _ = v.shape
        Ti = v_enc.shape[-1]
        # V over (I ∪ T) x (I ∪ T): [[v^E, 0], [v^D]]
        top = torch.cat([v_enc, v_enc.new_zeros(B, H, Ti, Tt)], dim=-1)
        V = torch.cat([top, v], dim=-2)
    else:
        V = v
    out_dtype = K.dtype
    acc = torch.float64 if K.dtype == torch.float64 else torch.float32
    k_ok, v_ok = allowed_masks(K, v, mask, v_enc)
    # A finite fill keeps gradients finite; multiplying by k_ok zeroes the
    # uniform weights of rows that have no allowed a.
    logits = K.to(acc).masked_fill(~k_ok[:, None], torch.finfo(acc).min)
    p = torch.softmax(logits, dim=-1) * k_ok[:, None].to(acc)
    Vm = V.to(acc) * v_ok[:, None].to(acc)
    return torch.matmul(p, Vm).to(out_dtype)
