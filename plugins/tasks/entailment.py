"""``--task entailment_pairs``: Evans et al. (2018) logical entailment as sentence-pair classification.

DATA holds ``{split}.txt`` files (``A,B,E`` or ``A,B,E,H1,H2,H3``; see data_prep/entailment_data.py),
e.g. ``train``, ``validate``, ``test_easy``, ..., as written by ``nesyseq prepare entailment``.
Characters are the tokens (a fixed vocabulary: a-z, ~ ( ) & | >).  As in the authors'
``main_logical.py:29-34,62-65``, training batches rename the variables with one random permutation
of a-z per batch (alpha-equivalence augmentation); validation and test batches are untouched.

Batches: ``net_input = {a_tokens (B, Ta), b_tokens (B, Tb)}`` right-padded, ``target`` (B,) float 0/1.

Also registers ``--optimizer amsgrad`` (torch Adam with amsgrad=True; fairseq's ``adam`` has no
amsgrad switch), the authors' optimiser (``main_logical.py``, Adam with amsgrad, lr 1e-3).
"""

import os
from dataclasses import dataclass, field
from typing import List

import numpy as np
import torch
from fairseq.data import Dictionary, FairseqDataset, data_utils
from fairseq.dataclass import FairseqDataclass
from fairseq.optim import FairseqOptimizer, register_optimizer
from fairseq.tasks import FairseqTask, register_task
from omegaconf import II

VARIABLES = "abcdefghijklmnopqrstuvwxyz"
SYMBOLS = "~()&|>"


def char_dictionary() -> Dictionary:
    d = Dictionary()
    for c in VARIABLES + SYMBOLS:
        d.add_symbol(c)
    return d


class EntailmentPairDataset(FairseqDataset):
    def __init__(self, a: List[torch.Tensor], b: List[torch.Tensor], labels: List[int], pad: int):
        self.a, self.b, self.labels, self.pad = a, b, labels, pad
        self.sizes = np.array([max(len(x), len(y)) for x, y in zip(a, b)])

    def __getitem__(self, i):
        return {"id": i, "a": self.a[i], "b": self.b[i], "label": self.labels[i]}

    def __len__(self):
        return len(self.labels)

    def num_tokens(self, i):
        return int(self.sizes[i]) * 2

    def size(self, i):
        return int(self.sizes[i])

    def ordered_indices(self):
        return np.arange(len(self))

    def collater(self, samples):
        if not samples:
            return {}
        a = data_utils.collate_tokens([s["a"] for s in samples], self.pad, left_pad=False)
        b = data_utils.collate_tokens([s["b"] for s in samples], self.pad, left_pad=False)
        return {
            "id": torch.tensor([s["id"] for s in samples]),
            "nsentences": len(samples),
            "ntokens": int(a.ne(self.pad).sum() + b.ne(self.pad).sum()),
            "net_input": {"a_tokens": a, "b_tokens": b},
            "target": torch.tensor([float(s["label"]) for s in samples]),
        }


@dataclass
class EntailmentConfig(FairseqDataclass):
    data: str = field(default="", metadata={"help": "directory with {split}.txt files"})
    rename_variables: bool = field(default=True, metadata={
        "help": "rename the variables by a random permutation per training batch"})
    seed: int = II("common.seed")


@register_task("entailment_pairs", dataclass=EntailmentConfig)
class EntailmentPairsTask(FairseqTask):
    def __init__(self, cfg, dictionary):
        super().__init__(cfg)
        self.dictionary = dictionary
        self.var_ids = torch.tensor([dictionary.index(c) for c in VARIABLES])
        self._rng = np.random.RandomState(cfg.seed)

    @classmethod
    def setup_task(cls, cfg, **kwargs):
        return cls(cfg, char_dictionary())

    @property
    def source_dictionary(self):
        return self.dictionary

    @property
    def target_dictionary(self):
        return self.dictionary

    def encode(self, formula: str) -> torch.Tensor:
        return torch.tensor([self.dictionary.index(c) for c in formula], dtype=torch.long)

    def load_dataset(self, split, combine=False, **kwargs):
        from nesyseq.data_prep.entailment_data import read_file

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


@dataclass
class AmsgradConfig(FairseqDataclass):
    adam_betas: str = field(default="(0.9, 0.999)", metadata={"help": "betas"})
    adam_eps: float = field(default=1e-8, metadata={"help": "epsilon"})
    weight_decay: float = field(default=0.0, metadata={"help": "L2 weight decay (torch Adam semantics)"})
    lr: List[float] = II("optimization.lr")


@register_optimizer("amsgrad", dataclass=AmsgradConfig)
class Amsgrad(FairseqOptimizer):
    def __init__(self, cfg, params):
        super().__init__(cfg)
        import ast
        betas = ast.literal_eval(cfg.adam_betas) if isinstance(cfg.adam_betas, str) else tuple(cfg.adam_betas)
        self._optimizer = torch.optim.Adam(params, lr=cfg.lr[0], betas=betas, eps=cfg.adam_eps,
                                           weight_decay=cfg.weight_decay, amsgrad=True)

    @property
    def optimizer_config(self):
        return {"lr": self.cfg.lr[0], "weight_decay": self.cfg.weight_decay, "amsgrad": True}
