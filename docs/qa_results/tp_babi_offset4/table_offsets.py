"""Print a task-1 checkpoint's relative-position bias b^h[bucket(δ)] by offset δ, per head and
averaged over the heads, and the most negative head-mean over |δ| < 16 (the exact buckets).
    python table_offsets.py LABEL=CKPT [LABEL=CKPT ...]
"""
import sys

import torch

import nesyseq.plugins.checkpoint_safety  # noqa: F401  (the allow-list for weights_only loading)
from nesyseq.plugins.layers.relative_position import relative_bucket

KEY = "encoder.relative_bias.table.weight"


def load_table(path):
    """The checkpoint's state, its relative table (buckets, heads) as stored in it, and the
    relative max distance of its cfg (a dict or a namespace, depending on how it was saved)."""
    state = torch.load(path, map_location="cpu", weights_only=True)
    model_cfg = state["cfg"]["model"]
    max_distance = (model_cfg["encoder_relative_max_distance"] if isinstance(model_cfg, dict)
                    else model_cfg.encoder_relative_max_distance)
    return state, state["model"][KEY], max_distance


def main(args):
    for arg in args:
        label, path = arg.split("=", 1)
        _, table, max_distance = load_table(path)                      # (buckets, heads)
        exact = table.shape[0] // 4
        delta = torch.arange(-(exact - 1), exact)
        bias = table[relative_bucket(delta, table.shape[0], max_distance)]   # (offsets, heads)
        mean = bias.mean(1)
        i = int(mean.argmin())
        print(f"{label}: most negative head-mean {mean[i]:.2f} at offset {int(delta[i]):+d}; "
              f"offsets -5..-3: {' '.join(f'{x:.2f}' for x in mean[exact - 6:exact - 3])}, "
              f"+3..+5: {' '.join(f'{x:.2f}' for x in mean[exact + 2:exact + 5])}")
        print("  offset " + " ".join(f"{d:+5d}" for d in delta.tolist()))
        for h in range(bias.shape[1]):
            print(f"  head {h} " + " ".join(f"{x:5.1f}" for x in bias[:, h].tolist()))


if __name__ == "__main__":
    main(sys.argv[1:])
