"""FOLNet encoder-only model (``--arch folnet_base | folnet_large | folnet_tiny``).

RoBERTa-style interface (``features``, ``register_classification_head``,
``masked_tokens``), so fairseq's ``masked_lm`` and ``sentence_prediction``
tasks train it unchanged.  The input atoms are
    u1_0(x)    = token embedding                     (B, T, D1)
    u2_0(x, y) = clipped relative distance embedding (B, T, T, D2)
with the [CLS] ids for ``<s>`` at position 0 and the cross-segment id between
the two sentences of a RoBERTa pair ``<s> A </s> </s> B </s>`` (``--folnet-segments
roberta``) or of a BERT pair ``<s> A </s> B </s>`` (``bert``, the official layout).
Heads as in the official code: the MLM head dense -> GELU -> non-affine LN ->
tied decoder + bias (folnet.py:119-149), and the pooler dense + tanh on the
first token (folnet.py:706-707, :732-733), which classification heads read.
"""

import logging
from dataclasses import dataclass, field
from typing import Optional

import torch
import torch.nn as nn
import torch.nn.functional as F
from torch import Tensor

from fairseq.dataclass import ChoiceEnum
from fairseq.models import FairseqEncoder, FairseqEncoderModel, register_model, register_model_architecture
from fairseq import utils
from fairseq.utils import safe_getattr

from nesyseq.plugins.layers.folnet_layer import FolnetStack, layer_norm
from nesyseq.plugins.layers.folnet_masks import real_positions, self_mask
from nesyseq.plugins.layers.folnet_ops import parse_ops
from nesyseq.plugins.torch_compile import CompileConfig, maybe_compile
from nesyseq.plugins.layers.folnet_rpe import (RelativeDistanceEmbedding, relative_distance_ids, segments_after_each_separator,
                                       segments_from_separators)

logger = logging.getLogger(__name__)

TOKEN_TYPES = 2  # the official type_vocab_size
TRANS_IMPL_CHOICES = ChoiceEnum(["auto", "triton", "torch", "eager"])
SEGMENT_CHOICES = ChoiceEnum(["roberta", "bert"])


@dataclass
class FolnetCommonConfig(CompileConfig):
    folnet_ops: str = field(default="jmc.atp", metadata={
        "help": "operator set in the paper's notation: unary-output ops {b,c,j,m} before the dot, "
                "binary-output ops {a,p,t} after it (bool is always on), e.g. jmc.atp or j.a"})
    folnet_unary_dim: int = field(default=768, metadata={"help": "D1 = H*S, unary atom channels"})
    folnet_binary_dim: int = field(default=64, metadata={"help": "D2, binary atom channels"})
    folnet_heads: int = field(default=12, metadata={"help": "H, heads (S = D1 / H)"})
    folnet_ffn_unary: int = field(default=3072, metadata={"help": "unary bool FFN hidden size"})
    folnet_ffn_binary: int = field(default=256, metadata={"help": "binary bool FFN hidden size"})
    folnet_rpe_clip: int = field(default=64, metadata={"help": "clip δ of the relative distance atoms"})
    folnet_trans_impl: TRANS_IMPL_CHOICES = field(default="auto", metadata={
        "help": "implementation of the trans operator (triton_kernels.trans impl=): auto = Triton kernels on CUDA "
                "except unmasked T >= 768 (eager, measured faster there), reference on CPU"})
    dropout: float = field(default=0.1, metadata={"help": "dropout probability"})
    checkpoint_activations: bool = field(default=False, metadata={
        "help": "checkpoint each layer's activations (recompute in backward)"})


@dataclass
class FolnetConfig(FolnetCommonConfig):
    folnet_layers: int = field(default=12, metadata={"help": "L, number of layers"})
    max_positions: int = field(default=1024, metadata={"help": "longest input (RPE itself has no limit)"})
    folnet_segments: SEGMENT_CHOICES = field(default="roberta", metadata={
        "help": "where a new segment (token type, cross-segment distance id) starts: roberta = after "
                "each '</s> </s>' (<s> A </s> </s> B </s>); bert = after each '</s>' (<s> A </s> B </s>, "
                "the official [CLS] A [SEP] B [SEP]; converted official checkpoints use it)"})
    pooler_activation_fn: ChoiceEnum(["tanh", "relu", "gelu", "linear"]) = field(
        default="tanh", metadata={"help": "activation of the pooler (dense on the first token; official: tanh)"})
    pooler_dropout: float = field(default=0.1, metadata={
        "help": "dropout between the pooler and a classification head's output layer (official: 0.1)"})


