"""The symbolic stream of a FOLNet layer (folnet_transformer ``--symbolic-embeddings`` /
``--symbolic-output``).

Unary atoms carry u1(x) ⊕ s(x), s(x) ∈ ℝ^m over the source's context symbols
(plugins/layers/symbolic.py); binary atoms stay semantic.  The symbolic part moves between
tokens only through the join operator j (FOLNet's self-attention, folnet_ops.Join), in the
same way as in the symbolic transformer (symbolic_transformer.py):

  kernel   K_h(x, a) = softmax_a(W_h u2(x, a) + ŝ(x)ᵀ (λ^h_q I + γ^h_q 11ᵀ) ŝ(a))
  values   vbar_sym^h(x) = Σ_a K_h(x, a) ŝ(a);   Δs(x) = Σ_h (λ^h_o I + γ^h_o 11ᵀ) vbar_sym^h(x)
  bool     s ← s + (λ_2 I + γ_2 11ᵀ) ReLU((λ_1 I + γ_1 11ᵀ) LN_slots(s))
  LN       ŝ = g · LN over the real slots (scalar gain), also after the last layer

The other operators (c, m, a, p, t) read and write semantic atoms only.  In the decoder the
join's columns are [encoder ; decoder] tokens: the encoder's columns are its final ŝ, the
decoder's are cached per layer (key ``j.sym``) for incremental decoding.  Init: λ = 1,
γ = 0, λ^h_o = 1/H, g = 1.
"""
from __future__ import annotations

import torch
from torch import Tensor, nn

from nesyseq.plugins.layers.symbolic import slot_map
from nesyseq.plugins.layers.symbolic_transformer import SlotLayerNorm, SymbolicFeedForward


class SymbolicJoinStream(nn.Module):
    def __init__(self, heads: int):
        super().__init__()
        self.lam_q = nn.Parameter(torch.ones(heads))
        self.gamma_q = nn.Parameter(torch.zeros(heads))
        self.lam_o = nn.Parameter(torch.full((heads,), 1.0 / heads))
        self.gamma_o = nn.Parameter(torch.zeros(heads))
        self.ln, self.ffn_ln = SlotLayerNorm(), SlotLayerNorm()
        self.ffn = SymbolicFeedForward()

    def score_bias(self, rows: Tensor, cols: Tensor, slot_mask: Tensor) -> Tensor:
        """ŝ(x)ᵀ (λ^h_q I + γ^h_q 11ᵀ) ŝ(a): rows (B, X, m), cols (B, A, m) -> (B, X, A, H)."""
        H = self.lam_q.numel()
        q = slot_map(rows.unsqueeze(2), slot_mask, self.lam_q.view(1, 1, H, 1), self.gamma_q.view(1, 1, H, 1))
        return torch.einsum("bxhm,bam->bxah", q, cols.to(q.dtype))

    def write(self, heads: Tensor, slot_mask: Tensor) -> Tensor:
        """Σ_h (λ^h_o I + γ^h_o 11ᵀ) vbar_sym^h: (B, X, H, m) -> (B, X, m)."""
        H = self.lam_o.numel()
        return slot_map(heads, slot_mask, self.lam_o.view(1, 1, H, 1), self.gamma_o.view(1, 1, H, 1)).sum(2)
