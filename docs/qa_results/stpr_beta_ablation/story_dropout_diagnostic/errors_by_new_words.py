"""Scratch diagnostic (docs/qa.md, issue 23 part 1): error % of a bAbI-style checkpoint on one
test subset, grouped by how many distinct unseen words (the task's unseen.txt: words absent from
train) the example's story and question contain.  Same forward pass and argmax as
`nesyseq evaluate qa` (evaluations/qa_eval.py:answer_error).

    python errors_by_new_words.py DATA_BIN_TASK SUBSET CKPT [CKPT ...]
"""
import sys
from collections import Counter

import torch
from fairseq import checkpoint_utils

import plugins  # noqa: F401  registers the models, the task and the checkpoint safe globals

data, subset, ckpts = sys.argv[1], sys.argv[2], sys.argv[3:]
for ck in ckpts:
    models, _, task = checkpoint_utils.load_model_ensemble_and_task([ck], arg_overrides={"data": data})
    model = models[0].eval()
    unseen = torch.tensor(task.unseen_ids, dtype=torch.long)
    task.load_dataset(subset)
    ds = task.dataset(subset)
    wrong, total = Counter(), Counter()
    with torch.no_grad():
        for i0 in range(0, len(ds), 256):
            s = ds.collater([ds[i] for i in range(i0, min(len(ds), i0 + 256))])
            out = model(**s["net_input"])
            pred = model.get_normalized_probs(out, log_probs=True)[:, 0].argmax(-1)
            gold = s["target"][:, 0]
            src = s["net_input"]["src_tokens"]
            for b in range(src.size(0)):
                k = int(torch.isin(src[b].unique(), unseen).sum())
                total[k] += 1
                wrong[k] += int(pred[b] != gold[b])
    print(f"{ck} {subset}: error % by number of distinct unseen words in the example")
    print("unseen_words,questions,error")
    for k in sorted(total):
        print(f"{k},{total[k]},{100.0 * wrong[k] / total[k]:.1f}")
    print(f"all,{sum(total.values())},{100.0 * sum(wrong.values()) / sum(total.values()):.1f}")
