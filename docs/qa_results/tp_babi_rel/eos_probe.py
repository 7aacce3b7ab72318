"""What a symbolic tp_transformer puts after the answer (docs/qa.md, "The rate and the word list").

    python eos_probe.py CKPT DATA_BIN [N]

On the first N test questions (default 256), teacher-forced: β (sigmoid of the decoder's
beta_logit, eq. 4), p(EOS) at the second target step (min / mean / max), the most common top-3
words there, the mass left on the answer word, and how often the answer step's argmax is right.
With p = β p_sem + (1 − β) p_sym and p_sym over the story's symbols only, p(EOS) ≤ β.
"""
import sys
from collections import Counter

import torch
from fairseq import checkpoint_utils

from nesyseq.evaluations.qa_eval import load_state


def main(ckpt: str, data: str, n: int = 256) -> None:
    # the checkpoint read as `evaluate qa` reads it (checked paths, weights_only, plugins registered)
    models, _, task = checkpoint_utils.load_model_ensemble_and_task([ckpt], arg_overrides={"data": data},
                                                                    state=load_state(ckpt, data))
    model = models[0].eval()
    task.load_dataset("test")
    ds, d = task.dataset("test"), task.target_dictionary
    with torch.no_grad():
        sample = ds.collater([ds[i] for i in range(min(n, len(ds)))])
        lp = model.get_normalized_probs(model(**sample["net_input"]), log_probs=True)   # (B, T, V)
    p2 = lp[:, 1].exp()                                                                # (B, V)
    eos = p2[:, d.eos()]
    top = Counter(tuple(d[j] for j in row.topk(3).indices.tolist()) for row in p2)
    beta = torch.sigmoid(model.decoder.beta_logit.float()).item()
    print(f"{ckpt}: {p2.size(0)} test questions")
    print(f"beta {beta:.4f}")
    print(f"p(EOS) at step 2: min {eos.min():.4f} mean {eos.mean():.4f} max {eos.max():.4f}")
    print(f"most common top-3 at step 2: {top.most_common(4)}")
    print(f"mass on the answer word at step 2: {p2.gather(1, sample['target'][:, :1]).mean():.4f}")
    ok = (lp[:, 0].argmax(-1) == sample["target"][:, 0]).float().mean()
    print(f"answer step argmax right: {ok:.4f}")


if __name__ == "__main__":
    main(sys.argv[1], sys.argv[2], *(int(a) for a in sys.argv[3:4]))
