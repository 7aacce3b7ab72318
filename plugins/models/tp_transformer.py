"""TP-Transformer (Schlag et al., "Enhancing the Transformer with explicit
relational encoding for math problem solving") as a fairseq encoder-decoder.

Cell (eq. 1), for the encoder:
    h = z + TPMHA(LN(z), LN(z_{1:T}))
    z' = LN(h + FF(LN(h)))
The decoder cell has masked self TP-attention, then TP-attention over the final
encoder states, then FF, with the same pre-LN / residual / output-LN layout.
The output distribution is softmax(E^T z) with E shared by encoder, decoder and
output (eq. 8).

Architectures:
    tp_transformer_math   d=512, ffn 2048, H=8, L=6 (+6), dropout 0   (the paper)
    transformer_math      the same with r ≡ 1 everywhere (the fair baseline)
    tp_transformer_tiny / transformer_math_tiny   small presets for CPU tests
    transformer_math_wide / transformer_math_tiny_wide   the baselines with a wider FF, at the
                          TP-Transformer's parameter count (within 0.1%)

``--symbolic-embeddings`` / ``--symbolic-output`` (symbol-shift equivariance, any preset):
every token also carries a symbolic state s ∈ ℝ^m over the distinct words of the source
(plugins/layers/symbolic_transformer.py says how it flows through a cell); the output is
p = β softmax(E^T z) + (1−β) B_φ softmax(s), fp32, from ``get_normalized_probs``.
"""

from dataclasses import dataclass, field
from functools import partial
from typing import Dict, List, Optional

import torch
import torch.nn.functional as F
from torch import Tensor, nn
from torch.utils.checkpoint import checkpoint

from fairseq.dataclass import ChoiceEnum
from fairseq.models import (
    FairseqEncoder,
    FairseqEncoderDecoderModel,
    FairseqIncrementalDecoder,
    register_model,
    register_model_architecture,
)

from nesyseq.plugins.layers.symbolic import (ContextSymbols, SlotLayerNorm, SymbolAlpha, SymbolicFeedForward,
                                     context_symbols, lookup_phi, mixture_normalized_probs, symbol_ignore_ids,
                                     symbolic_output_probs)
from nesyseq.plugins.layers.symbolic_transformer import SymbolicTPMultiheadAttention
from nesyseq.plugins.layers.entity_dropout import EntityDropout, EntityDropoutConfig, dropout_rate
from nesyseq.plugins.layers.relative_position import RelativePositionBias
from nesyseq.plugins.layers.tp_attention import TPMultiheadAttention
from nesyseq.plugins.layers.tp_embedding import TPEmbedding, positions_from_padding
from nesyseq.plugins.models.config_defaults import GroupedConfig, SymbolicConfig, is_symbolic, model_config, preset
from nesyseq.plugins.torch_compile import CompileConfig, call_eager, maybe_compile

ROLE_INIT_CHOICES = ChoiceEnum(["xavier", "default"])


@dataclass
class TPSymbolicConfig(SymbolicConfig):
    symbolic_score_init: float = field(
        default=1.0, metadata={"help": "init of λ_q, the weight of the symbolic score term s_tᵀ(λ_q I + "
                                       "γ_q 11ᵀ)s_i in every attention (ours; 1: the plain dot product s_tᵀs_i)"})


