"""``tpr_rnn`` (third-order TPR-RNN, paper Sec. 4 eqs. 10-13 + appendix E eqs. 34-39) and
``stpr`` (symbolic TPR, eqs. 14-15) as fairseq models for ``--task babi_qa``.

    s_t = Σ_j A e_{x_tj} ⊙ p_j  [⊕ Σ_j α_x e_φ(x_tj)]              story / question embedding
    e^(1,2)_t, r^(1,2,3)_t = f(s_t)       two-layer tanh MLPs (hidden d)       (10) / (14)
    ŵ = F·e1·r1;  m̂ = F·e1·r2;  b̂ = F·e2·r3                                    (34, 36, 38)
    ΔF = e1⊗r1⊗(e2 − ŵ) + e1⊗r2⊗(ŵ − m̂) + e2⊗r3⊗(e1 − b̂)                     (35, 37, 39)
    question: e^(1,2), r^(1,2,3) = f(s_Q);  i1 = LN(F·e1·r1), i2 = LN(F·i1·r2), i3 = LN(F·i2·r3)
    p = softmax(Z (i1+i2+i3))   [stpr: eq. 4 on h = i1+i2+i3 ∈ ℝ^{d+m}, B ∈ ℝ^{n×d}]

Shapes follow the reference code, F[b, entity, role, entity] (TPR-RNN-Torch tpr_rnn.py:85)
and the read-out contracts the question's *entity* vector with F's first and its *role*
vector with F's second axis (tpr_rnn.py:138-140) where eq. 11-12 write n ∈ ℝ^R first: the
two dimensions are swapped relative to the paper's notation.  Z is a trained
parameter (TPR-RNN-Torch reads it through ``.data``, tpr_rnn.py:143, so never trains it; we do).

stpr: entities, roles and intermediate vectors live in ℝ^{d+m} (F is (d+m)³); its MLPs use
``SymbolicLinear`` (W on the semantic part, (λI + γ11ᵀ) on the symbolic part, biases on the
semantic part only) and tanh; its LN normalises the semantic part with LayerNorm and the
symbolic part over real slots only (``slot_layer_norm``); p_j multiplies the semantic part
only; story and question share A, α and p.
"""
import logging
from dataclasses import dataclass, field

import torch
from fairseq.models import FairseqEncoder, register_model, register_model_architecture
from torch import nn

from nesyseq.plugins.layers.entity_dropout import EntityDropout, EntityDropoutConfig
from nesyseq.plugins.layers.symbolic import (HybridEmbedding, SymbolicLinear, context_symbols, lookup_phi,
                                     slot_layer_norm, symbolic_output_probs)
from nesyseq.plugins.models.config_defaults import GroupedConfig, preset
from nesyseq.plugins.models.qa_common import QAModel, split_story

logger = logging.getLogger(__name__)


@dataclass
class TPREntityDropoutConfig(EntityDropoutConfig):
    entity_dropout_init_alpha: bool = field(default=False, metadata={
        "help": "stpr with --entity-dropout (ours): a dropped word's α also reads as its initial value "
                "sigmoid(0) = 1/2, which is the α an unseen word has at test time (its logit never "
                "gets a gradient); off: the dropped word keeps its learned α"})


