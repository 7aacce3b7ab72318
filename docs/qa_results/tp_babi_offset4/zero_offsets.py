"""Zero the rows of a warm start's relative-position table at the given offsets (both signs).

A diagnostic of the stuck task-1 starts (docs/qa.md, bullet "What holds a stuck start"), not a product
option: `nesyseq convert warm-start --relative-table` has the supported choices.
    python zero_offsets.py START.pt OUT.pt 4 [5 ...]
"""
import os
import sys

import torch

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from nesyseq.common.atomic import atomic_write  # noqa: E402
from nesyseq.plugins.layers.relative_position import relative_bucket  # noqa: E402
from table_offsets import load_table  # noqa: E402  (beside this file)

src, dst, offsets = sys.argv[1], sys.argv[2], [int(x) for x in sys.argv[3:]]
if not offsets:
    sys.exit("zero_offsets.py: give at least one offset")
state, table, max_distance = load_table(src)                  # table: (buckets, heads), in state
exact = table.shape[0] // 4
if any(abs(o) >= exact for o in offsets):
    sys.exit(f"zero_offsets.py: offsets must be below {exact}, the exact buckets, so that one row is one offset")
delta = torch.tensor([s * o for o in offsets for s in (1, -1)])
buckets = relative_bucket(delta, table.shape[0], max_distance)
for d, b in zip(delta.tolist(), buckets.tolist()):
    print(f"offset {d:+d}: bucket {b}, was {' '.join(f'{x:.2f}' for x in table[b].tolist())} (per head), now 0")
table[buckets] = 0
atomic_write(dst, lambda tmp: torch.save(state, tmp))
