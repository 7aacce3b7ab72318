"""Small dictionaries and batches for the QA model tests."""
import argparse

import torch
from fairseq.data import Dictionary

WORDS = ["mary", "john", "sandra", "daniel", "moved", "to", "the", "kitchen", "garden", "office",
         "where", "is", ".", "?"]
NAMES = ["mary", "john", "sandra", "daniel"]


def make_dict():
    d = Dictionary()
    for w in WORDS:
        d.add_symbol(w)
    return d


class FakeTask:
    def __init__(self, d):
        self.source_dictionary = self.target_dictionary = d


def encode(d, texts):
    rows = [[d.index(w) for w in t.split()] + [d.eos()] for t in texts]
    T = max(map(len, rows))
    out = torch.full((len(rows), T), d.pad(), dtype=torch.long)
    for i, r in enumerate(rows):
        out[i, : len(r)] = torch.tensor(r)
    return out


def tie_names(embeddings, ids, generator=None):
    """Give every id in ``ids`` the same semantic row and α logit (a random one)."""
    with torch.no_grad():
        for emb in embeddings:
            row = emb.semantic.weight[ids[0]].clone()
            a = torch.randn((), generator=generator)
            for i in ids:
                emb.semantic.weight[i] = row
                emb.alpha_logit[i] = a