@dataclass
class TPRConfig(GroupedConfig):
    embed_dim: int = field(default=32, metadata={"help": "d: word / symbol embedding size"})
    hidden_dim: int = field(default=40, metadata={"help": "MLP hidden size (config_1.json:4)"})
    entity_dim: int = field(default=90, metadata={"help": "E (tpr_rnn only; stpr uses d+m; config_1.json:3)"})
    role_dim: int = field(default=20, metadata={"help": "R (tpr_rnn only; stpr uses d+m)"})
    max_words: int = field(default=20, metadata={"help": "positional-embedding rows"})
    max_symbols: int = field(default=512, metadata={"help": "cap on m"})
    dropout: float = field(default=0.0, metadata={"help": "dropout on story/question embeddings"})
    init_limit: float = field(default=0.1, metadata={"help": "A ~ U(-limit, limit) (tpr_rnn.py:45)"})
    zero_unseen_alpha: bool = field(default=False, metadata={"help": "also zero α of unseen words"})
    sym_lambda_init: float = field(default=0.1, metadata={
        "help": "stpr: initial λ of every symbolic MLP layer (γ starts at 0). 1.0 starts the TPR "
                "write gain |e|²|r|² above 2, where the update overshoots and F diverges (docs/qa.md)"})
    beta_init: float = field(default=0.0, metadata={
        "help": "stpr: initial logit of β, the weight of the semantic output in eq. 4 (0: β = 1/2, "
                "the paper's range [0, 1] with no stated init)"})
    freeze_beta: bool = field(default=False, metadata={
        "help": "stpr: keep β at sigmoid(--beta-init) instead of learning it (ours; the paper learns β)"})
    symbolic_positions: bool = field(default=False, metadata={
        "help": "stpr (ours, not the paper): weigh word j's symbolic part by a learned scalar γ_j "
                "(init 1), s_t = Σ_j (A e_x ⊙ p_j) ⊕ (γ_j α_x e_φ(x)); the paper's symbolic part is "
                "a bag of symbols (eq. 13), so with all entities new 'P went to the R' cannot tell P "
                "from R. A scalar per position, not per word, keeps symbol-shift equivariance"})
    symbolic_positions_per_role: bool = field(default=False, metadata={
        "help": "stpr (ours, not the paper; implies --symbolic-positions): one row of γ_j per MLP that "
                "reads a sentence (e1, e2, r1, r2, r3 of the story; e, r1, r2, r3 of the question), "
                "init 1, so each role weighs the word positions on its own. With one shared row the "
                "roles pull γ_j both ways and a trained γ_j can sit near 0, erasing that position's "
                "symbol (docs/qa.md). Still one scalar per position and role, never per word"})
    symbolic_spare_slots: int = field(default=0, metadata={
        "help": "stpr (ours, not the paper): in training, give each batch k ~ U{0..K} more symbol "
                "slots that no word fills, so that the slot statistics (the layer norm, the sums "
                "and the softmax over slots) meet more symbols than the training stories hold; "
                "evaluation adds none. 0: off"})
    entity_drop: TPREntityDropoutConfig = field(default_factory=TPREntityDropoutConfig)


class _MLP(nn.Module):
    """Two tanh layers (TPR-RNN-Torch utils.py:21-24); symbolic: SymbolicLinear layers."""

    def __init__(self, d_in, hidden, d_out, symbolic, lam=1.0):
        super().__init__()
        self.symbolic = symbolic
        if symbolic:
            self.l1, self.l2 = SymbolicLinear(d_in, hidden, lam=lam), SymbolicLinear(hidden, d_out, lam=lam)
        else:
            self.l1, self.l2 = nn.Linear(d_in, hidden), nn.Linear(hidden, d_out)

    def forward(self, sem, sym=None, mask=None):
        if not self.symbolic:
            return torch.tanh(self.l2(torch.tanh(self.l1(sem)))), None
        sem, sym = self.l1(sem, sym, mask)
        sem, sym = self.l2(torch.tanh(sem), torch.tanh(sym), mask)
        return torch.tanh(sem), torch.tanh(sym)


def _cat(sem, sym):
    return sem if sym is None else torch.cat([sem, sym], -1)


class _FactoredTPR:
    """The third-order memory F[b, e, r, f] = Σ_n P[b,n,e] Q[b,n,r] U[b,n,f], kept as its
    rank-one terms.  Every update ΔF (eqs. 35, 37, 39) is a sum of three outer products, so
    after t sentences F has 3t terms, and a read

        F·a·b = einsum("be,br,berf->bf", a, b, F) = Σ_n (P_n·a)(Q_n·b) U_n        (B, E)

    costs O(t·(2E+R)) instead of O(E²R), and the (B, E, R, E) tensor (one per sentence saved
    for backward: 50 × 32 × 90 × 20 × 90 floats in the bAbI config) never exists.  Same sums,
    regrouped: ``tests/test_qa_tpr.py`` checks it against the dense formula."""

    def __init__(self):
        self.P = self.Q = self.U = None            # (B, n, E) / (B, n, R) / (B, n, E)

    def read(self, a, b):
        if self.P is None:
            return torch.zeros_like(a)
        coef = (self.P @ a.unsqueeze(-1)) * (self.Q @ b.unsqueeze(-1))        # (B, n, 1)
        return (coef * self.U).sum(1)                                          # (B, E)

    def write(self, es, rs, fs):
        new = [torch.stack(x, 1) for x in (es, rs, fs)]                        # three terms each
        if self.P is None:
            self.P, self.Q, self.U = new
        else:
            self.P, self.Q, self.U = (torch.cat([old, x], 1) for old, x in zip((self.P, self.Q, self.U), new))


