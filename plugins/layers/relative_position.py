"""Learned relative-position bias for encoder self-attention (``--encoder-relative-buckets``).

Ours, not the TP-Transformer paper's (which uses absolute sinusoidal positions only); the
form is the bucketed scalar bias of T5 (Raffel et al., 2020, Sec. 2.1), written here from
its description:

    score^h(t, i) = q^h_t · k^h_i / sqrt(d_k) + b^h[bucket(i − t)]

bucket(δ) gives every offset |δ| < n/4 its own bucket per sign (n = number of buckets),
and log-spaced buckets beyond, the last one shared by every |δ| ≥ max_distance.  One table
b ∈ ℝ^{n × H}, shared by the encoder's layers, initialised to 0 (so the model starts as the
one without it).  The bias depends on i − t only, so left padding does not change it.
"""
from __future__ import annotations

import math

import torch
from torch import Tensor, nn


def relative_bucket(delta: Tensor, num_buckets: int, max_distance: int) -> Tensor:
    """delta (any shape, int: key index − query index) -> bucket ids in [0, num_buckets).

    Offsets ≥ 0 use buckets [0, n/2), offsets < 0 use [n/2, n); within a half, |δ| below
    n/4 is exact and larger |δ| are log-spaced up to max_distance (clipped there)."""
    if num_buckets < 4 or num_buckets % 2:
        raise ValueError(f"--encoder-relative-buckets must be an even number >= 4, got {num_buckets}")
    half = num_buckets // 2
    exact = half // 2
    if max_distance <= exact:
        raise ValueError(f"--encoder-relative-max-distance ({max_distance}) must exceed "
                         f"--encoder-relative-buckets / 4 ({exact})")
    side = (delta < 0).long() * half
    dist = delta.abs()
    # exact + log(|δ| / exact) / log(max_distance / exact) · (half − exact), floored and clipped
    far = exact + (torch.log(dist.clamp(min=1).float() / exact) / math.log(max_distance / exact)
                   * (half - exact)).long()
    far = far.clamp(max=half - 1)
    return side + torch.where(dist < exact, dist, far)


class RelativePositionBias(nn.Module):
    """b^h[bucket(i − t)] for every head: (1, H, T, T), added to the attention scores."""

    def __init__(self, num_buckets: int, max_distance: int, num_heads: int):
        super().__init__()
        relative_bucket(torch.zeros(1, dtype=torch.long), num_buckets, max_distance)  # validates
        self.num_buckets, self.max_distance = num_buckets, max_distance
        self.table = nn.Embedding(num_buckets, num_heads)   # (n, H)
        nn.init.zeros_(self.table.weight)

    def forward(self, T: int, device=None) -> Tensor:
        pos = torch.arange(T, device=device)
        delta = pos[None, :] - pos[:, None]                  # (T_query, T_key): i − t
        bucket = relative_bucket(delta, self.num_buckets, self.max_distance)
        return self.table(bucket).permute(2, 0, 1).unsqueeze(0)   # (1, H, T, T)