def folnet_embedding(num: int, dim: int, padding_idx: int) -> nn.Embedding:
    # official init: N(0, 0.02) for every Embedding (folnet.py:63-69, initializer_range 0.02 in
    # finetune_FOLNet_GLUE.sh:49); the padding row is zeroed (it is masked everywhere)
    m = nn.Embedding(num, dim, padding_idx=padding_idx)
    nn.init.normal_(m.weight, mean=0, std=0.02)
    nn.init.constant_(m.weight[padding_idx], 0)
    return m


def stack_kwargs(cfg, layers: int, enc_dim=None, enc_binary_dim=None) -> dict:
    unary, binary = parse_ops(cfg.folnet_ops)
    return dict(layers=layers, checkpoint_activations=cfg.checkpoint_activations, d1=cfg.folnet_unary_dim,
                d2=cfg.folnet_binary_dim, heads=cfg.folnet_heads, ffn1=cfg.folnet_ffn_unary,
                ffn2=cfg.folnet_ffn_binary, unary_ops=unary, binary_ops=binary, dropout=cfg.dropout,
                enc_dim=enc_dim, enc_binary_dim=enc_binary_dim, trans_impl=str(cfg.folnet_trans_impl),
                symbolic=bool(safe_getattr(cfg, "symbolic_embeddings", False)
                              or safe_getattr(cfg, "symbolic_output", False)))


class FolnetEncoderCore(nn.Module):
    """tokens (B, T) -> unary atoms (B, T, D1), binary atoms (B, T, T, D2), padding (B, T)."""

    def __init__(self, cfg, embed_tokens: nn.Embedding, layers: int, cls: bool, separator: Optional[int],
                 segments: str = "roberta"):
        super().__init__()
        self.embed_tokens = embed_tokens
        self.padding_idx = embed_tokens.padding_idx
        self.cls, self.separator = cls, separator
        self.segment_fn = {"roberta": segments_from_separators, "bert": segments_after_each_separator}[segments]
        self.dropout = cfg.dropout
        # token-type (segment) embedding: the paper's SeqID atoms, 2 types (folnet.py:187, :242-244)
        self.embed_types = nn.Embedding(TOKEN_TYPES, cfg.folnet_unary_dim)
        nn.init.normal_(self.embed_types.weight, mean=0.0, std=0.02)
        self.rpe = RelativeDistanceEmbedding(cfg.folnet_rpe_clip, cfg.folnet_binary_dim)
        # both input embeddings: LN (non-affine, eps 1e-12) then dropout (folnet.py:271-274)
        self.ln_u1, self.ln_u2 = layer_norm(cfg.folnet_unary_dim), layer_norm(cfg.folnet_binary_dim)
        self.stack = FolnetStack(**stack_kwargs(cfg, layers))

    def forward(self, tokens: Tensor, return_all_hiddens: bool = False, s: Optional[Tensor] = None,
                slot_mask: Optional[Tensor] = None):
        """Returns (u1, u2, padding, hiddens), plus the final symbolic state when s (B, T, m) is given."""
        padding = tokens.eq(self.padding_idx)  # (B, T)
        pos = real_positions(padding)
        seg = self.segment_fn(tokens, self.separator, padding) if self.separator is not None else None
        mask = self_mask("none", padding)
        ids = relative_distance_ids(pos, pos, self.rpe.clip, seg, seg, cls=self.cls)  # (B, T, T)
        types = seg.clamp(max=TOKEN_TYPES - 1) if seg is not None else torch.zeros_like(tokens)
        self.last_token_types = types  # the segment ids the model saw (tests check them)
        u1 = self.embed_tokens(tokens) + self.embed_types(types)  # no sqrt(D1) scale
        u1 = nn.functional.dropout(self.ln_u1(u1), self.dropout, self.training)
        u2 = nn.functional.dropout(self.ln_u2(self.rpe(ids)), self.dropout, self.training)
        u2 = u2 * mask.pair_ok[..., None].to(u1.dtype)
        if s is not None:
            u1, u2, hiddens, s = self.stack(u1, u2, mask, return_all_hiddens=return_all_hiddens, s=s,
                                            slot_mask=slot_mask)
            return u1, u2, padding, hiddens, s
        u1, u2, hiddens = self.stack(u1, u2, mask, return_all_hiddens=return_all_hiddens)
        return u1, u2, padding, hiddens


