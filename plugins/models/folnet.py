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

from nesyseq.plugins.layers.folnet_layer import layer_norm
from nesyseq.plugins.models.config_defaults import model_config, preset
from nesyseq.plugins.models.folnet_common import (FOLNET_LARGE, FOLNET_TINY, FolnetCommonConfig, FolnetEncoderCore,
                                                  folnet_embedding)
from nesyseq.plugins.torch_compile import maybe_compile

logger = logging.getLogger(__name__)

SEGMENT_CHOICES = ChoiceEnum(["roberta", "bert"])


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
                                      segments=str(cfg.folnet_segments))
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
        cfg = model_config(cfg, FolnetConfig)
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


@register_model_architecture("folnet", "folnet_base")
def folnet_base(args):
    """The dataclass defaults (BERT-base sizes, 12 layers)."""


@register_model_architecture("folnet", "folnet_large")
def folnet_large(args):
    preset(args, folnet_layers=24, **FOLNET_LARGE)


@register_model_architecture("folnet", "folnet_tiny")
def folnet_tiny(args):
    preset(args, folnet_layers=2, **FOLNET_TINY)
