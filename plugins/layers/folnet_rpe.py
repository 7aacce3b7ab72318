"""FOLNet input binary atoms: the clipped relative distance u0(x_t, x_tau).

The official id map (tencent-ailab/FOLNet folnet.py:192, :207-232), δ = clip,
d = tau - t:
    min(d, δ-1)               same segment, d >= 0         ids 0 .. δ-1
    2δ - min(-d, δ-1)         same segment, d < 0          ids δ+1 .. 2δ-1
    δ         cross_id        t, tau in different segments
    2δ        from_cls_id     t = 0, tau > 0  ([CLS] row)       (only with cls=True)
    2δ + 1    to_cls_id       t > 0, tau = 0  ([CLS] column)    (only with cls=True)
so there are 2δ + 2 ids, and [CLS] -> [CLS] keeps the distance-0 id 0.  (With
δ = 1 every negative distance gets id 2 = 2δ, as in the official Toeplitz map.)
t and tau are *real* token positions (padding skipped), so left and right
padding give the same ids for the real tokens.
"""
from __future__ import annotations

from typing import Optional

import torch
import torch.nn as nn
from torch import Tensor


def num_distance_ids(clip: int) -> int:
    return 2 * clip + 2


def cross_id(clip: int) -> int:
    """id of a pair of tokens in different segments (folnet.py:229)."""
    return clip


def from_cls_id(clip: int) -> int:
    """id of ([CLS], tau > 0) (folnet.py:230)."""
    return 2 * clip


def to_cls_id(clip: int) -> int:
    """id of (t > 0, [CLS]) (folnet.py:231)."""
    return 2 * clip + 1


def relative_distance_ids(pos_q: Tensor, pos_k: Tensor, clip: int, seg_q: Optional[Tensor] = None,
                          seg_k: Optional[Tensor] = None, cls: bool = False) -> Tensor:
    """(B, X) row positions t, (B, A) column positions tau -> (B, X, A) long ids."""
    if clip < 1:
        raise ValueError(f"--folnet-rpe-clip must be >= 1, got {clip}")
    t = pos_q[:, :, None]
    tau = pos_k[:, None, :]
    d = tau - t  # (B, X, A)
    ids = torch.where(d >= 0, d.clamp(max=clip - 1), 2 * clip - (-d).clamp(max=clip - 1))
    if seg_q is not None and seg_k is not None:
        ids = torch.where(seg_q[:, :, None] != seg_k[:, None, :], torch.full_like(ids, cross_id(clip)), ids)
    if cls:
        t0, tau0 = t == 0, tau == 0
        ids = torch.where(t0 & ~tau0, torch.full_like(ids, from_cls_id(clip)), ids)
        ids = torch.where(~t0 & tau0, torch.full_like(ids, to_cls_id(clip)), ids)
    return ids


def segments_from_separators(tokens: Tensor, sep: int, padding: Tensor) -> Tensor:
    """Segment ids for RoBERTa-style pairs ``<s> A </s> </s> B </s>``.

    A new segment starts right after each ``</s> </s>`` pair (with padding skipped);
    a single sentence is one segment.
    """
    B, T = tokens.shape
    real = ~padding
    is_sep = (tokens == sep) & real
    # next real token is also a separator
    nxt = torch.zeros_like(is_sep)
    nxt[:, :-1] = is_sep[:, 1:]
    boundary = is_sep & nxt  # first of a "</s> </s>" pair
    # segment increments at the token after the boundary
    inc = torch.zeros(B, T, dtype=torch.long, device=tokens.device)
    inc[:, 1:] = boundary[:, :-1].long()
    return inc.cumsum(dim=1)


def segments_after_each_separator(tokens: Tensor, sep: int, padding: Tensor) -> Tensor:
    """Segment ids for BERT-style pairs ``<s> A </s> B </s>`` (the official
    ``[CLS] A [SEP] B [SEP]`` with token types 0...0 1...1): a new segment starts
    right after each ``</s>`` (padding skipped), so the separator belongs to the
    segment it closes.
    """
    is_sep = ((tokens == sep) & ~padding).long()
    return is_sep.cumsum(dim=1) - is_sep


class RelativeDistanceEmbedding(nn.Module):
    """u0(x_t, x_tau) = E[id(t, tau)]: (B, X, A) ids -> (B, X, A, D2)."""

    def __init__(self, clip: int, dim: int):
        super().__init__()
        self.clip = clip
        self.embed = nn.Embedding(num_distance_ids(clip), dim)
        nn.init.normal_(self.embed.weight, std=0.02)  # official N(0, 0.02) (folnet.py:63-69)

    def forward(self, ids: Tensor) -> Tensor:
        return self.embed(ids)
