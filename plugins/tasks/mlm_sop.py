"""``--task mlm_sop``: masked LM + sentence-order prediction, FOLNet's official pretraining.

DATA is a ``fairseq-preprocess --only-source`` directory (``dict.txt``, ``train.bin/.idx``,
``valid.bin/.idx``) made from text with one sentence per line and a blank line between
documents.  Every item is an SOP pair ``<s> A </s> </s> B </s>`` (``--sop-layout bert``:
``<s> A </s> B </s>``, for converted official checkpoints; A, B swapped with probability 1/2), masked as the official code masks (``plugins/data/sop_pairs.py``).  The task registers
a 2-way classification head ``sentence_order_head`` on the model: the encoder's pooler (dense +
tanh on the first token, ``folnet.py:706-707,732-733``) then a linear layer (``seq_relationship``,
``folnet.py:157``); the pooler is the encoder's, so fine-tuning from the checkpoint keeps it;
train with ``--criterion mlm_sop``.

Batches: ``net_input = {src_tokens (B, T), src_lengths (B,)}``, ``target`` (B, T): the original
token at masked positions, pad elsewhere; ``sop_target`` (B,): 1 = swapped.
"""
import logging
import os
from dataclasses import dataclass, field

from fairseq.data import Dictionary, data_utils
from fairseq.dataclass import ChoiceEnum, FairseqDataclass
from fairseq.utils import safe_getattr
from fairseq.tasks import register_task
from omegaconf import II

from nesyseq.plugins.data.sop_pairs import LAYOUTS, SPLIT_MODES, SentenceOrderDataset
from nesyseq.plugins.tasks.one_dictionary import OneDictionaryTask

logger = logging.getLogger(__name__)

SOP_HEAD = "sentence_order_head"


@dataclass
class MlmSopConfig(FairseqDataclass):
    data: str = field(default="", metadata={"help": "fairseq-preprocess --only-source directory"})
    tokens_per_sample: int = field(default=128, metadata={
        "help": "pair length with <s> and the three </s> (official seq=128, pretrain_FOLNet.sh:3)"})
    mask_prob: float = field(default=0.15, metadata={"help": "share of non-special tokens masked (pretrain_FOLNet.sh:71)"})
    max_predictions_per_seq: int = field(default=20, metadata={
        "help": "at most this many masked tokens per pair (pretrain_FOLNet.sh:4)"})
    sop_split: ChoiceEnum(SPLIT_MODES) = field(default="middle", metadata={
        "help": "middle: split each chunk near its middle, ±Geometric(0.2) tokens, as the official code "
                "(dataset.py:313-319); sentence: at a random sentence boundary (ALBERT)"})
    sop_layout: ChoiceEnum(LAYOUTS) = field(default="roberta", metadata={
        "help": "roberta: <s> A </s> </s> B </s>; bert: <s> A </s> B </s>, the official [CLS] A [SEP] B [SEP] "
                "(dataset.py:328). Must match the model's --folnet-segments (bert for converted checkpoints)"})
    seed: int = II("common.seed")


@register_task("mlm_sop", dataclass=MlmSopConfig)
class MlmSopTask(OneDictionaryTask):
    def __init__(self, cfg: MlmSopConfig, dictionary: Dictionary):
        super().__init__(cfg, dictionary)
        self.mask_idx = dictionary.add_symbol("<mask>")  # as masked_lm / sentence_prediction do

    @classmethod
    def setup_task(cls, cfg: MlmSopConfig, **kwargs):
        path = os.path.join(cfg.data, "dict.txt")
        if not os.path.isfile(path):
            raise FileNotFoundError(f"--task mlm_sop: {path} not found (binarize with fairseq-preprocess --only-source)")
        dictionary = Dictionary.load(path)
        logger.info(f"dictionary: {len(dictionary)} types")
        return cls(cfg, dictionary)

    def load_dataset(self, split, epoch=1, combine=False, **kwargs):
        prefix = os.path.join(self.cfg.data, split)
        lines = data_utils.load_indexed_dataset(prefix, self.dictionary, combine=combine)
        if lines is None:
            raise FileNotFoundError(f"--task mlm_sop: no binarized split {split!r} at {prefix}.bin/.idx")
        self.datasets[split] = SentenceOrderDataset(
            lines, self.dictionary, self.mask_idx, self.cfg.tokens_per_sample, split_mode=str(self.cfg.sop_split),
            seed=self.cfg.seed, mask_prob=self.cfg.mask_prob, max_predictions=self.cfg.max_predictions_per_seq,
            name=prefix, layout=str(self.cfg.sop_layout))
        logger.info(f"{split}: {len(lines)} lines -> {len(self.datasets[split])} sentence-order pairs")

    def build_model(self, cfg, from_checkpoint=False):
        model = super().build_model(cfg, from_checkpoint)
        if not hasattr(model, "register_classification_head"):
            raise ValueError(f"--task mlm_sop: --arch {cfg._name} has no register_classification_head "
                             "(use an encoder such as folnet_base)")
        segments = safe_getattr(cfg, "folnet_segments", None)
        if segments is not None and str(segments) != str(self.cfg.sop_layout):
            raise ValueError(f"--task mlm_sop: --sop-layout {self.cfg.sop_layout} lays pairs out for "
                             f"--folnet-segments {self.cfg.sop_layout}, but the model has --folnet-segments "
                             f"{segments}; pass --sop-layout {segments}")
        model.register_classification_head(SOP_HEAD, num_classes=2)
        return model

    def max_positions(self):
        return self.cfg.tokens_per_sample
