"""The symbolic stream of a transformer layer (``--symbolic-embeddings`` / ``--symbolic-output``).

Every token t carries h_t = z_t ⊕ s_t: the usual semantic state z_t ∈ ℝ^d and a symbolic
state s_t ∈ ℝ^m, one coordinate per context symbol (plugins/layers/symbolic.py numbers
them).  The paper (symbol-shift-equivariant.md, Sec. 4) only gives the symbolic linear map
W h_sem ⊕ (λI + γ11ᵀ) h_sym and leaves transformers to future work (its Sec. 6); this is
our extension, built only from maps that commute with a permutation of the slots:

  input       s_0 = α_x e_φ(x)                                       (hybrid embedding, eq. 2)
  attention   per head h, query t, key i:
                score  = (q^h_t · k^h_i + s_tᵀ (λ^h_q I + γ^h_q 11ᵀ) s_i) / sqrt(d_k)
                         (+ b^h[bucket(i − t)] with --encoder-relative-buckets, encoder only)
                a^h_ti = softmax_i(score)          (one softmax: both parts share the weights)
                vbar^h_t     = Σ_i a^h_ti v^h_i                      (semantic, as before)
                vbar_sym^h_t = Σ_i a^h_ti s_i                        (the tokens' symbolic states)
              out_sym_t = Σ_h (λ^h_o I + γ^h_o 11ᵀ) vbar_sym^h_t     (equivariant ℝ^{H×m} → ℝ^m)
              the TP role binding vbar ⊙ r stays on the semantic part.
  FF          s ↦ (λ_2 I + γ_2 11ᵀ) ReLU((λ_1 I + γ_1 11ᵀ) s)         (width m, no bias)
  LayerNorm   LN(z) ⊕ g · (s − mean_real(s)) / sqrt(var_real(s) + ε), scalar gain g,
              statistics over the real slots only, padded slots re-zeroed
  residuals   added on both parts; dropout on the semantic part only

There are no semantic↔symbolic cross terms in any linear map; the two parts meet only in
the attention weights (a sum over slots, which no slot permutation changes).  Init:
λ = 1, γ = 0 everywhere except λ^h_o = 1/H (the mean over heads), g = 1, and λ^h_q =
``--symbolic-score-init`` (default 1).
"""
from __future__ import annotations

import math
from typing import Optional

import torch
import torch.nn.functional as F
from torch import Tensor, nn

from nesyseq.plugins.layers.symbolic import _expand_mask, one_hot_phi, slot_layer_norm, slot_map
from nesyseq.plugins.layers.tp_attention import TPMultiheadAttention


class SymbolAlpha(nn.Module):
    """s_0 = α_x e_φ(x) with α_x = sigmoid(a_x), a learned per-word logit (init 0).

    ``learned=False`` (``--symbolic-output`` without ``--symbolic-embeddings``): α ≡ 1,
    the plain one-hot of φ, no per-word parameter.  ``set_unseen(ids, zero_alpha=True)``
    zeroes α of words unseen in training (an option; the paper is silent)."""

    INIT_LOGIT = 0.0   # a never-trained word keeps α = sigmoid(0) = 1/2

    def __init__(self, num_embeddings: int, learned: bool = True):
        super().__init__()
        self.learned = learned
        if learned:
            self.alpha_logit = nn.Parameter(torch.full((num_embeddings,), self.INIT_LOGIT))
        self.register_buffer("unseen", torch.zeros(num_embeddings, dtype=torch.bool), persistent=False)
        self.zero_alpha = False

    def set_unseen(self, unseen: Tensor, zero_alpha: bool) -> None:
        self.unseen.copy_(unseen)
        self.zero_alpha = zero_alpha

    def forward(self, tokens: Tensor, phi: Tensor, m: int, dtype=torch.float32,
                dropped: Optional[Tensor] = None, zero_dropped: bool = False) -> Tensor:
        """tokens, phi (B, T) -> (B, T, m).  ``dropped`` (B, T) bool (entity dropout): those
        tokens read as a word never trained, α = sigmoid(INIT_LOGIT) = 1/2 (1 when α is not learned),
        or 0 with ``zero_dropped`` (--zero-unseen-alpha)."""
        e = one_hot_phi(phi, m, dtype)
        if self.learned:
            alpha = torch.sigmoid(self.alpha_logit[tokens]).to(dtype)
        else:
            alpha = torch.ones(tokens.shape, dtype=dtype, device=tokens.device)
        if self.zero_alpha:
            alpha = alpha.masked_fill(self.unseen[tokens], 0.0)
        if dropped is not None:
            init = 1.0 / (1.0 + math.exp(-self.INIT_LOGIT)) if self.learned else 1.0
            alpha = alpha.masked_fill(dropped, 0.0 if zero_dropped else init)
        return alpha.unsqueeze(-1) * e


