"""One CSV row per stpr run: β (semantic weight of eq. 4) of its checkpoint_best, and from its
fairseq log the best valid loss, the last lr and the last training loss under dropout (bits).
Usage: python run_summary.py CK_DIR...   (CK_DIR = OUT/ck/stpr_tT_sS; its log is CK_DIR.log)"""
import re
import sys

import torch
from fairseq import checkpoint_utils

from nesyseq import user_dir  # noqa: F401  (registers the safe globals the checkpoint needs)


def last(pattern, text):
    found = re.findall(pattern, text)
    return found[-1] if found else ""


print("run,beta,best_valid_loss,lr_at_end,train_loss_at_end,updates")
for ck in sys.argv[1:]:
    ck = ck.rstrip("/")
    state = checkpoint_utils.load_checkpoint_to_cpu(f"{ck}/checkpoint_best.pt")
    beta = torch.sigmoid(state["model"]["encoder.beta_logit"]).item()
    log = open(f"{ck}.log").read()
    train = [ln for ln in log.splitlines() if "| train |" in ln]
    print(",".join([ck.split("/")[-1], f"{beta:.3f}", last(r"best_loss ([0-9.]+)", log),
                    last(r"\| lr ([0-9.e-]+)", "\n".join(train)), last(r"\| loss ([0-9.]+)", "\n".join(train)),
                    last(r"num_updates (\d+)", "\n".join(train))]))
