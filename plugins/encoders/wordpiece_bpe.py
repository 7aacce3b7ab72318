"""``--bpe wordpiece --wordpiece-vocab vocab.txt``: BERT WordPiece inside fairseq.

The tokenizer of the official FOLNet checkpoints (``data_prep/wordpiece.py``),
for fairseq tools that apply ``--bpe`` themselves (``fairseq-interactive``,
hub interfaces).  fairseq's own ``--bpe bert`` does the same through the
``transformers`` package, which nesyseq does not install.
"""
from dataclasses import dataclass, field

from fairseq.data.encoders import register_bpe
from fairseq.dataclass import FairseqDataclass

from nesyseq.data_prep.wordpiece import WordPiece, detokenize


@dataclass
class WordpieceBPEConfig(FairseqDataclass):
    wordpiece_vocab: str = field(default="", metadata={"help": "BERT vocab.txt (one token a line)"})
    wordpiece_cased: bool = field(default=False, metadata={"help": "keep case and accents (cased vocabularies)"})


@register_bpe("wordpiece", dataclass=WordpieceBPEConfig)
class WordpieceBPE:
    def __init__(self, cfg):
        if not cfg.wordpiece_vocab:
            raise ValueError("--bpe wordpiece needs --wordpiece-vocab (the model's vocab.txt)")
        self.tokenizer = WordPiece(cfg.wordpiece_vocab, cased=cfg.wordpiece_cased)

    def encode(self, x: str) -> str:
        return " ".join(self.tokenizer.tokenize(x))

    def decode(self, x: str) -> str:
        return detokenize(x.split())

    def is_beginning_of_word(self, x: str) -> bool:
        return not x.startswith("##")
