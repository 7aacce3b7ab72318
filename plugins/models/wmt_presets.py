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

from nesyseq.plugins.models import folnet_transformer, tp_transformer
from nesyseq.plugins.models.config_defaults import preset


@register_model_architecture("tp_transformer", "tp_transformer_wmt_en_de")
def tp_transformer_wmt_en_de(args):
    preset(args, dropout=0.1)   # the sizes are tp_transformer's defaults


@register_model_architecture("tp_transformer", "transformer_tp_wmt_en_de")
def transformer_tp_wmt_en_de(args):
    tp_transformer.without_roles(args)
    tp_transformer_wmt_en_de(args)


@register_model_architecture("folnet_transformer", "folnet_transformer_wmt_en_de")
def folnet_transformer_wmt_en_de(args):
    preset(args, share_all_embeddings=True)   # dropout 0.1 is FOLNet's default
    folnet_transformer.folnet_transformer_math(args)  # d=512, 8 heads, ffn 2048, 6+6
