"""FOLNet encoder-decoder (``--arch folnet_transformer_base | _math | _tiny``), appendix A.5.

Encoder: the encoder-only FOLNet stack (no [CLS], one segment; fairseq's
left-padded source is fine because distances use real positions).  It hands
the decoder its final layer-normed unary atoms (B, Ti, D1) and binary atoms
(B, Ti, Ti, D2).  Decoder: ``FolnetDecoder(cross=True)``.
"""

from dataclasses import dataclass, field

from fairseq.models import FairseqEncoder, FairseqEncoderDecoderModel, register_model, register_model_architecture
from fairseq.utils import safe_getattr

from plugins.models.folnet import FolnetCommonConfig, FolnetEncoderCore, _folnet_sizes, folnet_embedding
from plugins.models.folnet_decoder import FolnetDecoder


@dataclass
class FolnetTransformerConfig(FolnetCommonConfig):
    encoder_layers: int = field(default=6, metadata={"help": "encoder layers"})
    decoder_layers: int = field(default=6, metadata={"help": "decoder layers"})
    share_all_embeddings: bool = field(default=False, metadata={
        "help": "share encoder/decoder/output embeddings (needs a joined dictionary)"})
    max_source_positions: int = field(default=1024, metadata={"help": "longest source"})
    max_target_positions: int = field(default=1024, metadata={"help": "longest target"})


class FolnetEncoder(FairseqEncoder):
    def __init__(self, cfg, dictionary, embed_tokens):
        super().__init__(dictionary)
        self.core = FolnetEncoderCore(cfg, embed_tokens, cfg.encoder_layers, cls=False, separator=None)
        self.max_pos = cfg.max_source_positions

    def forward(self, src_tokens, src_lengths=None, return_all_hiddens: bool = False, **unused):
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
        folnet_transformer_base(cfg)
        src_dict, tgt_dict = task.source_dictionary, task.target_dictionary
        d1 = cfg.folnet_unary_dim
        if cfg.share_all_embeddings:
            if src_dict != tgt_dict:
                raise ValueError("--share-all-embeddings requires a joined dictionary")
            enc_embed = dec_embed = folnet_embedding(len(src_dict), d1, src_dict.pad())
        else:
            enc_embed = folnet_embedding(len(src_dict), d1, src_dict.pad())
            dec_embed = folnet_embedding(len(tgt_dict), d1, tgt_dict.pad())
        encoder = FolnetEncoder(cfg, src_dict, enc_embed)
        decoder = FolnetDecoder(cfg, tgt_dict, dec_embed, cfg.decoder_layers, cross=True,
                                max_positions=cfg.max_target_positions)
        return cls(cfg, encoder, decoder)


def _encdec(args, enc_layers, dec_layers):
    args.encoder_layers = safe_getattr(args, "encoder_layers", enc_layers)
    args.decoder_layers = safe_getattr(args, "decoder_layers", dec_layers)
    args.share_all_embeddings = safe_getattr(args, "share_all_embeddings", False)
    args.max_source_positions = safe_getattr(args, "max_source_positions", 1024)
    args.max_target_positions = safe_getattr(args, "max_target_positions", 1024)


@register_model_architecture("folnet_transformer", "folnet_transformer_base")
def folnet_transformer_base(args):
    _folnet_sizes(args, None, 768, 64, 12, 3072, 256, 64)
    _encdec(args, 6, 6)


@register_model_architecture("folnet_transformer", "folnet_transformer_math")
def folnet_transformer_math(args):
    # tp_transformer_math sizes: d=512, ffn 2048, H=8, 6+6 layers
    _folnet_sizes(args, None, 512, 64, 8, 2048, 256, 64)
    _encdec(args, 6, 6)


@register_model_architecture("folnet_transformer", "folnet_transformer_tiny")
def folnet_transformer_tiny(args):
    _folnet_sizes(args, None, 32, 8, 4, 64, 16, 8)
    _encdec(args, 2, 2)
