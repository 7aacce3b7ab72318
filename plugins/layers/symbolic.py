"""Symbol-shift equivariant building blocks (symbol-shift-equivariant.md, Sec. 3; README "Symbolic").

A context C_X (story then question, over the memory kept) numbers its distinct words by
first appearance: φ(x) ∈ {0..m-1} (0-based here; the paper writes 1..m).  Every
representation is split h = h_sem ⊕ h_sym with h_sym ∈ ℝ^m, one coordinate per context
symbol.  m differs per example: a batch is padded to its largest m (``slot_mask`` marks the
real slots) and every symbolic operation covers real slots only, so results do not depend
on the padding (tests/test_symbolic_layers.py).

    slots  = context_symbols(ctx, specials, max_symbols)    slot_vocab (B, m): vocab id of slot j
    phi    = lookup_phi(tokens, slot_vocab)                  (B, T) slot of each token, -1 if none
    x      ↦ A e_x ⊕ α_x e_φ(x),    α_x = sigmoid(a_x)       HybridEmbedding
    h      ↦ W h_sem ⊕ (λI + γ11ᵀ) h_sym                     SymbolicLinear (λ, γ scalars)
    p      = β softmax(B h_sem) + (1−β) B_φ softmax(h_sym)   symbolic_output_probs (fp32)

B_φ (V × m) puts slot j's probability on vocabulary id slot_vocab[j]; an answer word absent
from the context gets probability from the semantic part only.  Init: λ=1, γ=0, α and β
logits 0 (α = β = 1/2).
"""
from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Iterable, List, Optional

import torch
import torch.nn.functional as F
from torch import Tensor, nn


@dataclass
class ContextSymbols:
    slot_vocab: Tensor   # (B, m) long: vocab id of slot j, ``pad`` where the slot is padding
    slot_mask: Tensor    # (B, m) bool: real slots

    @property
    def m(self) -> int:
        return self.slot_vocab.size(1)

    def first(self, max_symbols: Optional[int]) -> "ContextSymbols":
        """The first ``max_symbols`` slots: what ``context_symbols(..., max_symbols)`` returns
        (slots are numbered by first appearance, so the cap keeps a prefix)."""
        if max_symbols is None or max_symbols >= self.m:
            return self
        return ContextSymbols(self.slot_vocab[:, :max_symbols], self.slot_mask[:, :max_symbols])

    def with_spare(self, n: int, pad: int) -> "ContextSymbols":
        """``n`` more real slots that no word fills (vocab id ``pad``): the slot count grows by n
        while every word keeps its slot.  Look φ up before adding them, so that no token maps to one."""
        if n <= 0:
            return self
        B = self.slot_vocab.size(0)
        vocab = self.slot_vocab.new_full((B, n), pad)
        mask = self.slot_mask.new_ones((B, n))
        return ContextSymbols(torch.cat([self.slot_vocab, vocab], 1), torch.cat([self.slot_mask, mask], 1))

    def index_select(self, new_order: Tensor) -> "ContextSymbols":
        """Reorder the batch (beam search: fairseq's reorder_encoder_out)."""
        return ContextSymbols(self.slot_vocab.index_select(0, new_order), self.slot_mask.index_select(0, new_order))


def context_symbols(ctx: Tensor, ignore_ids: Iterable[int], pad: int,
                    max_symbols: Optional[int] = None) -> ContextSymbols:
    """Number the distinct words of ``ctx`` (B, T) by first appearance, left to right.

    Tokens in ``ignore_ids`` (pad, eos, bos, ...) get no slot.  ``max_symbols`` caps m:
    words first seen after the cap get no slot (their symbolic part is zero).
    """
    B, T = ctx.shape
    valid = torch.ones_like(ctx, dtype=torch.bool)
    for i in ignore_ids:
        valid &= ctx.ne(i)
    same = ctx[:, :, None].eq(ctx[:, None, :])                           # (B, T, T)
    earlier = torch.ones(T, T, dtype=torch.bool, device=ctx.device).tril(-1)
    first = valid & ~(same & earlier).any(-1)                             # (B, T) first occurrences
    rank = first.long().cumsum(1) - 1                                     # slot of each first occurrence
    m = int(first.sum(1).max().item()) if T else 0
    if max_symbols is not None:
        m = min(m, int(max_symbols))
    keep = first & (rank < m)
    slot_vocab = torch.full((B, m), pad, dtype=ctx.dtype, device=ctx.device)
    b_idx, t_idx = keep.nonzero(as_tuple=True)
    slot_vocab[b_idx, rank[b_idx, t_idx]] = ctx[b_idx, t_idx]
    slot_mask = torch.zeros(B, m, dtype=torch.bool, device=ctx.device)
    slot_mask[b_idx, rank[b_idx, t_idx]] = True
    return ContextSymbols(slot_vocab, slot_mask)


