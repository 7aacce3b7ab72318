"""Input representation of the TP-Transformer (eq. 2) and sinusoidal positions.

    e_t = E x_t sqrt(d_z) + p_t          token embedding + sinusoidal position
    r_t = W^(p) e_t + b^(p) + 1          position- and symbol-dependent role
    z_t,0 = e_t ⊙ r_t                    the embedding role binding

With ``embedding_role=False`` z_t,0 = e_t (the standard Transformer input).
"""
from __future__ import annotations

import math
from typing import Optional

import torch
from torch import Tensor, nn


def sinusoidal_table(num_positions: int, dim: int) -> Tensor:
    """p[t, 2i] = sin(t / 10000^(2i/d)),  p[t, 2i+1] = cos(t / 10000^(2i/d)).  (T, d)"""
    position = torch.arange(num_positions, dtype=torch.float32)[:, None]
    inv_freq = torch.exp(-math.log(10000.0) * torch.arange(0, dim, 2, dtype=torch.float32) / dim)
    table = torch.zeros(num_positions, dim)
    table[:, 0::2] = torch.sin(position * inv_freq)
    table[:, 1::2] = torch.cos(position * inv_freq[: dim // 2])
    return table


def positions_from_padding(tokens: Tensor, padding_idx: int) -> Tensor:
    """Position of each real token counted from the first real token (works for
    left and right padding); pads get position 0.  (B, T) long"""
    real = tokens.ne(padding_idx).long()
    return (torch.cumsum(real, dim=1) - 1).clamp(min=0) * real


class TPEmbedding(nn.Module):
    """Token embedding with the TP-Transformer's embedding role (eq. 2).

    Init as the authors' code (models/tp-transformer.py:158,166,181-187):
    E ~ N(0, 1/d) so that E·sqrt(d) ~ N(0, 1), W^(p) ~ N(0, 1/d), b^(p) = 0 and
    r = W^(p) e + b^(p) + 1, so r ≈ N(1, 1) at init. The paper's "N(0,1)" and
    "N(1,1)" describe E·sqrt(d) and r, not the raw weights. ``None`` std means 1/sqrt(d).
    """

    def __init__(self, num_embeddings: int, dim: int, padding_idx: int,
                 max_positions: int = 1024, embedding_role: bool = True,
                 embed_init_std: Optional[float] = None, role_init_mean: float = 0.0,
                 role_init_std: Optional[float] = None, role_offset: float = 1.0):
        super().__init__()
        self.dim = dim
        self.padding_idx = padding_idx
        self.embedding_role = embedding_role
        self.embed_tokens = nn.Embedding(num_embeddings, dim, padding_idx=padding_idx)
        default_std = dim ** -0.5
        embed_init_std = default_std if embed_init_std is None else embed_init_std
        role_init_std = default_std if role_init_std is None else role_init_std
        self.role_offset = role_offset
        nn.init.normal_(self.embed_tokens.weight, mean=0.0, std=embed_init_std)
        with torch.no_grad():
            self.embed_tokens.weight[padding_idx].zero_()
        self.register_buffer("positions", sinusoidal_table(max_positions, dim), persistent=False)
        # words unseen in training (babi_qa): zero rows of E at lookup, see set_unseen
        self.register_buffer("unseen", torch.zeros(num_embeddings, dtype=torch.bool), persistent=False)
        self.zero_unseen = False
        self.max_positions = max_positions
        if embedding_role:
            self.role = nn.Linear(dim, dim)  # W^(p), b^(p)
            nn.init.normal_(self.role.weight, mean=role_init_mean, std=role_init_std)
            nn.init.zeros_(self.role.bias)

    def set_unseen(self, unseen: Tensor) -> None:
        """unseen (V,) bool: these words get a zero E row at lookup (the position is still added)."""
        self.unseen.copy_(unseen)
        self.zero_unseen = True

    def check_length(self, length: int) -> None:
        """positions_from_padding gives positions <= length - 1."""
        if length > self.max_positions:
            raise ValueError(
                f"sequence length {length} exceeds max positions {self.max_positions}; "
                "raise --max-source-positions / --max-target-positions")

    @property
    def weight(self) -> Tensor:
        """E, shared with the output projection (eq. 8)."""
        return self.embed_tokens.weight

    def forward(self, tokens: Tensor, positions: Tensor, zero: Optional[Tensor] = None) -> Tensor:
        """tokens, positions (B, T) -> z_0 (B, T, d); ``zero`` (B, T) bool: tokens whose E row
        reads as zero, as an unseen word's (entity dropout, per example).

        Positions must be < max_positions; callers check it from the sequence length
        (:meth:`check_length`, a shape, so no host synchronisation per decoding step)."""
        e = self.embed_tokens(tokens)
        if self.zero_unseen:
            e = e.masked_fill(self.unseen[tokens].unsqueeze(-1), 0.0)
        if zero is not None:
            e = e.masked_fill(zero.unsqueeze(-1), 0.0)
        e = e * math.sqrt(self.dim) + self.positions[positions]
        if not self.embedding_role:
            return e
        r = self.role(e) + self.role_offset  # (B, T, d)
        return e * r