class FolnetLMHead(nn.Module):
    """The official MLM head (folnet.py:119-149): x (B, T, D1) -> logits (B, T, V)
        LN(GELU(dense(x))) E^T + b     LN non-affine, eps 1e-12; E the (tied) word embedding
    """

    def __init__(self, dim: int, weight: Tensor):
        super().__init__()
        self.dense = nn.Linear(dim, dim)
        self.ln = layer_norm(dim)
        self.weight = weight
        self.bias = nn.Parameter(torch.zeros(weight.size(0)))

    def forward(self, features: Tensor, masked_tokens: Optional[Tensor] = None) -> Tensor:
        if masked_tokens is not None:
            features = features[masked_tokens, :]
        return F.linear(self.ln(F.gelu(self.dense(features))), self.weight) + self.bias


class FolnetClassificationHead(nn.Module):
    """The official fine-tuning head (folnet.py:896-951) on the model's pooler:
        features (B, T, D1) -> pooled = tanh(dense(x_0)) (B, D1) -> dropout -> Linear -> (B, C)
    Like fairseq's RoBERTa heads it takes the features; the pooler itself belongs to the
    encoder (one per model, as in the official FOLNet), so ``pool`` is a plain reference
    to the encoder's ``pooled`` and no pooler parameter is owned (or saved) twice."""

    def __init__(self, dim: int, num_classes: int, dropout: float, pool):
        super().__init__()
        self.pool = pool
        self.dropout = nn.Dropout(dropout)
        self.out_proj = nn.Linear(dim, num_classes)
        nn.init.normal_(self.out_proj.weight, mean=0.0, std=0.02)
        nn.init.zeros_(self.out_proj.bias)

    def forward(self, features: Tensor) -> Tensor:
        return self.out_proj(self.dropout(self.pool(features)))


class FolnetMLMEncoder(FairseqEncoder):
    """RoBERTa-style encoder: features, the official MLM head and the official pooler."""

    def __init__(self, cfg, dictionary):
        super().__init__(dictionary)
        embed = folnet_embedding(len(dictionary), cfg.folnet_unary_dim, dictionary.pad())
        self.core = FolnetEncoderCore(cfg, embed, cfg.folnet_layers, cls=True, separator=dictionary.eos(),
                                      segments=str(safe_getattr(cfg, "folnet_segments", "roberta")))
        self.lm_head = FolnetLMHead(cfg.folnet_unary_dim, weight=embed.weight)
        # pooler: dense + activation on the first token (folnet.py:706-707, :732-733), part of the
        # official FOLNet module; classification heads read its output
        self.pooler = nn.Linear(cfg.folnet_unary_dim, cfg.folnet_unary_dim)
        self.pooler_activation = utils.get_activation_fn(str(cfg.pooler_activation_fn))
        for m in (self.lm_head.dense, self.pooler):
            nn.init.normal_(m.weight, mean=0.0, std=0.02)
            nn.init.zeros_(m.bias)
        self.max_pos = cfg.max_positions

    def pooled(self, features: Tensor) -> Tensor:
        """features (B, T, D1) -> act(dense(features[:, 0])) (B, D1)"""
        return self.pooler_activation(self.pooler(features[:, 0, :]))

    def extract_features(self, src_tokens, return_all_hiddens=False, **unused):
        u1, u2, padding, hiddens = self.core(src_tokens, return_all_hiddens=return_all_hiddens)
        return u1, {"inner_states": hiddens, "binary_atoms": u2, "padding_mask": padding}

    def output_layer(self, features, masked_tokens=None, **unused):
        return self.lm_head(features, masked_tokens)

    def forward(self, src_tokens, features_only=False, return_all_hiddens=False, masked_tokens=None, **unused):
        x, extra = self.extract_features(src_tokens, return_all_hiddens=return_all_hiddens)
        if not features_only:
            x = self.output_layer(x, masked_tokens=masked_tokens)
        return x, extra

    def max_positions(self):
        return self.max_pos


