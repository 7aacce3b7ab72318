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


def lr_per_epoch(log):
    """{epoch: lr} from the "| train | epoch N | ... | lr X |" lines of a fairseq-train log."""
    import re
    return {int(e): float(lr) for e, lr in re.findall(r"\| train \| epoch (\d+) \|.*?\| lr ([0-9.e-]+) ", log)}


def prepare_tiny_task1(out):
    """`nesyseq prepare qa --generate` of a tiny task 1 (60 stories: 270 train questions, 10 updates
    per epoch at batch 32: fairseq batches by length) into OUT; returns its bin/task1 folder."""
    import subprocess
    import sys
    subprocess.run([sys.executable, "-m", "nesyseq.cli.main", "prepare", "qa", "--generate", "--out", str(out),
                    "--tasks", "1", "--num-names", "10", "--train-stories", "60", "--test-stories", "10"],
                   check=True, capture_output=True)
    return out / "bin" / "task1"


def same_weights(a, b):
    """Two state dicts with the same keys and bitwise-equal tensors."""
    return a.keys() == b.keys() and all(torch.equal(a[k], b[k]) for k in a)


def record_role_inputs(enc, call):
    """Run ``call()`` and return (the symbolic input each role MLP of the stpr encoder ``enc``
    received, recorded by forward hooks in the order of ``TPREncoder.ROLES``, and what call returned)."""
    mlps = [*enc.story_e, *enc.story_r, enc.q_e, *enc.q_r]
    seen = {}
    hooks = [f.register_forward_hook(lambda mod, args, out, k=k: seen.__setitem__(k, args[1].detach()))
             for k, f in enumerate(mlps)]
    try:
        out = call()
    finally:
        for hook in hooks:
            hook.remove()
    return [seen[k] for k in range(len(mlps))], out
