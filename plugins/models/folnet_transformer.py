"""FOLNet encoder-decoder (``--arch folnet_transformer_base | _math | _tiny``), appendix A.5.

Encoder: the encoder-only FOLNet stack (no [CLS], one segment; fairseq's
left-padded source is fine because distances use real positions).  It hands
the decoder its final layer-normed unary atoms (B, Ti, D1) and binary atoms
(B, Ti, Ti, D2).  Decoder: ``FolnetDecoder(cross=True)``.
"""

from dataclasses import dataclass, field
from typing import Optional

from fairseq.models import FairseqEncoder, FairseqEncoderDecoderModel, register_model, register_model_architecture

import torch
from torch import nn

from nesyseq.plugins.layers.symbolic import SymbolAlpha, UnseenZeroEmbedding, context_symbols, lookup_phi, symbol_ignore_ids
from nesyseq.plugins.models.config_defaults import GroupedConfig, SymbolicConfig, is_symbolic, model_config, preset
from nesyseq.plugins.models.folnet_common import FOLNET_TINY, FolnetCommonConfig, FolnetEncoderCore, folnet_embedding
from nesyseq.plugins.models.folnet_decoder import FolnetDecoder
from nesyseq.plugins.torch_compile import maybe_compile


@dataclass
class FolnetTransformerConfig(FolnetCommonConfig, GroupedConfig):
    encoder_layers: int = field(default=6, metadata={"help": "encoder layers"})
    decoder_layers: int = field(default=6, metadata={"help": "decoder layers"})
    share_all_embeddings: bool = field(default=False, metadata={
        "help": "share encoder/decoder/output embeddings (needs a joined dictionary)"})
    max_source_positions: int = field(default=1024, metadata={"help": "longest source"})
    max_target_positions: int = field(default=1024, metadata={"help": "longest target"})
    symbolic: SymbolicConfig = field(default_factory=SymbolicConfig)


class FolnetEncoder(FairseqEncoder):
    def __init__(self, cfg, dictionary, embed_tokens, alpha: Optional[SymbolAlpha] = None):
        super().__init__(dictionary)
        self.core = FolnetEncoderCore(cfg, embed_tokens, cfg.encoder_layers, cls=False, separator=None,
                                      symbolic=alpha is not None)
        self.max_pos = cfg.max_source_positions
        self.alpha = alpha
        self.max_symbols = cfg.symbolic.max_symbols
        self.symbol_ignore = symbol_ignore_ids(dictionary)

    def forward(self, src_tokens, src_lengths=None, return_all_hiddens: bool = False, **unused):
        if self.alpha is not None:
            symbols = context_symbols(src_tokens, self.symbol_ignore, self.dictionary.pad(), self.max_symbols)
            s = self.alpha(src_tokens, lookup_phi(src_tokens, symbols), symbols.m,
                           self.core.embed_tokens.weight.dtype)                       # (B, T, m)
            u1, u2, padding, hiddens, s = self.core(src_tokens, return_all_hiddens=return_all_hiddens,
                                                    s=s, slot_mask=symbols.slot_mask)
            return {"folnet_u1": [u1], "folnet_u2": [u2], "folnet_padding": [padding],
                    "encoder_states": hiddens or [], "src_tokens": [src_tokens], "folnet_sym": [s],
                    "slot_vocab": [symbols.slot_vocab], "slot_mask": [symbols.slot_mask]}
        u1, u2, padding, hiddens = self.core(src_tokens, return_all_hiddens=return_all_hiddens)
        return {"folnet_u1": [u1], "folnet_u2": [u2], "folnet_padding": [padding],
                "encoder_states": hiddens or [], "src_tokens": [src_tokens]}

    def reorder_encoder_out(self, encoder_out, new_order):
        return {k: [t.index_select(0, new_order) for t in v] for k, v in encoder_out.items()}

    def max_positions(self):
        return self.max_pos


@register_model("folnet_transformer", dataclass=FolnetTransformerConfig)
class FolnetTransformerModel(FairseqEncoderDecoderModel):
    def __init__(self, cfg, encoder, decoder):
        super().__init__(encoder, decoder)
        self.cfg = cfg

    @classmethod
    def build_model(cls, cfg, task):
        cfg = model_config(cfg, FolnetTransformerConfig)
        src_dict, tgt_dict = task.source_dictionary, task.target_dictionary
        d1 = cfg.folnet_unary_dim
        if cfg.share_all_embeddings:
            if src_dict != tgt_dict:
                raise ValueError("--share-all-embeddings requires a joined dictionary")
            enc_embed = dec_embed = _embedding(len(src_dict), d1, src_dict.pad())
        else:
            enc_embed = _embedding(len(src_dict), d1, src_dict.pad())
            dec_embed = _embedding(len(tgt_dict), d1, tgt_dict.pad())
        alpha = None
        if is_symbolic(cfg):
            if src_dict != tgt_dict:
                raise ValueError("--symbolic-embeddings/--symbolic-output need a joined dictionary: the "
                                 "output's B_φ maps source slots to target ids")
            alpha = SymbolAlpha(len(src_dict), learned=bool(cfg.symbolic.symbolic_embeddings))  # shared enc/dec
        encoder = FolnetEncoder(cfg, src_dict, enc_embed, alpha)
        decoder = FolnetDecoder(cfg, tgt_dict, dec_embed, cfg.decoder_layers, cross=True,
                                max_positions=cfg.max_target_positions, symbolic=alpha is not None,
                                symbolic_output=bool(cfg.symbolic.symbolic_output))
        decoder.alpha = alpha
        return maybe_compile(cls(cfg, encoder, decoder), cfg)

    def set_unseen(self, ids) -> None:
        """Words unseen in training (babi_qa's unseen.txt): zero embedding rows at lookup and zero
        output logits (the paper); their α is kept (tp_transformer has --zero-unseen-alpha)."""
        unseen = torch.zeros(len(self.encoder.dictionary), dtype=torch.bool)
        unseen[torch.as_tensor(list(ids), dtype=torch.long)] = True
        self.encoder.core.embed_tokens.set_unseen(unseen.to(self.encoder.core.embed_tokens.weight.device))
        if self.decoder.dictionary == self.encoder.dictionary:
            self.decoder.embed_tokens.set_unseen(unseen.to(self.decoder.embed_tokens.weight.device))


def _embedding(num: int, dim: int, padding_idx: int) -> nn.Embedding:
    """folnet_embedding's init (N(0, 1/D1), zero pad row) in an embedding that can zero unseen words."""
    init = folnet_embedding(num, dim, padding_idx).weight.data   # the same random draws as folnet_embedding's
    return UnseenZeroEmbedding(num, dim, padding_idx=padding_idx, _weight=init)


@register_model_architecture("folnet_transformer", "folnet_transformer_base")
def folnet_transformer_base(args):
    """The dataclass defaults (BERT-base sizes, 6+6 layers)."""


@register_model_architecture("folnet_transformer", "folnet_transformer_math")
def folnet_transformer_math(args):
    # tp_transformer_math sizes: d=512, ffn 2048, H=8, 6+6 layers
    preset(args, folnet_unary_dim=512, folnet_heads=8, folnet_ffn_unary=2048)


@register_model_architecture("folnet_transformer", "folnet_transformer_tiny")
def folnet_transformer_tiny(args):
    preset(args, encoder_layers=2, decoder_layers=2, **FOLNET_TINY)