@dataclass
class TPTransformerConfig(CompileConfig, GroupedConfig):
    encoder_embed_dim: int = field(default=512, metadata={"help": "d_z, the model width"})
    encoder_ffn_embed_dim: int = field(default=2048, metadata={"help": "d_f, the FF hidden width"})
    encoder_attention_heads: int = field(default=8, metadata={"help": "H, heads per TP-attention"})
    encoder_layers: int = field(default=6, metadata={"help": "L, encoder cells"})
    decoder_layers: int = field(default=6, metadata={"help": "decoder cells"})
    dropout: float = field(default=0.0, metadata={"help": "dropout on sub-layer outputs"})
    attention_dropout: float = field(default=0.0, metadata={"help": "dropout on attention weights"})
    activation_dropout: float = field(default=0.0, metadata={"help": "dropout inside FF"})
    no_role_binding: bool = field(
        default=False, metadata={"help": "fix every role to 1: standard attention instead of "
                                         "TP-attention (the transformer_math baseline)"})
    no_embedding_role: bool = field(
        default=False, metadata={"help": "z_0 = e instead of z_0 = e ⊙ (W^(p) e + b^(p)) (eq. 2)"})
    role_init: ROLE_INIT_CHOICES = field(
        default="xavier", metadata={"help": "init of the attention projections W_q, W_k, W_v, "
                                            "W^(r), W_o: 'xavier' (paper) or 'default' (torch's "
                                            "nn.Linear init for all of them, what the authors' "
                                            "code effectively uses)"})
    embed_init_std: Optional[float] = field(
        default=None, metadata={"help": "E ~ N(0, std^2); default 1/sqrt(d) as the authors' code, "
                                        "so that E*sqrt(d) ~ N(0,1) (the paper's 'N(0,1)')"})
    embedding_role_init_mean: float = field(
        default=0.0, metadata={"help": "W^(p) ~ N(mean, std^2) of the embedding role (eq. 2)"})
    embedding_role_init_std: Optional[float] = field(
        default=None, metadata={"help": "std of W^(p); default 1/sqrt(d) as the authors' code"})
    embedding_role_offset: float = field(
        default=1.0, metadata={"help": "r = W^(p) e + b^(p) + offset; 1 (authors' code) makes "
                                       "r ~ N(1,1) at init (the paper's 'N(1,1)')"})
    untie_embeddings: bool = field(
        default=False, metadata={"help": "separate encoder, decoder and output embeddings instead "
                                         "of the paper's one shared E (eq. 8, joined dictionary)"})
    max_source_positions: int = field(default=1024, metadata={"help": "longest source"})
    max_target_positions: int = field(default=1024, metadata={"help": "longest target"})
    checkpoint_activations: bool = field(
        default=False, metadata={"help": "recompute each cell in backward to save memory"})
    encoder_relative_buckets: int = field(
        default=0, metadata={"help": "learned relative-position bias b^h[bucket(i - t)] on the encoder's "
                                     "self-attention scores with this many buckets (T5-style, ours; "
                                     "0 = off, the paper's absolute positions only)"})
    encoder_relative_max_distance: int = field(
        default=128, metadata={"help": "offsets at or beyond this share the last relative bucket"})
    zero_unseen_alpha: bool = field(
        default=False, metadata={"help": "also zero α of words unseen in training (babi_qa's "
                                         "unseen.txt); the paper is silent"})
    symbolic: TPSymbolicConfig = field(default_factory=TPSymbolicConfig)
    entity_drop: EntityDropoutConfig = field(default_factory=EntityDropoutConfig)


class FeedForward(nn.Module):
    """FF(x) = W^(g) ReLU(W^(f) x + b^(f)) + b^(g)   (eq. 7)"""

    def __init__(self, d: int, d_ff: int, activation_dropout: float):
        super().__init__()
        self.fc1 = nn.Linear(d, d_ff)
        self.fc2 = nn.Linear(d_ff, d)
        self.activation_dropout = activation_dropout
        for lin in (self.fc1, self.fc2):
            nn.init.xavier_uniform_(lin.weight)
            nn.init.zeros_(lin.bias)

    def forward(self, x: Tensor) -> Tensor:
        h = F.relu(self.fc1(x))
        h = F.dropout(h, p=self.activation_dropout, training=self.training)
        return self.fc2(h)


def symbolic_attention_class(cfg):
    """SymbolicTPMultiheadAttention with λ_q initialised to --symbolic-score-init."""
    return partial(SymbolicTPMultiheadAttention, score_init=cfg.symbolic.symbolic_score_init)


def attend(attn: nn.Module, x: Tensor, s: Optional[Tensor], slot_mask: Optional[Tensor],
           memory_s: Optional[Tensor] = None, **kwargs):
    """One attention sub-layer on its normalised input x, or on x ⊕ s when the cell carries the
    symbolic stream (s normalised; ``attn`` is then a SymbolicTPMultiheadAttention and
    ``memory_s`` the encoder's final symbolic states) -> (a, a_s), a_s None without s."""
    if s is None:
        return attn(x, **kwargs), None
    return attn(x, s, slot_mask, memory_sym=memory_s, **kwargs)


