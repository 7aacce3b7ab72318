"""FOLNet masks: which (x, a) pairs an operator may look at.

Paper Table 5 (decoder-only) and appendix A.5 (encoder-decoder).  One boolean
``pair_ok`` (B, X, A) serves every operator:

* ``x`` runs over the *query rows* (all positions, or only the newest ones during
  incremental decoding: absolute positions ``query_offset + i``);
* ``a`` runs over all columns (the self sequence, or [encoder I ; decoder T]).

pair_ok(x, a) = valid(x) and valid(a) and rel(x, a), with
    none (encoder):  rel = always
    causal:          rel = a <= x
    prefix:          rel = a <= x or a < P_b   (P_b: absolute prefix length)
    encdec:          a in I: always (encoder padding aside); a in T: a <= x

It masks the join / mu kernels, the mu / cjoin / prod premises and the binary
atoms themselves (u(x, y) = 0 where pair_ok(x, y) is False).  The trans
operator gets the same information as a ``triton_kernels.TransMask``; the
tests check that both agree with ``triton_kernels.allowed_masks``.
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Optional

import torch
from torch import Tensor

from nesyseq.plugins.layers.device_policy import dense_mask_shortcut
from nesyseq.triton_kernels import TransMask


def masked_softmax(logits: Tensor, ok: Tensor, dim: int) -> Tensor:
    """softmax over ``dim`` normalised only over ``ok`` entries; rows with none give 0.

    Computed in fp32 with a finite fill (no NaN, finite gradients), then
    multiplied by the mask; returns the input dtype.
    """
    acc = torch.float64 if logits.dtype == torch.float64 else torch.float32
    x = logits.to(acc).masked_fill(~ok, torch.finfo(acc).min)
    return (torch.softmax(x, dim=dim) * ok.to(acc)).to(logits.dtype)


def real_positions(padding: Tensor) -> Tensor:
    """(B, T) bool padding -> (B, T) long position of each token among the real ones.

    Left or right padding gives the same numbers for the real tokens, which is
    what keeps relative distances (and so every output) padding invariant.
    """
    return (~padding).long().cumsum(dim=1) - 1


@dataclass
class FolnetMask:
    """Everything one layer needs to know about masking.

    pair_ok     (B, X, A) bool, see module docstring.
    row_valid   (B, X) bool, query rows that are real tokens.
    trans       the ``TransMask`` handed to ``triton_kernels.trans``.
    dense       True only when every pair is allowed (encoder, no padding, all rows)
                *and* this is known without a device synchronisation (CPU tensors):
                the operators then skip their mask arithmetic, which is exact
                (every mask is all ones).  False is always correct.
    """

    pair_ok: Tensor
    row_valid: Tensor
    trans: TransMask
    dense: bool = False


def self_mask(kind: str, key_padding: Tensor, query_offset: int = 0, num_rows: Optional[int] = None,
              prefix_lengths: Optional[Tensor] = None) -> FolnetMask:
    """Mask for the self kinds ``none`` / ``causal`` / ``prefix``.

    key_padding (B, T) bool, True = pad, over *all* positions 0..T-1.
    Rows are the absolute positions query_offset .. query_offset + num_rows - 1.
    """
    B, T = key_padding.shape
    num_rows = T - query_offset if num_rows is None else num_rows
    dev = key_padding.device
    valid = ~key_padding
    rows = torch.arange(num_rows, device=dev) + query_offset  # (X,)
    cols = torch.arange(T, device=dev)  # (A,)
    if kind == "none":
        rel = torch.ones(1, num_rows, T, dtype=torch.bool, device=dev)
    elif kind == "causal":
        rel = (cols[None, :] <= rows[:, None])[None]
    elif kind == "prefix":
        if prefix_lengths is None:
            raise ValueError("prefix mask needs prefix_lengths (B,)")
        rel = (cols[None, :] <= rows[:, None])[None] | (cols[None, None, :] < prefix_lengths[:, None, None])
    else:
        raise ValueError(f"unknown self mask kind {kind!r}; valid: none, causal, prefix")
    row_valid = valid[:, rows]
    pair_ok = row_valid[:, :, None] & valid[:, None, :] & rel
    tm = TransMask(kind=kind, key_padding=key_padding, query_offset=query_offset,
                   prefix_lengths=prefix_lengths if kind == "prefix" else None)
    # reading padding.any() on the host is free on the CPU; on an accelerator it would sync
    dense = (kind == "none" and query_offset == 0 and num_rows == T and dense_mask_shortcut(dev.type)
             and not bool(key_padding.any()))
    return FolnetMask(pair_ok=pair_ok, row_valid=row_valid, trans=tm, dense=dense)


def encdec_mask(dec_padding: Tensor, enc_padding: Tensor, query_offset: int = 0,
                num_rows: Optional[int] = None) -> FolnetMask:
    """Decoder mask over columns [encoder I ; decoder T] (appendix A.5).

    dec_padding (B, Tt) bool over all decoder positions so far; enc_padding (B, Ti).
    """
    B, Tt = dec_padding.shape
    num_rows = Tt - query_offset if num_rows is None else num_rows
    dev = dec_padding.device
    dvalid, evalid = ~dec_padding, ~enc_padding
    rows = torch.arange(num_rows, device=dev) + query_offset
    cols = torch.arange(Tt, device=dev)
    row_valid = dvalid[:, rows]
    cross = row_valid[:, :, None] & evalid[:, None, :]  # (B, X, Ti)
    selfp = row_valid[:, :, None] & dvalid[:, None, :] & (cols[None, :] <= rows[:, None])[None]
    pair_ok = torch.cat([cross, selfp], dim=-1)
    tm = TransMask(kind="encdec", key_padding=dec_padding, enc_padding=enc_padding, query_offset=query_offset)
    return FolnetMask(pair_ok=pair_ok, row_valid=row_valid, trans=tm)
