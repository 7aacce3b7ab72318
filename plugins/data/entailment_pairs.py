"""Pairs of formulas (A, B) with the label "A entails B" for ``--task entailment_pairs``: the
two sides are batched apart (``a_tokens``, ``b_tokens``), each right-padded."""
from typing import List

import numpy as np
import torch
from fairseq.data import FairseqDataset, data_utils


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
