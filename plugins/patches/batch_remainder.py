"""batch_by_size drops the remainder.

fairseq/data/data_utils.py:349 calls the compiled ``batch_by_size_vec`` (data_utils_fast.pyx),
which in this build returns only whole multiples of ``required_batch_size_multiple`` (default 8)
and silently drops the last partial batch: fairseq-generate decodes 16 of 20 test sentences,
validation scores a subset, every epoch skips a few training examples.  Upstream fairseq keeps
that remainder as a final batch; so do we, by batching whatever the compiled code left out.
"""
from typing import Any

import numpy as np

from nesyseq.plugins.patches._version import swap

FAIRSEQ_VERSIONS = ("0.12.3",)
_original: Any = None  # the fairseq function this patch wraps, set by apply()


def batch_by_size_keep_remainder(indices, num_tokens_fn=None, num_tokens_vec=None, max_tokens=None,
                                 max_sentences=None, required_batch_size_multiple=1, fixed_shapes=None):
    batches = _original(indices, num_tokens_fn=num_tokens_fn, num_tokens_vec=num_tokens_vec,
                        max_tokens=max_tokens, max_sentences=max_sentences,
                        required_batch_size_multiple=required_batch_size_multiple, fixed_shapes=fixed_shapes)
    if fixed_shapes is not None:
        return batches
    indices = np.asarray(indices, dtype=np.int64)
    covered = sum(len(b) for b in batches)
    if covered >= len(indices):
        return batches
    seen = np.concatenate(batches) if len(batches) else np.zeros(0, dtype=np.int64)
    keep = ~np.isin(indices, seen)
    rest = indices[keep]
    rest_vec = None if num_tokens_vec is None else np.asarray(num_tokens_vec)[keep]
    tail = _original(rest, num_tokens_fn=num_tokens_fn, num_tokens_vec=rest_vec, max_tokens=max_tokens,
                     max_sentences=max_sentences, required_batch_size_multiple=1)
    return list(batches) + list(tail)


def apply() -> None:
    global _original
    from fairseq.data import data_utils

    _original = swap(__name__, FAIRSEQ_VERSIONS, data_utils, "batch_by_size", batch_by_size_keep_remainder) or _original
