"""A translation model on the data of ``nesyseq prepare wmt`` as fairseq's ``GeneratorHubInterface``.

    mt = nesyseq.load("ck/checkpoint_best.pt", data="wmt-data")
    mt.translate("The house is small.")            # beam 5, as fairseq's hub interfaces
    mt.translate(["one", "two"], beam=1)          # a list, batched

Text goes through what ``prepare wmt`` did to the training text: whitespace normalised, Moses
punctuation normalisation when it was on (``prepare.json``), then the data folder's ``spm.model``;
the output pieces are joined back as ``fairseq-generate --remove-bpe sentencepiece`` joins them.
"""
from __future__ import annotations

import json

import torch
from fairseq.hub_utils import GeneratorHubInterface

from nesyseq.common.errors import UserError


class WMTModel(GeneratorHubInterface):
    family = "wmt"

    def __init__(self, cfg, task, models, spm_model, normalizer, path=None):
        super().__init__(cfg, task, models)
        import sentencepiece as spm

        self.path = path
        self.spm = spm.SentencePieceProcessor(model_file=str(spm_model))
        self.normalizer = normalizer

    @classmethod
    def from_checkpoint(cls, path, cfg, state, data):
        from nesyseq.data_prep.wmt_prepare import Normalizer
        from nesyseq.hub.checkpoint import build

        meta = data / "prepare.json"
        record = json.loads(meta.read_text()) if meta.is_file() else {}
        src = record.get("src_lang", cfg.task.source_lang)
        task, model = build(cfg, state, data)
        return cls(cfg, task, [model], data / "spm.model", Normalizer(src, bool(record.get("moses_norm"))), path)

    def encode(self, sentence: str) -> torch.LongTensor:
        if not isinstance(sentence, str):
            raise UserError(f"text {sentence!r}: expected a string")
        pieces = self.spm.encode(self.normalizer(sentence), out_type=str)
        if not pieces:
            raise UserError(f"text {sentence!r}: empty after normalisation")
        return self.src_dict.encode_line(" ".join(pieces), add_if_not_exist=False, append_eos=True).long()

    def decode(self, tokens: torch.LongTensor) -> str:
        return self.tgt_dict.string(tokens, "sentencepiece")