def lookup_phi(tokens: Tensor, symbols: ContextSymbols) -> Tensor:
    """φ of each token of ``tokens`` (B, T): its slot in the context, -1 if not a context word.  (B, T) long"""
    hit = tokens[:, :, None].eq(symbols.slot_vocab[:, None, :]) & symbols.slot_mask[:, None, :]  # (B, T, m)
    found = hit.any(-1)
    idx = hit.long().argmax(-1)
    return torch.where(found, idx, torch.full_like(idx, -1))


def one_hot_phi(phi: Tensor, m: int, dtype=torch.float32) -> Tensor:
    """e_φ(x): (B, T) slots (-1: none) -> (B, T, m) one-hot, zero rows for -1."""
    out = F.one_hot(phi.clamp(min=0), m if m > 0 else 1)[..., :m].to(dtype)
    return out * phi.ge(0).unsqueeze(-1).to(dtype)


class HybridEmbedding(nn.Module):
    """x ↦ A e_x ⊕ α_x e_φ(x), α_x = sigmoid(a_x), a_x a learned per-word logit (init 0).

    ``zero_ids`` (words unseen in training) get a zero semantic row when ``zero_unseen``
    is on; ``zero_unseen_alpha`` also zeroes their α (the paper says nothing; option).
    A word that never gets a gradient keeps α = sigmoid(ALPHA_LOGIT_INIT) = 1/2 (``init_alpha``).
    """

    ALPHA_LOGIT_INIT = 0.0

    def __init__(self, num_embeddings: int, dim: int, padding_idx: Optional[int] = None,
                 init_std: Optional[float] = None):
        super().__init__()
        self.semantic = nn.Embedding(num_embeddings, dim, padding_idx=padding_idx)
        if init_std is not None:
            nn.init.normal_(self.semantic.weight, 0.0, init_std)
            if padding_idx is not None:
                nn.init.zeros_(self.semantic.weight[padding_idx])
        self.alpha_logit = nn.Parameter(torch.full((num_embeddings,), self.ALPHA_LOGIT_INIT))
        self.register_buffer("unseen", torch.zeros(num_embeddings, dtype=torch.bool), persistent=False)
        self.zero_unseen = False
        self.zero_unseen_alpha = False

    def set_unseen(self, ids: Iterable[int], zero_alpha: bool = False) -> None:
        self.unseen.zero_()
        ids = list(ids)
        if ids:
            self.unseen[torch.tensor(ids, dtype=torch.long)] = True
        self.zero_unseen = True
        self.zero_unseen_alpha = zero_alpha

    def alpha(self, tokens: Tensor, init_alpha: Optional[Tensor] = None) -> Tensor:
        """α of ``tokens``; where the bool mask ``init_alpha`` (shaped as tokens) is set, the α
        of a never-trained word instead (entity dropout's imitation of an unseen word)."""
        a = torch.sigmoid(self.alpha_logit[tokens])
        if init_alpha is not None:
            a = a.masked_fill(init_alpha, 1.0 / (1.0 + math.exp(-self.ALPHA_LOGIT_INIT)))
        if self.zero_unseen and self.zero_unseen_alpha:
            a = a.masked_fill(self.unseen[tokens], 0.0)
        return a

    def semantic_part(self, tokens: Tensor) -> Tensor:
        """A e_x, zero for padding whatever the padding row holds: stpr's A is initialised
        U(-l, l) over every row (TPR-RNN-Torch tpr_rnn.py:43-45 has no padding row), and a batch pads
        to its own longest sentence, so a nonzero padding row made p depend on the batch."""
        e = self.semantic(tokens)
        if self.semantic.padding_idx is not None:
            e = e.masked_fill(tokens.eq(self.semantic.padding_idx).unsqueeze(-1), 0.0)
        if self.zero_unseen:
            e = e.masked_fill(self.unseen[tokens].unsqueeze(-1), 0.0)
        return e

    def forward(self, tokens: Tensor, phi: Tensor, m: int, init_alpha: Optional[Tensor] = None):
        """Returns (h_sem (B, T, d), h_sym (B, T, m)); ``init_alpha`` as in ``alpha``."""
        a = self.alpha(tokens, init_alpha)
        return self.semantic_part(tokens), a.unsqueeze(-1) * one_hot_phi(phi, m, self.alpha_logit.dtype)


