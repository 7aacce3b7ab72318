"""fairseq's batch_by_size must cover every index exactly once (the pinned build
drops the remainder when required_batch_size_multiple > 1)."""
import numpy as np
import pytest

import plugins  # noqa: F401  (applies the fix)
from fairseq.data import data_utils


@pytest.mark.parametrize("mult", [1, 3, 8])
@pytest.mark.parametrize("max_tokens,max_sentences", [(None, 8), (None, 32), (200, None), (90, 16)])
def test_every_index_batched_once(mult, max_tokens, max_sentences):
    rng = np.random.default_rng(mult)
    sizes = rng.integers(1, 30, size=61).astype(np.int64)
    indices = np.argsort(sizes, kind="mergesort").astype(np.int64)
    # fairseq passes the token counts aligned with ``indices``
    batches = data_utils.batch_by_size(indices, num_tokens_vec=sizes[indices], max_tokens=max_tokens,
                                       max_sentences=max_sentences, required_batch_size_multiple=mult)
    flat = np.concatenate(batches)
    assert sorted(flat.tolist()) == list(range(61))  # brute force: each index exactly once
    for b in batches:
        if max_sentences:
            assert len(b) <= max_sentences
        if max_tokens:
            assert len(b) * sizes[b].max() <= max_tokens or len(b) == 1