class TPREncoder(FairseqEncoder):
    # the MLPs that read a sentence embedding, in the row order of ``sym_pos_roles``
    ROLES = ("story_e1", "story_e2", "story_r1", "story_r2", "story_r3", "q_e", "q_r1", "q_r2", "q_r3")
    STORY_ROLES, QUESTION_ROLES = slice(0, 5), slice(5, 9)

    def __init__(self, cfg, dictionary, symbolic):
        super().__init__(dictionary)
        self.cfg, self.symbolic = cfg, symbolic
        V, d = len(dictionary), cfg.embed_dim
        self.pad, self.eos = dictionary.pad(), dictionary.eos()
        self.sent_end, self.q_end = dictionary.index("."), dictionary.index("?")
        self.ignore = [dictionary.pad(), dictionary.eos(), dictionary.bos(), self.sent_end, self.q_end]
        self.A = HybridEmbedding(V, d, padding_idx=self.pad)
        nn.init.uniform_(self.A.semantic.weight, -cfg.init_limit, cfg.init_limit)
        self.pos = nn.Parameter(torch.full((cfg.max_words, d), 1.0 / cfg.max_words))   # tpr_rnn.py:47-49
        self.sym_pos_roles = None
        if symbolic and cfg.symbolic_positions_per_role:                       # γ_kj (ours): one row per role
            self.sym_pos_roles = nn.Parameter(torch.ones(len(self.ROLES), cfg.max_words))
        elif symbolic and cfg.symbolic_positions:                              # γ_j (ours), off: eq. 13
            self.sym_pos = nn.Parameter(torch.ones(cfg.max_words))
        E = d if symbolic else cfg.entity_dim
        R = d if symbolic else cfg.role_dim
        H, lam = cfg.hidden_dim, cfg.sym_lambda_init
        self.story_e = nn.ModuleList([_MLP(d, H, E, symbolic, lam) for _ in range(2)])
        self.story_r = nn.ModuleList([_MLP(d, H, R, symbolic, lam) for _ in range(3)])
        self.q_e = _MLP(d, H, E, symbolic, lam)
        self.q_r = nn.ModuleList([_MLP(d, H, R, symbolic, lam) for _ in range(3)])
        self.ln = nn.ModuleList([nn.LayerNorm(E) for _ in range(3)])
        self.Z = nn.Linear(E, V, bias=False)                                   # trained (unlike .data)
        if symbolic:
            self.beta_logit = nn.Parameter(torch.tensor(float(cfg.beta_init)), requires_grad=not cfg.freeze_beta)
        self.dropout = nn.Dropout(cfg.dropout)
        self.entity_dropout = EntityDropout(cfg.entity_drop, dictionary)

    def entity_dropout_rate(self) -> float:
        """The largest of the entity-dropout rates; 0 when entity dropout is off."""
        return self.entity_dropout.rate()

    def validation_entity_dropout(self, seed: int):
        """Inside: entity dropout applies in eval mode too, drawn from a generator seeded with
        ``seed`` (the babi_qa task's --valid-entity-dropout, docs/qa.md)."""
        return self.entity_dropout.validation(seed, self.A.semantic.weight.device)

    def set_unseen(self, ids):
        """Words unseen in training: zero semantic embedding (A) and output (Z) rows, the paper's
        protocol.  Both are masks on the buffer ``A.unseen`` applied in forward, never edits of
        the weights: fairseq builds the model (and calls this) *before* it loads the checkpoint,
        so zeroed weight rows would be overwritten with their trained values."""
        self.A.set_unseen(ids, zero_alpha=self.cfg.zero_unseen_alpha)

    def entity_dropout_mask(self, src_tokens, generator=None, slots=None):
        """(B, V) bool: the words treated as unseen in each example (``EntityDropout``); None when
        off or in eval mode.  ``slots``: the uncapped ``context_symbols`` of ``src_tokens`` if the
        caller has them already."""
        if not self.entity_dropout.active():
            return None
        if slots is None:
            slots = context_symbols(src_tokens, self.ignore, self.pad)           # (B, m)
        return self.entity_dropout(slots, generator)

    def _spare_slots(self) -> int:
        """How many empty slots this batch gets: k ~ U{0..--symbolic-spare-slots} in training, else 0."""
        K = self.cfg.symbolic_spare_slots
        if not self.training or K <= 0:
            return 0
        return int(torch.randint(0, K + 1, ()).item())

    def _embed(self, tokens, phi, m, drop=None, roles=slice(None)):
        """Sentence embeddings s = Σ_j A e_x ⊙ p_j [⊕ Σ_j γ_j α_x e_φ(x)] of ``tokens`` (..., W):
        sem (..., d) and sym (..., m), or None.  With --symbolic-positions-per-role, sym is
        (K, ..., m), row k weighed by γ of role ``roles[k]`` (a slice of ``ROLES``)."""
        W = tokens.size(-1)
        if W > self.pos.size(0):
            raise ValueError(f"a sentence has {W} words > --max-words {self.pos.size(0)}")
        # the dropped words of each example, per position: (B*S, W, 1)
        hit = None if drop is None else drop.gather(1, tokens.reshape(tokens.size(0), -1)).view(-1, W, 1)
        init_alpha = (hit[..., 0] if hit is not None and self.symbolic and self.cfg.entity_drop.entity_dropout_init_alpha
                      else None)
        sem, sym = self.A(tokens.flatten(0, -2), phi.flatten(0, -2), m, init_alpha=init_alpha)
        if hit is not None:                                    # zero the dropped words' A rows, per example
            sem = sem.masked_fill(hit, 0.0)
            if self.symbolic and self.cfg.zero_unseen_alpha:
                sym = sym.masked_fill(hit, 0.0)
        sem = (self.dropout(sem) * self.pos[:W]).view(*tokens.shape, -1).sum(-2)
        if self.symbolic:
            sym = sym.view(*tokens.shape, -1)                                  # (..., W, m)
            if self.sym_pos_roles is not None:                                 # Σ_j γ_kj α_x e_φ(x), per role k
                sym = torch.einsum("...wm,kw->k...m", sym, self.sym_pos_roles[roles, :W])   # (K, ..., m)
            else:
                if self.cfg.symbolic_positions:
                    sym = sym * self.sym_pos[:W].unsqueeze(-1)                 # γ_j α_x e_φ(x)
                sym = sym.sum(-2)
        else:
            sym = None
        return sem, sym

    def _per_role(self, sym, n):
        """The symbolic sentence part each of ``n`` role MLPs reads: the rows of a per-role
        ``sym`` (n, ...), or the one shared ``sym`` (or None) n times."""
        return list(sym.unbind(0)) if self.sym_pos_roles is not None else [sym] * n

    def _ln(self, k, v, mask):
        d = self.cfg.embed_dim
        if not self.symbolic:
            return self.ln[k](v)
        return torch.cat([self.ln[k](v[..., :d]), slot_layer_norm(v[..., d:], mask)], -1)

    def forward(self, src_tokens, src_lengths=None, **unused):
        story, question = split_story(src_tokens, self.sent_end, self.q_end, self.pad, self.eos)
        B, S, W = story.shape
        real = story.ne(self.pad).any(-1)                                      # (B, S)
        # one numbering of the context serves both the dropout mask (every word) and φ (capped)
        slots = (context_symbols(src_tokens, self.ignore, self.pad)
                 if self.symbolic or self.entity_dropout.active() else None)
        drop = self.entity_dropout_mask(src_tokens, slots=slots)              # (B, V) or None
        if self.symbolic:
            sym = slots.first(self.cfg.max_symbols)
            phi_s, phi_q = lookup_phi(story.view(B, S * W), sym).view(B, S, W), lookup_phi(question, sym)
            sym = sym.with_spare(self._spare_slots(), self.pad)               # after φ: no word fills them
            m, mask = sym.m, sym.slot_mask
        else:
            sym, m, mask = None, 0, None
            phi_s, phi_q = torch.full_like(story, -1), torch.full_like(question, -1)
        s_sem, s_sym = self._embed(story, phi_s, m, drop, self.STORY_ROLES)   # (B, S, d), (B, S, m) or (5, B, S, m)
        s_sym = self._per_role(s_sym, 5)
        e1, e2, r1, r2, r3 = [_cat(*f(s_sem, x, mask)) for f, x in zip([*self.story_e, *self.story_r], s_sym)]
        F = _FactoredTPR()
        for t in range(S):
            keep = real[:, t].to(e1.dtype).view(B, 1)                         # padded sentences write nothing
            a1, a2, b1, b2, b3 = e1[:, t], e2[:, t], r1[:, t], r2[:, t], r3[:, t]
            w_hat, m_hat, b_hat = F.read(a1, b1), F.read(a1, b2), F.read(a2, b3)   # (34), (36), (38)
            F.write([a1, a1, a2], [b1, b2, b3],                                    # (35), (37), (39)
                    [(a2 - w_hat) * keep, (w_hat - m_hat) * keep, (a1 - b_hat) * keep])
        q_sem, q_sym = self._embed(question.unsqueeze(1), phi_q.unsqueeze(1), m, drop, self.QUESTION_ROLES)
        q_sem = q_sem.squeeze(1)                                               # (B, d)
        q_sym = [None if x is None else x.squeeze(1) for x in self._per_role(q_sym, 4)]   # (B, m) each
        i = _cat(*self.q_e(q_sem, q_sym[0], mask))
        h = 0
        for k in range(3):
            role = _cat(*self.q_r[k](q_sem, q_sym[k + 1], mask))
            i = self._ln(k, F.read(i, role), mask)
            h = h + i
        d = self.cfg.embed_dim
        logits = self.Z(h[..., :d] if self.symbolic else h)                  # (B, V)
        if self.A.zero_unseen:                                                 # an unseen word's Z row reads as 0
            logits = logits.masked_fill(self.A.unseen, 0.0)
        if drop is not None:                                                   # so does a dropped word's
            logits = logits.masked_fill(drop, 0.0)
        parts = {}                                                             # stpr: the β split of p
        if self.symbolic:
            probs = symbolic_output_probs(logits.unsqueeze(1), h[..., d:].unsqueeze(1), sym, self.beta_logit,
                                          parts=parts)
        else:
            probs = torch.softmax(logits.float(), -1).unsqueeze(1)
        return {"answer_probs": [probs[:, 0]], "symbols": sym, "output_parts": parts}

    def reorder_encoder_out(self, encoder_out, new_order):
        sym = encoder_out["symbols"]
        return {"answer_probs": [encoder_out["answer_probs"][0].index_select(0, new_order)],
                "symbols": None if sym is None else sym.index_select(new_order)}

    def max_positions(self):
        return int(1e6)