class SlotLayerNorm(nn.Module):
    """g · LN_real-slots(s): mean and variance over the real slots, one scalar gain g (init 1);
    a per-slot gain or bias would break the equivariance."""

    def __init__(self, eps: float = 1e-5):
        super().__init__()
        self.gain = nn.Parameter(torch.ones(()))
        self.eps = eps

    def forward(self, s: Tensor, slot_mask: Tensor) -> Tensor:
        return self.gain * slot_layer_norm(s, slot_mask, self.eps)


class SymbolicFeedForward(nn.Module):
    """s ↦ (λ_2 I + γ_2 11ᵀ) ReLU((λ_1 I + γ_1 11ᵀ) s): the FF of the symbolic part, width m."""

    def __init__(self):
        super().__init__()
        self.lam = nn.Parameter(torch.ones(2))
        self.gamma = nn.Parameter(torch.zeros(2))

    def forward(self, s: Tensor, slot_mask: Tensor) -> Tensor:
        h = F.relu(slot_map(s, slot_mask, self.lam[0], self.gamma[0]))
        return slot_map(h, slot_mask, self.lam[1], self.gamma[1])


class SymbolicTPMultiheadAttention(TPMultiheadAttention):
    """TP-attention over hybrid states z ⊕ s (module docstring).  The semantic projections are
    the parent's; the symbolic part adds four scalars per head (λ_q, γ_q, λ_o, γ_o).

    One ``scaled_dot_product_attention`` call on [q ; q_sym], [k ; s], [v ; s] computes the
    shared attention weights and both value sums.  The incremental cache stores [k ; s] and
    [v ; s], so beam search reorders the symbolic keys/values with the semantic ones."""

    def __init__(self, embed_dim: int, num_heads: int, score_init: float = 1.0, **kwargs):
        super().__init__(embed_dim, num_heads, **kwargs)
        H = num_heads
        self.sym_lam_q = nn.Parameter(torch.full((H,), float(score_init)))
        self.sym_gamma_q = nn.Parameter(torch.zeros(H))
        self.sym_lam_o = nn.Parameter(torch.full((H,), 1.0 / H))
        self.sym_gamma_o = nn.Parameter(torch.zeros(H))

    @staticmethod
    def _per_head(p: Tensor) -> Tensor:
        return p.view(1, -1, 1, 1)

    def forward(self, query: Tensor, query_sym: Tensor, slot_mask: Tensor,  # (B,Tq,d) (B,Tq,m) (B,m)
                memory: Optional[Tensor] = None, memory_sym: Optional[Tensor] = None,  # (B,Tk,d) (B,Tk,m)
                key_padding_mask: Optional[Tensor] = None, causal: bool = False,
                incremental_state=None, attn_bias: Optional[Tensor] = None):  # (1|B, H, Tq, Tk)
        B, Tq, d = query.shape
        H, dk, m = self.num_heads, self.head_dim, query_sym.size(-1)
        saved = self._get_input_buffer(incremental_state) if incremental_state is not None else {}
        s_q = query_sym.unsqueeze(1)                                        # (B, 1, Tq, m)
        # q_sym^h = (λ^h_q I + γ^h_q 11ᵀ) s_t                                 (B, H, Tq, m)
        q_sym = slot_map(s_q, slot_mask, self._per_head(self.sym_lam_q), self._per_head(self.sym_gamma_q))

        def keys_values(k, v, s):  # (B,T,d) (B,T,d) (B,T,m) -> [k ; s], [v ; s]  (B, H, T, dk+m)
            s = (s * _expand_mask(slot_mask, s)).unsqueeze(1).expand(-1, H, -1, -1)
            return torch.cat([self._heads(k), s], -1), torch.cat([self._heads(v), s], -1)

        q, r, k, v = self._project(query, memory, incremental_state, saved, keys_values, query_sym, memory_sym)
        q = torch.cat([self._heads(q), q_sym.to(q.dtype)], -1)              # (B, H, Tq, dk+m)
        attn_mask, is_causal = self._attention_mask(key_padding_mask, causal, Tq, k.size(2), query.device)
        attn_mask = self._add_bias(attn_mask, is_causal, attn_bias, q.dtype)
        both = F.scaled_dot_product_attention(
            q, k, v, attn_mask=attn_mask, is_causal=is_causal,
            dropout_p=self.dropout if self.training else 0.0, scale=1.0 / math.sqrt(dk))
        vbar, vbar_sym = both.split([dk, m], dim=-1)                         # (B,H,Tq,dk) (B,H,Tq,m)
        vbar = vbar.transpose(1, 2).reshape(B, Tq, d)
        out = self.out_proj(vbar * r if r is not None else vbar)
        # Σ_h (λ^h_o I + γ^h_o 11ᵀ) vbar_sym^h                                 (B, Tq, m)
        out_sym = slot_map(vbar_sym, slot_mask, self._per_head(self.sym_lam_o),
                           self._per_head(self.sym_gamma_o)).sum(1)
        return out, out_sym
