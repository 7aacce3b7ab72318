"""WMT'14 en-de presets for the nesyseq models (``--arch …_wmt_en_de``).

fairseq's ``transformer_wmt_en_de`` is its ``base_architecture``
(fairseq/models/transformer/transformer_legacy.py:240): d=512, ffn 2048, 8 heads,
6+6 layers, dropout 0.1, post-LN.  The presets below keep those sizes:

    tp_transformer_wmt_en_de      TP-attention encoder-decoder, d=512/2048/8, 6+6, dropout 0.1
    transformer_tp_wmt_en_de      the same layout with r ≡ 1 (TP-Transformer's own baseline)
    folnet_transformer_wmt_en_de  FOLNet encoder-decoder, D1=512, 8 heads, ffn 2048, 6+6,
                                  shared embeddings (joined dictionary), dropout 0.1
"""
from fairseq.models import register_model_architecture
from fairseq.utils import safe_getattr

from nesyseq.plugins.models import folnet_transformer, tp_transformer


def _default(args, name, value):
    if safe_getattr(args, name, None) is None:
        setattr(args, name, value)


def _wmt_common(args):
    _default(args, "dropout", 0.1)
    _default(args, "attention_dropout", 0.0)
    _default(args, "activation_dropout", 0.0)


@register_model_architecture("tp_transformer", "tp_transformer_wmt_en_de")
def tp_transformer_wmt_en_de(args):
    _default(args, "encoder_embed_dim", 512)
    _default(args, "encoder_ffn_embed_dim", 2048)
    _default(args, "encoder_attention_heads", 8)
    _default(args, "encoder_layers", 6)
    _default(args, "decoder_layers", 6)
    _wmt_common(args)
    tp_transformer.tp_transformer_base(args)


@register_model_architecture("tp_transformer", "transformer_tp_wmt_en_de")
def transformer_tp_wmt_en_de(args):
    args.no_role_binding = True
    args.no_embedding_role = True
    tp_transformer_wmt_en_de(args)


@register_model_architecture("folnet_transformer", "folnet_transformer_wmt_en_de")
def folnet_transformer_wmt_en_de(args):
    _default(args, "share_all_embeddings", True)
    _wmt_common(args)
    folnet_transformer.folnet_transformer_math(args)  # d=512, 8 heads, ffn 2048, 6+6
