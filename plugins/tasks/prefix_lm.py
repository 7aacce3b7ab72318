"""``--task prefix_lm``: a decoder-only FOLNet trained as a prefix LM on translation pairs.

It reads exactly the data of fairseq's ``translation`` task (``fairseq-preprocess``
output for a source/target language pair) and the batches are the translation
batches: ``net_input = {src_tokens (left-padded), src_lengths,
prev_output_tokens}``, ``target`` the target tokens.  ``folnet_lm`` turns that
into the sequence [source ; target], with the source as a bidirectional
prefix (paper Table 5 / Figure 4(b)) and returns outputs for the target
positions only, so the stock ``cross_entropy`` / ``label_smoothed_cross_entropy``
criterions put the loss on the target only.

Generation (``fairseq-generate --task prefix_lm``): the language model is
wrapped as an encoder-decoder whose "encoder" only hands the source tokens
over as the prefix; the decoder consumes the whole prefix in its first step
and then continues the target one token at a time, so the H- lines are the
target continuation only.
"""

from dataclasses import dataclass

from fairseq.models import FairseqEncoder, FairseqEncoderDecoderModel
from fairseq.tasks import register_task
from fairseq.tasks.translation import TranslationConfig, TranslationTask


@dataclass
class PrefixLMConfig(TranslationConfig):
    pass


class _PrefixEncoder(FairseqEncoder):
    """Holds the source tokens as the decoder's prefix; no parameters."""

    def forward(self, src_tokens, src_lengths=None, **unused):
        return {"src_prefix": [src_tokens]}

    def reorder_encoder_out(self, encoder_out, new_order):
        return {"src_prefix": [encoder_out["src_prefix"][0].index_select(0, new_order)]}

    def max_positions(self):
        return int(1e6)


class PrefixLMGenerationModel(FairseqEncoderDecoderModel):
    """View of a ``folnet_lm`` as an encoder-decoder for fairseq's ``SequenceGenerator``."""

    def __init__(self, lm):
        super().__init__(_PrefixEncoder(lm.decoder.dictionary), lm.decoder)

    def max_positions(self):
        return (self.decoder.max_positions(), self.decoder.max_positions())


@register_task("prefix_lm", dataclass=PrefixLMConfig)
class PrefixLMTask(TranslationTask):
    def build_model(self, cfg, from_checkpoint=False):
        from nesyseq.plugins.models.folnet_lm import FolnetLanguageModel

        model = super().build_model(cfg, from_checkpoint)
        if not isinstance(model, FolnetLanguageModel):
            raise ValueError(f"--task prefix_lm needs a decoder-only folnet_lm architecture "
                             f"(e.g. --arch folnet_lm_tiny), got {type(model).__name__}")
        return model

    def build_generator(self, models, args, **kwargs):
        from nesyseq.plugins.models.folnet_lm import FolnetLanguageModel

        models = [PrefixLMGenerationModel(m) if isinstance(m, FolnetLanguageModel) else m for m in models]
        return super().build_generator(models, args, **kwargs)
