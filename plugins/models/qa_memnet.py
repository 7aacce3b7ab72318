"""``memnet`` (end-to-end memory network) and ``smn`` (symbolic memory network), paper Sec. 4
eqs. 7-9 and appendix D eqs. 30-33, as fairseq models for ``--task babi_qa``.

Input: the flat source ``s_1 . s_2 . ... s_n . q ?`` of ``nesyseq prepare qa``; it is cut
back into sentences (``split_story``).  Output: the answer distribution at target step 0
and a certain ``</s>`` after it, so ``cross_entropy`` and ``fairseq-generate`` (answer then
eos) work unchanged.

memnet (K hops, A^(0..K), adjacent tying, p = softmax(A^(K)ᵀ u^(K))):
    m_i = Σ_j A^(k) e_{x_ij} ⊙ p_j + T_A(i)          (7)+(30)   position p_j: learned, multiplied
    c_i = Σ_j A^(k+1) e_{x_ij} ⊙ p_j + T_C(i)        (7)+(31)   (the TPR positional embedding)
    u^(k+1) = u^(k) + Σ_i softmax_i(m_iᵀ u^(k)) c_i  (8)        softmax over real sentences only
smn: every representation is ⊕ a symbolic part in ℝ^m (m = context symbols of the example):
    m_i = Σ_j (A^(k) e ⊙ p_j) + T_A(i)  ⊕  α_A(i) Σ_j α^(k)_{x_ij} e_φ(x_ij)   (32)
    c_i = Σ_j (A^(k+1) e ⊙ p_j) + T_C(i) ⊕ α_C(i) Σ_j α^(k+1)_{x_ij} e_φ(x_ij) (33)
    p = β softmax(A^(K) u_sem) + (1−β) B_φ softmax(u_sym)                    (4) with Bᵀ = A^(K)
K+1 separate α^(k); T_A/T_C added once per sentence (eq. 30), shared across hops as in
jojonki/MemoryNetworks memnn.py:27-28,63,69; T indexes sentences from the most recent one
(so it does not depend on padding).  Init: A ~ N(0, 0.1) (memnn.py:17-21), p_j = 1/max_words
(TPR-RNN-Torch tpr_rnn.py:47-49), α, β logits 0, α_A = α_C = 1.
MemN2N training recipe (Sukhbaatar et al. 2015, as facebookarchive/MemNN MemN2N-babi-matlab runs
it; on in the *_babi presets): linear start (--linear-start-epochs: no softmax in the hops for the
first epochs) and random noise (--random-noise: train-time gaps in the temporal indices); the lr
schedule is --lr-scheduler memn2n_step (plugins/lr_scheduler/memn2n_step.py).  See docs/qa.md.
"""

import math
from dataclasses import dataclass, field

import torch
from fairseq.dataclass import FairseqDataclass
from fairseq.models import FairseqEncoder, register_model, register_model_architecture
from torch import Tensor, nn

from nesyseq.plugins.layers.symbolic import HybridEmbedding, context_symbols, lookup_phi, symbolic_output_probs
from nesyseq.plugins.models.config_defaults import preset
from nesyseq.plugins.models.qa_common import QAModel, split_story


@dataclass
class MemNetConfig(FairseqDataclass):
    embed_dim: int = field(default=50, metadata={"help": "d"})
    hops: int = field(default=3, metadata={"help": "K"})
    max_story: int = field(default=130, metadata={"help": "T: temporal-encoding rows (memory size)"})
    max_words: int = field(default=20, metadata={"help": "positional-embedding rows (words per sentence)"})
    max_symbols: int = field(default=512, metadata={"help": "cap on m (context symbols)"})
    dropout: float = field(default=0.0, metadata={"help": "dropout on word embeddings"})
    init_std: float = field(default=0.1, metadata={"help": "std of A^(k)"})
    zero_unseen_alpha: bool = field(default=False, metadata={"help": "also zero α of words unseen in training"})
    linear_start_epochs: int = field(default=0, metadata={
        "help": "linear start (LS, Sukhbaatar et al. 2015 Sec. 4.2): train the first N epochs with the softmax "
                "removed from every memory hop, then re-insert it (0: off; the *_babi presets: 20, as "
                "facebookarchive/MemNN MemN2N-babi-matlab/config_babi.m:31). Needs --task babi_qa (its "
                "begin_epoch hook switches it off); the state is a buffer, so it survives checkpoint resume"})
    random_noise: float = field(default=0.0, metadata={
        "help": "random noise (RN, Sukhbaatar et al. 2015 Sec. 4.1): at train time only, leave up to "
                "ceil(RN*n) empty slots at random among the temporal indices of a story of n sentences "
                "(0: off; the *_babi presets: 0.1, as config_babi.m:19)"})


