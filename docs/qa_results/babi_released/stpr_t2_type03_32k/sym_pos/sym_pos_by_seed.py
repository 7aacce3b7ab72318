"""The learned symbolic position weights γ of stpr checkpoints (--symbolic-positions: one row shared
by every role MLP; --symbolic-positions-per-role: one row per role), beside where bAbI's people,
rooms and objects sit in the sentences of a bAbI file.  Question: does a run fail new entities of a
kind when γ at that kind's positions is near 0 (the symbol erased from the sentence embedding)?
Usage: python sym_pos_by_seed.py BABI_TRAIN_FILE CKPT...   (repository root on PYTHONPATH)"""
import collections
import re
import sys

import torch

from nesyseq.data_prep.qa_zero_shot import BABI_ENTITIES
from nesyseq import user_dir  # noqa: F401  (registers the checkpoint classes as safe globals)

POSITIONS = 7


def entity_positions(path):
    """Per kind, a Counter of the word position (0-based, '.' / '?' excluded) of that kind's words."""
    kind_of = {w: k for k, ws in BABI_ENTITIES.items() for w in ws}
    where = {k: collections.Counter() for k in BABI_ENTITIES}
    with open(path) as f:
        for line in f:
            text = line.split("\t")[0]
            words = re.sub(r"[.?]", " ", text.lower()).split()[1:]      # drop the line number
            for j, w in enumerate(words):
                if w in kind_of:
                    where[kind_of[w]][j] += 1
    return where


def main(babi_file, ckpts):
    print("| kind | " + " | ".join(f"pos {j}" for j in range(POSITIONS)) + " |")
    print("|---|" + "---|" * POSITIONS)
    for k, c in entity_positions(babi_file).items():
        n = sum(c.values())
        print(f"| {k} | " + " | ".join(f"{100 * c[j] / n:.0f}%" if c[j] else "" for j in range(POSITIONS)) + " |")
    print()
    print("| checkpoint | β | row | " + " | ".join(f"γ_{j}" for j in range(POSITIONS)) + " |")
    print("|---|---|---|" + "---|" * POSITIONS)
    for ck in ckpts:
        m = torch.load(ck, map_location="cpu", weights_only=True)["model"]
        beta = torch.sigmoid(m["encoder.beta_logit"]).item()
        if "encoder.sym_pos_roles" in m:
            from nesyseq.plugins.models.qa_tpr import TPREncoder
            rows = list(zip(TPREncoder.ROLES, m["encoder.sym_pos_roles"]))
        elif "encoder.sym_pos" in m:
            rows = [("shared", m["encoder.sym_pos"])]
        else:
            rows = [("none (eq. 13)", torch.ones(POSITIONS))]
        for name, g in rows:
            print(f"| {ck} | {beta:.3f} | {name} | " + " | ".join(f"{x:.2f}" for x in g[:POSITIONS].tolist()) + " |")


if __name__ == "__main__":
    main(sys.argv[1], sys.argv[2:])
