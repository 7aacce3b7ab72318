"""``--task entailment_pairs``: Evans et al. (2018) logical entailment as sentence-pair classification.

DATA holds ``{split}.txt`` files (``A,B,E`` or ``A,B,E,H1,H2,H3``; see data_prep/entailment_data.py),
e.g. ``train``, ``validate``, ``test_easy``, ..., as written by ``nesyseq prepare entailment``.
Characters are the tokens (a fixed vocabulary: a-z, ~ ( ) & | >).  As in the authors'
``main_logical.py:29-34,62-65``, training batches rename the variables with one random permutation
of a-z per batch (alpha-equivalence augmentation); validation and test batches are untouched.

Batches: ``net_input = {a_tokens (B, Ta), b_tokens (B, Tb)}`` right-padded, ``target`` (B,) float 0/1.

The authors' optimiser is ``--optimizer amsgrad`` (plugins/optim/amsgrad.py).
"""

import os
from dataclasses import dataclass, field
import numpy as np
import torch
from fairseq.data import Dictionary
from fairseq.dataclass import FairseqDataclass
from fairseq.tasks import register_task
from omegaconf import II

from nesyseq.data_prep.entailment_data import read_file
from nesyseq.plugins.data.entailment_pairs import EntailmentPairDataset
from nesyseq.plugins.tasks.one_dictionary import OneDictionaryTask

VARIABLES = "abcdefghijklmnopqrstuvwxyz"
SYMBOLS = "~()&|>"


def char_dictionary() -> Dictionary:
    d = Dictionary()
    for c in VARIABLES + SYMBOLS:
        d.add_symbol(c)
    return d


@dataclass
class EntailmentConfig(FairseqDataclass):
    data: str = field(default="", metadata={"help": "directory with {split}.txt files"})
    rename_variables: bool = field(default=True, metadata={
        "help": "rename the variables by a random permutation per training batch"})
    seed: int = II("common.seed")


@register_task("entailment_pairs", dataclass=EntailmentConfig)
class EntailmentPairsTask(OneDictionaryTask):
    def __init__(self, cfg, dictionary):
        super().__init__(cfg, dictionary)
        self.var_ids = torch.tensor([dictionary.index(c) for c in VARIABLES])
        self._rng = np.random.RandomState(cfg.seed)

    @classmethod
    def setup_task(cls, cfg, **kwargs):
        return cls(cfg, char_dictionary())

    def encode(self, formula: str) -> torch.Tensor:
        return torch.tensor([self.dictionary.index(c) for c in formula], dtype=torch.long)

    def load_dataset(self, split, combine=False, **kwargs):
        path = os.path.join(self.cfg.data, f"{split}.txt")
        if not os.path.exists(path):
            raise FileNotFoundError(f"entailment_pairs: no file {path} (run `nesyseq prepare entailment`)")
        exs = read_file(path)
        self.datasets[split] = EntailmentPairDataset(
            [self.encode(e.a) for e in exs], [self.encode(e.b) for e in exs], [e.label for e in exs],
            self.dictionary.pad())

    def rename(self, tokens: torch.Tensor, perm: torch.Tensor) -> torch.Tensor:
        """Map variable id var_ids[i] -> var_ids[perm[i]]; other tokens unchanged."""
        table = torch.arange(len(self.dictionary), device=tokens.device)
        table[self.var_ids.to(tokens.device)] = self.var_ids.to(tokens.device)[perm.to(tokens.device)]
        return table[tokens]

    def train_step(self, sample, model, criterion, optimizer, update_num, ignore_grad=False):
        if self.cfg.rename_variables:
            perm = torch.from_numpy(self._rng.permutation(len(VARIABLES)))
            ni = sample["net_input"]
            sample = dict(sample, net_input=dict(ni, a_tokens=self.rename(ni["a_tokens"], perm),
                                                 b_tokens=self.rename(ni["b_tokens"], perm)))
        return super().train_step(sample, model, criterion, optimizer, update_num, ignore_grad)

    def max_positions(self):
        return (100000, 100000)

