"""Scratch diagnostic (docs/qa.md, issue 23 part 1): error % of a bAbI-style checkpoint on one
test subset, grouped by how many distinct unseen words (the task's unseen.txt: words absent from
train) the example's story and question contain.  Reads the answers through
`evaluations.qa_eval.answers`, the loop behind `nesyseq evaluate qa`.

    python errors_by_new_words.py DATA_BIN_TASK SUBSET CKPT [CKPT ...]
"""
import sys
from collections import Counter

import torch

from nesyseq.evaluations.qa_eval import answers

data, subset, ckpts = sys.argv[1], sys.argv[2], sys.argv[3:]
for ck in ckpts:
    wrong, total = Counter(), Counter()
    for task, sample, pred, gold in answers(ck, data, subset):
        unseen = torch.tensor(task.unseen_ids, dtype=torch.long)
        for b, row in enumerate(sample["net_input"]["src_tokens"]):
            k = int(torch.isin(row.unique(), unseen).sum())
            total[k] += 1
            wrong[k] += int(pred[b] != gold[b])
    print(f"{ck} {subset}: error % by number of distinct unseen words in the example")
    print("unseen_words,questions,error")
    for k in sorted(total):
        print(f"{k},{total[k]},{100.0 * wrong[k] / total[k]:.1f}")
    print(f"all,{sum(total.values())},{100.0 * sum(wrong.values()) / sum(total.values()):.1f}")