@register_model("folnet", dataclass=FolnetConfig)
class FolnetModel(FairseqEncoderModel):
    """FOLNet encoder-only (masked_lm / sentence_prediction)."""

    def __init__(self, cfg, encoder):
        super().__init__(encoder)
        self.cfg = cfg
        self.classification_heads = nn.ModuleDict()

    @classmethod
    def build_model(cls, cfg, task):
        folnet_base(cfg)
        return maybe_compile(cls(cfg, FolnetMLMEncoder(cfg, task.source_dictionary)), cfg)

    def forward(self, src_tokens, features_only=False, return_all_hiddens=False, classification_head_name=None,
                **kwargs):
        if classification_head_name is not None:
            features_only = True
        x, extra = self.encoder(src_tokens, features_only, return_all_hiddens, **kwargs)
        if classification_head_name is not None:
            x = self.classification_heads[classification_head_name](x)
        return x, extra

    def extract_features(self, src_tokens, return_all_hiddens=False):
        return self.encoder.extract_features(src_tokens, return_all_hiddens=return_all_hiddens)

    def register_classification_head(self, name, num_classes=None, inner_dim=None, **kwargs):
        """A head on the pooled first token (the pooler is shared, as in the official model);
        ``inner_dim`` is not used: the pooler is the one inner layer."""
        self.classification_heads[name] = FolnetClassificationHead(
            self.cfg.folnet_unary_dim, num_classes, self.cfg.pooler_dropout, pool=self.encoder.pooled)

    def upgrade_state_dict_named(self, state_dict, name):
        """Keep this model's heads when loading a checkpoint without them (e.g. masked_lm -> fine-tuning)."""
        super().upgrade_state_dict_named(state_dict, name)
        prefix = name + "." if name != "" else ""
        for head, module in self.classification_heads.items():
            for k, v in module.state_dict().items():
                key = f"{prefix}classification_heads.{head}.{k}"
                if key not in state_dict:
                    state_dict[key] = v
        heads = set(self.classification_heads.keys())
        for k in list(state_dict.keys()):
            if k.startswith(prefix + "classification_heads."):
                if k[len(prefix + "classification_heads."):].split(".")[0] not in heads:
                    del state_dict[k]


def _folnet_sizes(args, layers, d1, d2, heads, ffn1, ffn2, clip):
    if layers is not None:
        args.folnet_layers = safe_getattr(args, "folnet_layers", layers)
    args.folnet_unary_dim = safe_getattr(args, "folnet_unary_dim", d1)
    args.folnet_binary_dim = safe_getattr(args, "folnet_binary_dim", d2)
    args.folnet_heads = safe_getattr(args, "folnet_heads", heads)
    args.folnet_ffn_unary = safe_getattr(args, "folnet_ffn_unary", ffn1)
    args.folnet_ffn_binary = safe_getattr(args, "folnet_ffn_binary", ffn2)
    args.folnet_rpe_clip = safe_getattr(args, "folnet_rpe_clip", clip)
    args.folnet_ops = safe_getattr(args, "folnet_ops", "jmc.atp")
    args.folnet_trans_impl = safe_getattr(args, "folnet_trans_impl", "auto")
    args.dropout = safe_getattr(args, "dropout", 0.1)
    args.checkpoint_activations = safe_getattr(args, "checkpoint_activations", False)


def _folnet_encoder_extras(args):
    args.max_positions = safe_getattr(args, "max_positions", 1024)
    args.folnet_segments = safe_getattr(args, "folnet_segments", "roberta")
    args.pooler_activation_fn = safe_getattr(args, "pooler_activation_fn", "tanh")
    args.pooler_dropout = safe_getattr(args, "pooler_dropout", 0.1)


@register_model_architecture("folnet", "folnet_base")
def folnet_base(args):
    _folnet_sizes(args, 12, 768, 64, 12, 3072, 256, 64)
    _folnet_encoder_extras(args)


@register_model_architecture("folnet", "folnet_large")
def folnet_large(args):
    _folnet_sizes(args, 24, 1024, 64, 16, 4096, 256, 64)
    _folnet_encoder_extras(args)


@register_model_architecture("folnet", "folnet_tiny")
def folnet_tiny(args):
    _folnet_sizes(args, 2, 32, 8, 4, 64, 16, 8)
    _folnet_encoder_extras(args)