class MemNetEncoder(FairseqEncoder):
    """The whole memory network; "encoder" only in fairseq's sense.  Returns the answer
    distribution (probabilities, fp32) for the decoder to emit at step 0."""

    def __init__(self, cfg, dictionary, symbolic: bool):
        super().__init__(dictionary)
        self.cfg, self.symbolic = cfg, symbolic
        V, d = len(dictionary), cfg.embed_dim
        self.pad, self.eos = dictionary.pad(), dictionary.eos()
        self.sent_end, self.q_end = dictionary.index("."), dictionary.index("?")
        self.ignore = [dictionary.pad(), dictionary.eos(), dictionary.bos(), self.sent_end, self.q_end]
        self.A = nn.ModuleList([HybridEmbedding(V, d, padding_idx=self.pad, init_std=cfg.init_std)
                                for _ in range(cfg.hops + 1)])
        self.pos = nn.Parameter(torch.full((cfg.max_words, d), 1.0 / cfg.max_words))
        self.TA = nn.Parameter(torch.randn(cfg.max_story, d) * cfg.init_std)
        self.TC = nn.Parameter(torch.randn(cfg.max_story, d) * cfg.init_std)
        if symbolic:
            self.alpha_A = nn.Parameter(torch.ones(cfg.max_story))
            self.alpha_C = nn.Parameter(torch.ones(cfg.max_story))
            self.beta_logit = nn.Parameter(torch.zeros(()))
        self.dropout = nn.Dropout(cfg.dropout)
        # LS state: True while the memory hops run without their softmax.  A buffer, so that a
        # checkpoint saved during the linear phase is resumed / evaluated the way it was trained.
        self.register_buffer("linear_start_on", torch.tensor(cfg.linear_start_epochs > 0))

    def begin_epoch(self, epoch: int):
        """Linear start ends after ``--linear-start-epochs`` epochs (fairseq epochs count from 1)."""
        self.linear_start_on.fill_(0 < epoch <= self.cfg.linear_start_epochs)

    def upgrade_state_dict_named(self, state_dict, name):
        key = (name + "." if name else "") + "linear_start_on"
        if key not in state_dict:          # checkpoints from before LS existed: softmax on
            state_dict[key] = torch.tensor(False)
        return state_dict

    def temporal_index(self, real: Tensor) -> Tensor:
        """(B, S) real-sentence mask (right-aligned) -> (B, S) rows of T_A / T_C.

        Without noise: 0 for the most recent sentence, 1 for the one before, ... (padding gets
        whatever index follows; it is masked out of the attention).  With ``--random-noise`` r in
        training: a story of n sentences gets k ~ U{0..ceil(r n)} empty slots, and its sentences take
        a uniformly random n-subset of 0..n+k-1 in recency order, i.e. k empty memories inserted at
        random places (MemN2N-babi-matlab/train.m:30-34); capped at --max-story - 1 (train.m:33).
        Evaluation never adds noise (train.m:70-71)."""
        B, S = real.shape
        recency = torch.arange(S - 1, -1, -1, device=real.device).expand(B, S)
        rn = self.cfg.random_noise
        if not (self.training and rn > 0):
            return recency
        n = real.sum(1)                                                         # (B,)
        k = (torch.rand(B, device=real.device) * (torch.ceil(n * rn) + 1)).floor().long()
        L = S + int(math.ceil(S * rn))
        j = torch.arange(L, device=real.device)
        keys = torch.rand(B, L, device=real.device).masked_fill(j >= (n + k)[:, None], 2.0)
        rank = keys.argsort(1).argsort(1)                                       # rank of each candidate slot
        chosen = rank < n[:, None]                                              # n of the first n+k slots
        slots = torch.where(chosen, j, torch.full_like(j, L + S)).sort(1).values  # chosen slots ascending
        idx = slots.gather(1, recency.clamp(max=L - 1))                        # r-th most recent -> r-th slot
        idx = torch.where(recency < n[:, None], idx, recency)                  # padding: as without noise
        return idx.clamp(max=self.TA.size(0) - 1)

    def set_unseen(self, ids):
        for emb in self.A:
            emb.set_unseen(ids, zero_alpha=self.cfg.zero_unseen_alpha)

    def _sum_words(self, emb: HybridEmbedding, tokens: Tensor, phi: Tensor, m: int):
        """tokens (..., W) -> Σ_j A e ⊙ p_j (..., d) and Σ_j α e_φ (..., m)."""
        W = tokens.size(-1)
        if W > self.pos.size(0):
            raise ValueError(f"a sentence has {W} words > --max-words {self.pos.size(0)}")
        sem, sym = emb(tokens.flatten(0, -2), phi.flatten(0, -2), m)
        sem = self.dropout(sem) * self.pos[:W]
        sem = sem.view(*tokens.shape, -1).sum(-2)
        sym = sym.view(*tokens.shape, -1).sum(-2) if self.symbolic else None
        return sem, sym

    def forward(self, src_tokens, src_lengths=None, **unused):
        story, question = split_story(src_tokens, self.sent_end, self.q_end, self.pad, self.eos)
        B, S, W = story.shape
        if S > self.TA.size(0):
            raise ValueError(f"{S} story sentences > --max-story {self.TA.size(0)}")
        real = story.ne(self.pad).any(-1)                                    # (B, S) real sentences
        if self.symbolic:
            sym = context_symbols(src_tokens, self.ignore, self.pad, self.cfg.max_symbols)
            m = sym.m
            phi_s, phi_q = lookup_phi(story.view(B, S * W), sym).view(B, S, W), lookup_phi(question, sym)
        else:
            sym, m = None, 0
            phi_s, phi_q = torch.full_like(story, -1), torch.full_like(question, -1)
        T = self.temporal_index(real)                                        # (B, S), 0 = most recent sentence
        linear = bool(self.linear_start_on)
        hops = []                                                            # each hop's attention (B, S)
        u_sem, u_sym = self._sum_words(self.A[0], question.unsqueeze(1), phi_q.unsqueeze(1), m)
        u_sem, u_sym = u_sem.squeeze(1), (u_sym.squeeze(1) if self.symbolic else None)
        for k in range(self.cfg.hops):
            m_sem, m_sym = self._sum_words(self.A[k], story, phi_s, m)
            c_sem, c_sym = self._sum_words(self.A[k + 1], story, phi_s, m)
            m_sem = m_sem + self.TA[T]                                       # once per sentence (eq. 30)
            c_sem = c_sem + self.TC[T]
            score = torch.einsum("bsd,bd->bs", m_sem, u_sem)
            if self.symbolic:
                m_sym = m_sym * self.alpha_A[T].unsqueeze(-1)                # eq. 32
                c_sym = c_sym * self.alpha_C[T].unsqueeze(-1)                # eq. 33
                score = score + torch.einsum("bsm,bm->bs", m_sym, u_sym)
            if linear:                                                       # LS: no softmax (train_linear_start.m:8-11)
                attn = score.masked_fill(~real, 0.0)
            else:
                attn = torch.softmax(score.float().masked_fill(~real, float("-inf")), -1)
                attn = torch.nan_to_num(attn, nan=0.0).to(score.dtype)       # (B, S)
            hops.append(attn)
            u_sem = u_sem + torch.einsum("bs,bsd->bd", attn, c_sem)
            if self.symbolic:
                u_sym = u_sym + torch.einsum("bs,bsm->bm", attn, c_sym)
        out_emb = self.A[-1]
        weight = out_emb.semantic.weight
        if out_emb.zero_unseen:
            weight = weight.masked_fill(out_emb.unseen.unsqueeze(-1), 0.0)
        logits = (u_sem @ weight.t()).unsqueeze(1)                           # B h_sem, Bᵀ = A^(K)
        parts = {}                                                           # smn: the β split of p
        if self.symbolic:
            probs = symbolic_output_probs(logits, u_sym.unsqueeze(1), sym, self.beta_logit, parts=parts)
        else:
            probs = torch.softmax(logits.float(), -1)
        # hop_attention (B, K, S): sentences right-aligned as in split_story (column -1 the most recent)
        return {"answer_probs": [probs[:, 0]], "symbols": sym, "output_parts": parts,
                "hop_attention": [torch.stack(hops, 1)]}

    def reorder_encoder_out(self, encoder_out, new_order):
        sym = encoder_out["symbols"]
        return {"answer_probs": [encoder_out["answer_probs"][0].index_select(0, new_order)],
                "symbols": None if sym is None else sym.index_select(new_order)}

    def max_positions(self):
        return int(1e6)


@register_model("memnet", dataclass=MemNetConfig)
class MemNetModel(QAModel):
    symbolic = False
    encoder_class = MemNetEncoder
    config_class = MemNetConfig


@register_model("smn", dataclass=MemNetConfig)
class SymbolicMemNetModel(QAModel):
    symbolic = True
    encoder_class = MemNetEncoder
    config_class = MemNetConfig


@register_model_architecture("memnet", "memnet_babi")
def memnet_babi(cfg):
    preset(cfg, linear_start_epochs=20,    # config_babi.m:29-31
           random_noise=0.1)               # config_babi.m:19


@register_model_architecture("smn", "smn_babi")
def smn_babi(cfg):
    memnet_babi(cfg)
