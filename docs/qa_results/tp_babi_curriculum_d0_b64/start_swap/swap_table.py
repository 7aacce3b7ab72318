"""Write a copy of a warm-start file whose relative-position table is another start's, or zero:
    swap_table.py START.pt OUT.pt (--from OTHER.pt | --zero)
(docs/qa.md, "Which part of the start": is the stuck start's positional prior what holds it?)"""
import argparse
import os

import torch

from nesyseq import plugins  # noqa: F401  (checkpoint classes allowed for torch.load)

KEY = "encoder.relative_bias.table.weight"
ap = argparse.ArgumentParser()
ap.add_argument("start")
ap.add_argument("out")
g = ap.add_mutually_exclusive_group(required=True)
g.add_argument("--from", dest="other")
g.add_argument("--zero", action="store_true")
a = ap.parse_args()
state = torch.load(a.start, weights_only=True)
table = state["model"][KEY]
new = torch.zeros_like(table) if a.zero else torch.load(a.other, weights_only=True)["model"][KEY]
if new.shape != table.shape:
    raise SystemExit(f"{a.other}: {KEY} has shape {tuple(new.shape)}, {a.start} {tuple(table.shape)}")
state["model"][KEY] = new.clone()
tmp = a.out + ".tmp"
torch.save(state, tmp)
os.replace(tmp, a.out)
print(f"{a.out}: {KEY} from {'zeros' if a.zero else a.other} (max |change| {float((new - table).abs().max()):.3f})")