class TPCell(nn.Module):
    """What the encoder and decoder cells share: dropout on the semantic sub-layer outputs and
    the closing FF sub-layer, z' = LN(h + FF(LN(h))), with its symbolic counterpart
    s' = LN(hs + FF_s(LN(hs))) (no dropout on the symbolic part) when the cell carries s."""
    compile_unit = True  # --compile compiles each of these (plugins/torch_compile.py)

    def drop(self, x: Tensor) -> Tensor:
        return F.dropout(x, p=self.dropout, training=self.training)

    def close(self, h: Tensor, hs: Optional[Tensor], slot_mask: Optional[Tensor]):
        z = self.ln_out(h + self.drop(self.ff(self.ln_ff(h))))
        if hs is None:
            return z, None
        return z, self.sln_out(hs + self.sff(self.sln_ff(hs, slot_mask), slot_mask), slot_mask)


class TPEncoderLayer(TPCell):
    """h = z + TPMHA(LN(z), LN(z_{1:T})), z' = LN(h + FF(LN(h))) (eq. 1) on z (B, T, d); with the
    symbolic stream s (B, T, m) over the real slots ``slot_mask`` (B, m), the same cell on z ⊕ s
    (plugins/layers/symbolic_transformer.py).  -> (z', s'), s' None without s."""

    def __init__(self, cfg):
        super().__init__()
        d = cfg.encoder_embed_dim
        self.symbolic = is_symbolic(cfg)
        attn_cls = symbolic_attention_class(cfg) if self.symbolic else TPMultiheadAttention
        self.ln_attn = nn.LayerNorm(d)
        self.self_attn = attn_cls(
            d, cfg.encoder_attention_heads, dropout=cfg.attention_dropout,
            role_binding=not cfg.no_role_binding, self_attention=True, role_init=cfg.role_init)
        self.ln_ff = nn.LayerNorm(d)
        self.ff = FeedForward(d, cfg.encoder_ffn_embed_dim, cfg.activation_dropout)
        self.ln_out = nn.LayerNorm(d)
        self.dropout = cfg.dropout
        if self.symbolic:  # the symbolic part's LayerNorms and FF (symbolic_transformer.py)
            self.sln_attn, self.sln_ff, self.sln_out = SlotLayerNorm(), SlotLayerNorm(), SlotLayerNorm()
            self.sff = SymbolicFeedForward()

    def forward(self, z: Tensor, padding_mask: Optional[Tensor], attn_bias: Optional[Tensor] = None,
                s: Optional[Tensor] = None, slot_mask: Optional[Tensor] = None):
        # attn_bias: the relative-position bias on the scores (1, H, T, T), or None
        ns = None if s is None else self.sln_attn(s, slot_mask)
        a, a_s = attend(self.self_attn, self.ln_attn(z), ns, slot_mask, key_padding_mask=padding_mask,
                        attn_bias=attn_bias)
        return self.close(z + self.drop(a), None if s is None else s + a_s, slot_mask)


class TPDecoderLayer(TPCell):
    """Masked self TP-attention, TP-attention over the encoder's final states ``memory`` (and
    ``memory_s`` with the symbolic stream), then FF, each with pre-LN and a residual, on z or on
    z ⊕ s.  -> (z', s'), s' None without s."""

    def __init__(self, cfg):
        super().__init__()
        d = cfg.encoder_embed_dim
        H = cfg.encoder_attention_heads
        self.symbolic = is_symbolic(cfg)
        attn_cls = symbolic_attention_class(cfg) if self.symbolic else TPMultiheadAttention
        self.ln_self = nn.LayerNorm(d)
        self.self_attn = attn_cls(d, H, dropout=cfg.attention_dropout,
                                  role_binding=not cfg.no_role_binding, self_attention=True,
                                  role_init=cfg.role_init)
        self.ln_cross = nn.LayerNorm(d)
        self.cross_attn = attn_cls(d, H, dropout=cfg.attention_dropout,
                                   role_binding=not cfg.no_role_binding, self_attention=False,
                                   role_init=cfg.role_init)
        self.ln_ff = nn.LayerNorm(d)
        self.ff = FeedForward(d, cfg.encoder_ffn_embed_dim, cfg.activation_dropout)
        self.ln_out = nn.LayerNorm(d)
        self.dropout = cfg.dropout
        if self.symbolic:
            self.sln_self, self.sln_cross = SlotLayerNorm(), SlotLayerNorm()
            self.sln_ff, self.sln_out = SlotLayerNorm(), SlotLayerNorm()
            self.sff = SymbolicFeedForward()

    def forward(self, z: Tensor, memory: Tensor, memory_padding_mask: Optional[Tensor],
                self_padding_mask: Optional[Tensor] = None, incremental_state=None,
                s: Optional[Tensor] = None, slot_mask: Optional[Tensor] = None, memory_s: Optional[Tensor] = None):
        ns = None if s is None else self.sln_self(s, slot_mask)
        a, a_s = attend(self.self_attn, self.ln_self(z), ns, slot_mask, key_padding_mask=self_padding_mask,
                        causal=incremental_state is None, incremental_state=incremental_state)
        h, hs = z + self.drop(a), None if s is None else s + a_s
        ns = None if hs is None else self.sln_cross(hs, slot_mask)
        a, a_s = attend(self.cross_attn, self.ln_cross(h), ns, slot_mask, memory_s=memory_s, memory=memory,
                        key_padding_mask=memory_padding_mask, incremental_state=incremental_state)
        return self.close(h + self.drop(a), None if hs is None else hs + a_s, slot_mask)


