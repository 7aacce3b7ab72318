"""What the FOLNet models share (folnet, folnet_lm, folnet_transformer and FolnetDecoder): the
common options, the embedding init, the stack's arguments, the encoder core (embeddings, relative
distance atoms, the layer stack) and the preset sizes beyond the dataclass defaults.
"""
from dataclasses import dataclass, field
from typing import Optional

import torch
import torch.nn as nn
from torch import Tensor

from fairseq.dataclass import ChoiceEnum

from nesyseq.plugins.layers.folnet_layer import FolnetStack, layer_norm
from nesyseq.plugins.layers.folnet_masks import real_positions, self_mask
from nesyseq.plugins.layers.folnet_ops import parse_ops
from nesyseq.plugins.layers.folnet_rpe import (RelativeDistanceEmbedding, relative_distance_ids, segments_after_each_separator,
                                       segments_from_separators)
from nesyseq.plugins.torch_compile import CompileConfig

TOKEN_TYPES = 2  # the official type_vocab_size
TRANS_IMPL_CHOICES = ChoiceEnum(["auto", "triton", "torch", "eager"])


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


def folnet_embedding(num: int, dim: int, padding_idx: int) -> nn.Embedding:
    # official init: N(0, 0.02) for every Embedding (folnet.py:63-69, initializer_range 0.02 in
    # finetune_FOLNet_GLUE.sh:49); the padding row is zeroed (it is masked everywhere)
    m = nn.Embedding(num, dim, padding_idx=padding_idx)
    nn.init.normal_(m.weight, mean=0, std=0.02)
    nn.init.constant_(m.weight[padding_idx], 0)
    return m


def stack_kwargs(cfg, layers: int, enc_dim=None, enc_binary_dim=None, symbolic: bool = False) -> dict:
    """FolnetStack's arguments from a FolnetCommonConfig; ``symbolic``: the stack carries the
    symbolic stream (folnet_transformer with --symbolic-embeddings / --symbolic-output)."""
    unary, binary = parse_ops(cfg.folnet_ops)
    return dict(layers=layers, checkpoint_activations=cfg.checkpoint_activations, d1=cfg.folnet_unary_dim,
                d2=cfg.folnet_binary_dim, heads=cfg.folnet_heads, ffn1=cfg.folnet_ffn_unary,
                ffn2=cfg.folnet_ffn_binary, unary_ops=unary, binary_ops=binary, dropout=cfg.dropout,
                enc_dim=enc_dim, enc_binary_dim=enc_binary_dim, trans_impl=str(cfg.folnet_trans_impl),
                symbolic=symbolic)


class FolnetEncoderCore(nn.Module):
    """tokens (B, T) -> unary atoms (B, T, D1), binary atoms (B, T, T, D2), padding (B, T)."""

    def __init__(self, cfg, embed_tokens: nn.Embedding, layers: int, cls: bool, separator: Optional[int],
                 segments: str = "roberta", symbolic: bool = False):
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
        self.stack = FolnetStack(**stack_kwargs(cfg, layers, symbolic=symbolic))

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


# The preset sizes besides the dataclass defaults (the base model: D1 768, D2 64, 12 heads, FFN 3072 /
# 256, clip 64); the layer counts are each model's own.
FOLNET_TINY = dict(folnet_unary_dim=32, folnet_binary_dim=8, folnet_heads=4, folnet_ffn_unary=64,
                   folnet_ffn_binary=16, folnet_rpe_clip=8)
FOLNET_LARGE = dict(folnet_unary_dim=1024, folnet_heads=16, folnet_ffn_unary=4096)