class UnseenZeroEmbedding(nn.Embedding):
    """nn.Embedding whose rows for words unseen in training read as zero once ``set_unseen``
    is called (the paper zeroes their semantic embeddings); ``effective_weight`` is the matrix
    with those rows zeroed, for a tied output projection."""

    def __init__(self, *args, **kwargs):
        super().__init__(*args, **kwargs)
        self.register_buffer("unseen", torch.zeros(self.num_embeddings, dtype=torch.bool), persistent=False)
        self.zero_unseen = False

    def set_unseen(self, unseen: Tensor) -> None:
        self.unseen.copy_(unseen)
        self.zero_unseen = True

    @property
    def effective_weight(self) -> Tensor:
        if not self.zero_unseen:
            return self.weight
        return self.weight.masked_fill(self.unseen.unsqueeze(-1), 0.0)

    def forward(self, tokens: Tensor) -> Tensor:
        e = super().forward(tokens)
        return e.masked_fill(self.unseen[tokens].unsqueeze(-1), 0.0) if self.zero_unseen else e


class SymbolicLinear(nn.Module):
    """h_sem ⊕ h_sym ↦ W h_sem ⊕ (λ h_sym + γ (1ᵀ h_sym) 1): scalar λ (init 1), γ (init 0);
    no cross terms, no per-slot bias; the sum runs over real slots and padded slots stay 0."""

    def __init__(self, d_in: int, d_out: int, bias: bool = True, lam: float = 1.0, gamma: float = 0.0):
        super().__init__()
        self.linear = nn.Linear(d_in, d_out, bias=bias)
        self.lam = nn.Parameter(torch.tensor(float(lam)))
        self.gamma = nn.Parameter(torch.tensor(float(gamma)))

    def forward(self, h_sem: Tensor, h_sym: Tensor, slot_mask: Tensor):
        # h_sym (B, ..., m); slot_mask (B, m)
        return self.linear(h_sem), slot_map(h_sym, slot_mask, self.lam, self.gamma)


def slot_map(h_sym: Tensor, slot_mask: Tensor, lam: Tensor, gamma: Tensor) -> Tensor:
    """(λI + γ11ᵀ) h_sym over the real slots: λ h_sym + γ (Σ_real h_sym) 1, padded slots 0.

    h_sym (B, ..., m), slot_mask (B, m); λ, γ scalars or tensors broadcasting against
    h_sym's leading dims (e.g. one per head, shaped (1, H, 1, 1))."""
    mask = expand_mask(slot_mask, h_sym)
    h_sym = h_sym * mask
    total = h_sym.sum(-1, keepdim=True)
    return (lam * h_sym + gamma * total) * mask


def expand_mask(slot_mask: Tensor, like: Tensor) -> Tensor:
    shape = [slot_mask.size(0)] + [1] * (like.dim() - 2) + [slot_mask.size(1)]
    return slot_mask.view(shape).to(like.dtype)


def masked_slot_softmax(h_sym: Tensor, slot_mask: Tensor) -> Tensor:
    """softmax over the real slots only (fp32, or fp64 for fp64 input); padded slots get 0;
    rows without slots are 0."""
    mask = expand_mask(slot_mask, h_sym).bool()
    x = h_sym.to(_at_least_fp32(h_sym.dtype)).masked_fill(~mask, float("-inf"))
    p = torch.softmax(x, dim=-1)
    return torch.nan_to_num(p, nan=0.0)