class TPTransformerEncoder(FairseqEncoder):
    def __init__(self, cfg, dictionary, embedding: TPEmbedding, alpha: Optional[SymbolAlpha] = None):
        super().__init__(dictionary)
        self.cfg = cfg
        self.embedding = embedding
        self.padding_idx = dictionary.pad()
        self.dropout = cfg.dropout
        self.layers = nn.ModuleList(TPEncoderLayer(cfg) for _ in range(cfg.encoder_layers))
        buckets = cfg.encoder_relative_buckets or 0
        self.relative_bias = (RelativePositionBias(buckets, cfg.encoder_relative_max_distance,
                                                   cfg.encoder_attention_heads) if buckets else None)
        self.symbolic = is_symbolic(cfg)
        self.alpha = alpha
        self.symbol_ignore = symbol_ignore_ids(dictionary)
        self.entity_dropout = EntityDropout(cfg.entity_drop, dictionary)   # (B, V) masks, training only

    def forward(self, src_tokens: Tensor, src_lengths: Optional[Tensor] = None,
                return_all_roles: bool = False, **kwargs):
        padding_mask = src_tokens.eq(self.padding_idx)  # (B, T)
        self.embedding.check_length(src_tokens.size(1))
        symbols = drop = dropped = None
        if self.symbolic:  # φ over the source (story then question), by first appearance
            symbols = context_symbols(src_tokens, self.symbol_ignore, self.padding_idx)
            drop = self.entity_dropout(symbols)                               # (B, V) or None
            dropped = None if drop is None else drop.gather(1, src_tokens)   # (B, T)
        z = self.embedding(src_tokens, positions_from_padding(src_tokens, self.padding_idx), zero=dropped)
        z = F.dropout(z, p=self.dropout, training=self.training)
        # the one host sync of a batch: is anything padded? The decoder reads the answer
        # from encoder_out (an empty mask list = no padding), never per step.
        pm = padding_mask if padding_mask.any() else None
        # b^h[bucket(i − t)], one table for every layer                      (1, H, T, T)
        bias = self.relative_bias(src_tokens.size(1), src_tokens.device) if self.relative_bias is not None else None
        s = None
        if self.alpha is not None:   # the symbolic stream (the model builds α exactly then)
            if return_all_roles:
                raise ValueError("return_all_roles is not available with --symbolic-embeddings/--symbolic-output")
            # s_0 = α_x e_φ(x) over the first --max-symbols slots             (B, T, m)
            symbols = symbols.first(self.cfg.symbolic.max_symbols)
            s = self.alpha(src_tokens, lookup_phi(src_tokens, symbols), symbols.m, z.dtype, dropped=dropped,
                           zero_dropped=self.cfg.zero_unseen_alpha)
        slot_mask = None if s is None else symbols.slot_mask
        roles = []
        for layer in self.layers:
            if return_all_roles:  # r of each cell's self-attention, from the cell's input
                roles.append(layer.self_attn.roles(layer.ln_attn(z)))
            if self.cfg.checkpoint_activations and self.training:
                z, s = checkpoint(layer, z, pm, bias, s, slot_mask, use_reentrant=False)
            else:
                z, s = layer(z, pm, bias, s, slot_mask)
        out = {
            "encoder_out": [z],  # (B, T, d), batch-first
            "encoder_padding_mask": [] if pm is None else [padding_mask],  # (B, T); [] = no pads
            "src_tokens": [src_tokens],
        }
        if s is not None:
            out["encoder_out_sym"] = [s]                    # (B, T, m)
            out["slot_vocab"] = [symbols.slot_vocab]        # (B, m) vocab id of slot j (φ⁻¹)
            out["slot_mask"] = [symbols.slot_mask]          # (B, m) real slots
            if drop is not None:
                out["entity_drop"] = [drop]                 # (B, V) words read as unseen (training only)
        if return_all_roles:
            out["roles"] = roles  # per layer (B, T, d): head h is columns h*d_k:(h+1)*d_k
        return out

    def reorder_encoder_out(self, encoder_out: Dict[str, List[Tensor]], new_order: Tensor):
        return {key: [t.index_select(0, new_order) for t in value]
                for key, value in encoder_out.items() if key != "roles"}

    def max_positions(self):
        return self.cfg.max_source_positions