class _TPRModel(QAModel):
    encoder_class = TPREncoder
    config_class = TPRConfig

    def entity_dropout_rate(self) -> float:
        return self.encoder.entity_dropout_rate()

    def validation_entity_dropout(self, seed: int):
        return self.encoder.validation_entity_dropout(seed)


@register_model("tpr_rnn", dataclass=TPRConfig)
class TPRRNNModel(_TPRModel):
    symbolic = False


@register_model("stpr", dataclass=TPRConfig)
class SymbolicTPRModel(_TPRModel):
    symbolic = True


@register_model_architecture("tpr_rnn", "tpr_rnn_babi")
def tpr_rnn_babi(cfg):
    """TPR-RNN-Torch configs/config_1.json:3-6: E = 90, hidden 40, R = 20.  Its word embedding
    width is the vocabulary size (train.py:60); ours is --embed-dim (default 32).  These sizes
    are the TPRConfig defaults."""


@register_model_architecture("stpr", "stpr_babi")
def stpr_babi(cfg):
    tpr_rnn_babi(cfg)


@register_model_architecture("tpr_rnn", "tpr_rnn_small")
def tpr_rnn_small(cfg):
    """The paper's small variant: d = 20 with dropout 0.5."""
    preset(cfg, embed_dim=20, hidden_dim=20, dropout=0.5)


@register_model_architecture("stpr", "stpr_small")
def stpr_small(cfg):
    tpr_rnn_small(cfg)
