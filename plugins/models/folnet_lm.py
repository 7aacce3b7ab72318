"""FOLNet decoder-only model (``--arch folnet_lm_base | folnet_lm_tiny``).

* Causal LM with fairseq's ``language_modeling`` task: net_input is
  ``{src_tokens, src_lengths}``, the decoder reads ``src_tokens``.
* Prefix LM with the plugin task ``prefix_lm``: net_input is the translation
  batch ``{src_tokens, src_lengths, prev_output_tokens}``; the decoder reads
  [src_tokens ; prev_output_tokens], bidirectional on the source prefix, and
  returns outputs for the target positions only (so the loss is on the
  target only).
"""

from dataclasses import dataclass, field

from fairseq.models import FairseqLanguageModel, register_model, register_model_architecture

from nesyseq.plugins.torch_compile import maybe_compile
from nesyseq.plugins.models.config_defaults import model_config, preset
from nesyseq.plugins.models.folnet_common import FOLNET_TINY, FolnetCommonConfig, folnet_embedding
from nesyseq.plugins.models.folnet_decoder import FolnetDecoder


@dataclass
class FolnetLMConfig(FolnetCommonConfig):
    folnet_layers: int = field(default=12, metadata={"help": "L, number of layers"})
    max_target_positions: int = field(default=1024, metadata={"help": "longest sequence (prefix + target)"})


@register_model("folnet_lm", dataclass=FolnetLMConfig)
class FolnetLanguageModel(FairseqLanguageModel):
    def __init__(self, cfg, decoder):
        super().__init__(decoder)
        self.cfg = cfg

    @classmethod
    def build_model(cls, cfg, task):
        cfg = model_config(cfg, FolnetLMConfig)
        dictionary = task.target_dictionary
        embed = folnet_embedding(len(dictionary), cfg.folnet_unary_dim, dictionary.pad())
        decoder = FolnetDecoder(cfg, dictionary, embed, cfg.folnet_layers, cross=False,
                                max_positions=cfg.max_target_positions)
        return maybe_compile(cls(cfg, decoder), cfg)

    def forward(self, src_tokens, src_lengths=None, prev_output_tokens=None, **kwargs):
        if prev_output_tokens is not None:  # prefix LM: src_tokens is the prefix
            return self.decoder(prev_output_tokens, src_prefix=src_tokens, **kwargs)
        return self.decoder(src_tokens, **kwargs)


@register_model_architecture("folnet_lm", "folnet_lm_base")
def folnet_lm_base(args):
    """The dataclass defaults (BERT-base sizes, 12 layers)."""


@register_model_architecture("folnet_lm", "folnet_lm_tiny")
def folnet_lm_tiny(args):
    preset(args, folnet_layers=2, **FOLNET_TINY)