class TPTransformerDecoder(FairseqIncrementalDecoder):
    def __init__(self, cfg, dictionary, embedding: TPEmbedding, alpha: Optional[SymbolAlpha] = None):
        super().__init__(dictionary)
        self.symbolic = is_symbolic(cfg)
        self.symbolic_output = bool(cfg.symbolic.symbolic_output)
        self.alpha = alpha
        if self.symbolic_output:
            self.beta_logit = nn.Parameter(torch.zeros(()))  # β = sigmoid(0) = 1/2 at init
        self.register_buffer("unseen", torch.zeros(len(dictionary), dtype=torch.bool), persistent=False)
        self.zero_unseen = False
        self.cfg = cfg
        self.embedding = embedding
        self.padding_idx = dictionary.pad()
        self.dropout = cfg.dropout
        self.layers = nn.ModuleList(TPDecoderLayer(cfg) for _ in range(cfg.decoder_layers))
        if cfg.untie_embeddings:
            self.output_projection = nn.Linear(cfg.encoder_embed_dim, len(dictionary), bias=False)
            nn.init.normal_(self.output_projection.weight, std=cfg.encoder_embed_dim ** -0.5)
        else:
            self.output_projection = None

    def forward(self, prev_output_tokens: Tensor, encoder_out=None, incremental_state=None,
                features_only: bool = False, **kwargs):
        z, s, symbols, drop = self._features(prev_output_tokens, encoder_out, incremental_state)
        extra = {"attn": [None], "inner_states": None}
        if features_only:
            if s is not None:
                extra["symbolic_state"] = [s]
            return z, extra
        logits = self.output_layer(z)
        if drop is not None:                       # a dropped word's output row reads as zero too
            logits = logits.masked_fill(drop.unsqueeze(1), 0.0)
        if not self.symbolic_output:
            return logits, extra
        # p = β softmax(E^T z) + (1−β) B_φ softmax(s), fp32 probabilities (pointer-generator pattern)
        extra["output_parts"] = {}                 # the β split of p (nesyseq.load(...).answer reports it)
        return symbolic_output_probs(logits, s, symbols, self.beta_logit, parts=extra["output_parts"]), extra

    def extract_features(self, prev_output_tokens, encoder_out=None, incremental_state=None, **kwargs):
        return self._features(prev_output_tokens, encoder_out, incremental_state)[0]

    def _inputs(self, prev_output_tokens, incremental_state, drop: Optional[Tensor] = None):
        """The decoder's input tokens (the newest alone when decoding step by step), z_0 after
        dropout and the self-attention padding mask; ``drop`` (B, V): words whose E row reads as
        zero (entity dropout)."""
        self.embedding.check_length(prev_output_tokens.size(1))
        positions = positions_from_padding(prev_output_tokens, self.padding_idx)
        self_padding_mask = prev_output_tokens.eq(self.padding_idx)
        if incremental_state is not None:  # only the newest step is computed
            prev_output_tokens = prev_output_tokens[:, -1:]
            positions = positions[:, -1:]
            self_padding_mask = None
        elif not self_padding_mask.any():  # full forward: once per batch, not per step
            self_padding_mask = None
        dropped = None if drop is None else drop.gather(1, prev_output_tokens)                # (B, T)
        z = self.embedding(prev_output_tokens, positions, zero=dropped)
        return prev_output_tokens, F.dropout(z, p=self.dropout, training=self.training), self_padding_mask

    def _features(self, prev_output_tokens, encoder_out, incremental_state):
        """-> the last cell's z (B, T, d) and s (B, T, m) or None, the context symbols (or None)
        and the entity-dropout mask (B, V) (or None)."""
        drop = encoder_out["entity_drop"][0] if "entity_drop" in encoder_out else None    # (B, V)
        tokens, z, self_padding_mask = self._inputs(prev_output_tokens, incremental_state, drop)
        memory = encoder_out["encoder_out"][0]
        masks = encoder_out["encoder_padding_mask"]
        memory_mask = masks[0] if len(masks) > 0 else None  # decided once by the encoder
        s = slot_mask = memory_s = symbols = None
        if self.alpha is not None:   # the symbolic stream (the model builds α exactly then)
            symbols = ContextSymbols(encoder_out["slot_vocab"][0], encoder_out["slot_mask"][0])
            # a decoder input that is a context word is looked up through the source's φ
            s = self.alpha(tokens, lookup_phi(tokens, symbols), symbols.m, z.dtype,
                           dropped=None if drop is None else drop.gather(1, tokens),
                           zero_dropped=self.cfg.zero_unseen_alpha)   # (B, T, m)
            slot_mask, memory_s = symbols.slot_mask, encoder_out["encoder_out_sym"][0]
        for layer in self.layers:
            if self.cfg.checkpoint_activations and self.training and incremental_state is None:
                z, s = checkpoint(layer, z, memory, memory_mask, self_padding_mask, None, s, slot_mask, memory_s,
                                  use_reentrant=False)
            elif incremental_state is not None:  # a decoding step: never through --compile's graph
                z, s = call_eager(layer, z, memory, memory_mask, self_padding_mask, incremental_state,
                                  s, slot_mask, memory_s)
            else:
                z, s = layer(z, memory, memory_mask, self_padding_mask, None, s, slot_mask, memory_s)
        return z, s, symbols, drop

    def get_normalized_probs(self, net_output, log_probs: bool, sample=None):
        """With --symbolic-output the decoder already returns the fp32 mixture p."""
        if not self.symbolic_output:
            return super().get_normalized_probs(net_output, log_probs, sample)
        return mixture_normalized_probs(net_output[0], log_probs)

    def output_layer(self, features: Tensor) -> Tensor:
        """softmax(E^T z) logits (eq. 8); words unseen in training (babi_qa) get a zero row."""
        weight = self.embedding.weight if self.output_projection is None else self.output_projection.weight
        if self.zero_unseen:
            weight = weight.masked_fill(self.unseen.unsqueeze(-1), 0.0)
        return F.linear(features, weight)

    def max_positions(self):
        return self.cfg.max_target_positions

    def reorder_incremental_state(self, incremental_state, new_order: Tensor):
        """Beam search reorders the cached self keys/values and the static
        encoder keys/values of every layer along the batch axis."""
        for layer in self.layers:
            layer.self_attn.reorder_incremental_state(incremental_state, new_order)
            layer.cross_attn.reorder_incremental_state(incremental_state, new_order)

    def reorder_incremental_state_scripting(self, incremental_state, new_order: Tensor):
        # fairseq's default walks every sub-module with a reorder method; our
        # attention modules are reordered here exactly once instead.
        self.reorder_incremental_state(incremental_state, new_order)