def _at_least_fp32(dtype: torch.dtype) -> torch.dtype:
    return torch.promote_types(dtype, torch.float32)


def slot_layer_norm(h_sym: Tensor, slot_mask: Tensor, eps: float = 1e-5) -> Tensor:
    """Normalise h_sym over its real slots (mean and variance over real slots only; no per-slot
    gain, which would break equivariance); padded slots re-zeroed."""
    mask = expand_mask(slot_mask, h_sym)
    n = mask.sum(-1, keepdim=True).clamp(min=1.0)
    mean = (h_sym * mask).sum(-1, keepdim=True) / n
    var = (((h_sym - mean) * mask) ** 2).sum(-1, keepdim=True) / n
    return (h_sym - mean) * torch.rsqrt(var + eps) * mask


def symbolic_output_probs(sem_logits: Tensor, h_sym: Tensor, symbols: ContextSymbols, beta_logit: Tensor,
                          unseen: Optional[Tensor] = None, parts: Optional[dict] = None) -> Tensor:
    """p = β softmax(B h_sem) + (1−β) B_φ softmax(h_sym), in fp32 (fp64 for fp64 input).

    sem_logits (B, T, V) = B h_sem; h_sym (B, T, m); β = sigmoid(beta_logit) (scalar).
    ``unseen`` (V,) bool: words unseen in training have a zero B row, i.e. logit exactly 0
    (as the paper sets their semantic embeddings to zero); their mass otherwise comes
    from the symbolic part.
    Returns probabilities (B, T, V) that sum to 1 over V where the example has a real slot
    (otherwise the semantic part takes all the mass).  ``parts``, when a dict, receives the
    terms of the sum: ``beta`` (B, 1, 1), the β used per example (1 where the example has no
    slot), ``semantic`` = softmax(B h_sem) and ``symbolic`` = B_φ softmax(h_sym), each (B, T, V),
    so that p = beta · semantic + (1 − beta) · symbolic (what ``nesyseq.load(...).answer`` reports).
    """
    logits = sem_logits.to(_at_least_fp32(sem_logits.dtype))
    if unseen is not None and bool(unseen.any()):
        logits = logits.masked_fill(unseen.view(1, 1, -1), 0.0)
    p_sem = torch.softmax(logits, dim=-1)
    p_slot = masked_slot_softmax(h_sym, symbols.slot_mask)                 # (B, T, m)
    B, T, V = p_sem.shape
    p_sym = torch.zeros_like(p_sem)
    index = symbols.slot_vocab.unsqueeze(1).expand(B, T, symbols.m)
    p_sym.scatter_add_(-1, index, p_slot.to(p_sem.dtype))                   # B_φ softmax(h_sym)
    beta = torch.sigmoid(beta_logit.to(logits.dtype))
    has = symbols.slot_mask.any(-1).view(B, 1, 1)
    beta = torch.where(has, beta, torch.ones_like(beta))
    if parts is not None:
        parts.update(beta=beta, semantic=p_sem, symbolic=p_sym)
    return beta * p_sem + (1.0 - beta) * p_sym


def mixture_normalized_probs(p: Tensor, log_probs: bool) -> Tensor:
    """``get_normalized_probs`` for a decoder that already returns the mixture p (B, T, V):
    p in at least fp32, or log p (clamped at 1e-30, so words with no mass stay finite)."""
    p = p.to(torch.promote_types(p.dtype, torch.float32))
    return torch.log(p.clamp(min=1e-30)) if log_probs else p


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


def symbol_ignore_ids(dictionary) -> List[int]:
    """Tokens that get no context slot in the symbolic seq2seq models (tp_transformer,
    folnet_transformer): pad, eos, bos and the bAbI separators ``.`` / ``?`` (as the memory
    models, qa_memnet.py)."""
    ids = [dictionary.pad(), dictionary.eos(), dictionary.bos()]
    return ids + [dictionary.indices[w] for w in (".", "?") if w in dictionary.indices]
