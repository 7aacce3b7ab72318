"""FOLNet input binary atoms: the clipped relative distance u0(x_t, x_tau).

Distance ids (δ = clip):
    0                      t = tau = 0 ([CLS] to itself)            (only with cls=True)
    1  FROM_CLS            t = 0, tau > 0  ([CLS] row)               (only with cls=True)
    2  TO_CLS              t > 0, tau = 0  ([CLS] column)            (only with cls=True)
    3  CROSS               t, tau in different segments
    4 + (δ-1) + clip(tau - t, -(δ-1), δ-1)    same segment, otherwise
so there are 2δ + 3 ids.  t and tau are *real* token positions (padding
skipped), so left and right padding give the same ids for the real tokens.
"""
from __future__ import annotations

from typing import Optional

import torch
import torch.nn as nn
from torch import Tensor

CLS_CLS, FROM_CLS, TO_CLS, CROSS, FIRST_DISTANCE = 0, 1, 2, 3, 4


def num_distance_ids(clip: int) -> int:
    return FIRST_DISTANCE + 2 * clip - 1


def relative_distance_ids(pos_q: Tensor, pos_k: Tensor, clip: int, seg_q: Optional[Tensor] = None,
                          seg_k: Optional[Tensor] = None, cls: bool = False) -> Tensor:
    """(B, X) row positions t, (B, A) column positions tau -> (B, X, A) long ids."""
    if clip < 1:
        raise ValueError(f"--folnet-rpe-clip must be >= 1, got {clip}")
    t = pos_q[:, :, None]
    tau = pos_k[:, None, :]
    ids = FIRST_DISTANCE + (clip - 1) + (tau - t).clamp(-(clip - 1), clip - 1)
    if seg_q is not None and seg_k is not None:
        ids = torch.where(seg_q[:, :, None] != seg_k[:, None, :], torch.full_like(ids, CROSS), ids)
    if cls:
        t0, tau0 = t == 0, tau == 0
        ids = torch.where(t0 & ~tau0, torch.full_like(ids, FROM_CLS), ids)
        ids = torch.where(~t0 & tau0, torch.full_like(ids, TO_CLS), ids)
        ids = torch.where(t0 & tau0, torch.full_like(ids, CLS_CLS), ids)
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


class RelativeDistanceEmbedding(nn.Module):
    """u0(x_t, x_tau) = E[id(t, tau)]: (B, X, A) ids -> (B, X, A, D2)."""

    def __init__(self, clip: int, dim: int):
        super().__init__()
        self.clip = clip
        self.embed = nn.Embedding(num_distance_ids(clip), dim)
        nn.init.normal_(self.embed.weight, std=dim ** -0.5)

    def forward(self, ids: Tensor) -> Tensor:
        return self.embed(ids)