@register_model("tp_transformer", dataclass=TPTransformerConfig)
class TPTransformerModel(FairseqEncoderDecoderModel):
    """TP-Transformer encoder-decoder; ``--no-role-binding --no-embedding-role``
    (arch ``transformer_math``) is the standard Transformer with the same layout."""

    @classmethod
    def build_model(cls, cfg, task):
        cfg = model_config(cfg, TPTransformerConfig)
        src_dict, tgt_dict = task.source_dictionary, task.target_dictionary
        max_pos = max(cfg.max_source_positions, cfg.max_target_positions) + 2

        def make_embedding(dictionary):
            return TPEmbedding(len(dictionary), cfg.encoder_embed_dim, dictionary.pad(),
                               max_positions=max_pos, embedding_role=not cfg.no_embedding_role,
                               embed_init_std=cfg.embed_init_std,
                               role_init_mean=cfg.embedding_role_init_mean,
                               role_init_std=cfg.embedding_role_init_std,
                               role_offset=cfg.embedding_role_offset)

        def make_alpha(dictionary):  # per-word α (learned with --symbolic-embeddings)
            if not is_symbolic(cfg):
                return None
            return SymbolAlpha(len(dictionary), learned=bool(cfg.symbolic.symbolic_embeddings))

        if not cfg.untie_embeddings:
            if src_dict != tgt_dict:
                raise ValueError("shared embeddings need a joined dictionary "
                                 "(fairseq-preprocess --joined-dictionary); the source and "
                                 "target dictionaries differ (or pass --untie-embeddings)")
            enc_emb = dec_emb = make_embedding(src_dict)
            enc_alpha = dec_alpha = make_alpha(src_dict)
        else:
            enc_emb, dec_emb = make_embedding(src_dict), make_embedding(tgt_dict)
            enc_alpha, dec_alpha = make_alpha(src_dict), make_alpha(tgt_dict)
        if dropout_rate(cfg.entity_drop) > 0.0 and not is_symbolic(cfg):
            raise ValueError("--entity-dropout needs --symbolic-embeddings or --symbolic-output: it trains "
                             "the symbolic path to carry words whose semantic rows read as zero")
        if is_symbolic(cfg) and src_dict != tgt_dict:
            raise ValueError("--symbolic-embeddings/--symbolic-output need a joined dictionary: the "
                             "output's B_φ maps source slots to target ids")
        encoder = TPTransformerEncoder(cfg, src_dict, enc_emb, enc_alpha)
        decoder = TPTransformerDecoder(cfg, tgt_dict, dec_emb, dec_alpha)
        model = cls(encoder, decoder)
        return maybe_compile(model, cfg)

    def set_unseen(self, ids) -> None:
        """Words unseen in training (babi_qa's unseen.txt, ids of the joined dictionary): zero
        semantic embedding and output rows, as the paper; their α too with --zero-unseen-alpha."""
        V = len(self.encoder.dictionary)
        unseen = torch.zeros(V, dtype=torch.bool, device=self.decoder.unseen.device)
        unseen[torch.as_tensor(list(ids), dtype=torch.long)] = True
        self.encoder.embedding.set_unseen(unseen)
        if self.decoder.dictionary == self.encoder.dictionary:
            self.decoder.embedding.set_unseen(unseen)
            self.decoder.unseen.copy_(unseen)
            self.decoder.zero_unseen = True
        for alpha in {id(a): a for a in (self.encoder.alpha, self.decoder.alpha) if a is not None}.values():
            alpha.set_unseen(unseen, zero_alpha=bool(self.encoder.cfg.zero_unseen_alpha))


