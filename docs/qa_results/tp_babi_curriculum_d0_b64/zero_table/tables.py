"""The relative-position tables of the three task-1 starts (generator seed 0, 64 buckets), per
bucket: its offsets i − t and the bias of each of the 4 heads (docs/qa.md, "Which part of the start").
    tables.py FIRST_OUT > tables.txt"""
import sys

import torch

from nesyseq import plugins  # noqa: F401  (checkpoint classes allowed for torch.load)
from nesyseq.plugins.layers.relative_position import relative_bucket

KEY = "encoder.relative_bias.table.weight"
first = sys.argv[1]
tables = {s: torch.load(f"{first}/ck/t1_s{s}.to_task2.pt", weights_only=True)["model"][KEY] for s in (0, 1, 2)}
n = tables[0].shape[0]
delta = torch.arange(-400, 401)
offsets = {}
for d, b in zip(delta.tolist(), relative_bucket(delta, n, 128).tolist()):
    offsets.setdefault(b, []).append(d)
print("bucket | offsets i - t | start 0: heads 1-4 | start 1 (stuck) | start 2 (stuck)")
for b in sorted(offsets):
    lo, hi = min(offsets[b]), max(offsets[b])
    span = f"[{lo}, {hi}]" if lo != hi else f"{lo}"
    heads = " | ".join(" ".join(f"{x:5.2f}" for x in tables[s][b].tolist()) for s in (0, 1, 2))
    print(f"{b:2d} | {span:>12} | {heads}")