def without_roles(args):
    """r ≡ 1 everywhere: the standard Transformer in the same layout (the fair baseline)."""
    args.no_role_binding = True
    args.no_embedding_role = True


@register_model_architecture("tp_transformer", "tp_transformer_math")
def tp_transformer_math(args):
    """The paper's sizes: the dataclass defaults."""


@register_model_architecture("tp_transformer", "transformer_math")
def transformer_math(args):
    without_roles(args)


@register_model_architecture("tp_transformer", "tp_transformer_tiny")
def tp_transformer_tiny(args):
    preset(args, encoder_embed_dim=64, encoder_ffn_embed_dim=256, encoder_attention_heads=4, encoder_layers=2,
           decoder_layers=2)


@register_model_architecture("tp_transformer", "transformer_math_tiny")
def transformer_math_tiny(args):
    without_roles(args)
    tp_transformer_tiny(args)


# Baselines widened to the TP-Transformer's parameter count (the paper compares at equal depth and
# width, so TP-T has ~11% more parameters).  The extra parameters of TP-T are one d x d role
# projection W^(r) (+ bias) per attention (encoder L, decoder 2L) and the embedding role W^(p); the
# wide baselines spend them on the FF hidden width instead, keeping d, heads and depth.  With a
# joined character dictionary the counts differ by < 0.1% (tests/test_tp_transformer.py checks 2%).
@register_model_architecture("tp_transformer", "transformer_math_wide")
def transformer_math_wide(args):
    preset(args, encoder_ffn_embed_dim=2454)   # 49.18M vs tp_transformer_math's 49.18M
    transformer_math(args)


@register_model_architecture("tp_transformer", "transformer_math_tiny_wide")
def transformer_math_tiny_wide(args):
    preset(args, encoder_ffn_embed_dim=312)    # 0.2675M vs tp_transformer_tiny's 0.2677M
    transformer_math_tiny(args)
