"""Relative-distance ids: the official id map (2δ+2 ids), and segment detection.

Two independent references:
* ``official_ids``: a brute-force re-derivation of the official procedure
  (tencent-ailab/FOLNet folnet.py:207-232), step by step in plain Python: the
  Toeplitz matrix with first row r = clip(0, 1, ..., δ-1) and first column
  c = [0, 2δ-1, 2δ-2, ..., δ+1, δ+1, ...] (folnet.py:210-215), then the
  cross-segment id δ (:226-229), then row 0 -> 2δ and column 0 -> 2δ+1
  (:230-231), which leaves [CLS] -> [CLS] at the distance-0 id.
* ``HAND``: one small table written out by hand.
"""
import random

import pytest
import torch

from folnet_helpers import single_thread  # noqa: F401

from nesyseq.plugins.layers.folnet_masks import real_positions
from nesyseq.plugins.layers.folnet_rpe import (cross_id, num_distance_ids, relative_distance_ids,
                                       segments_from_separators)


def official_ids(types, clip):
    """The official procedure on one unpadded sequence with token types ``types``."""
    n = len(types)
    r = [min(k, clip - 1) for k in range(n)]  # first row: tau - t = k >= 0
    c = [max(-k, -(clip - 1)) for k in range(n)]  # first column: tau - t = -k
    c = [c[0]] + [v + 2 * clip for v in c[1:]]
    toeplitz = [[r[j - i] if j >= i else c[i - j] for j in range(n)] for i in range(n)]
    ids = [[toeplitz[i][j] if types[i] == types[j] else clip for j in range(n)] for i in range(n)]
    for j in range(1, n):
        ids[0][j] = 2 * clip
    for i in range(1, n):
        ids[i][0] = 2 * clip + 1
    return ids


# clip δ = 2: distances tau - t >= 0 -> 0 / 1, < 0 -> 3; cross-segment 2; from [CLS] 4; to [CLS] 5
HAND = [
    # <s> a1 a2 </s> </s> b1 </s>
    [0, 4, 4, 4, 4, 4, 4],  # <s>
    [5, 0, 1, 1, 2, 2, 2],  # a1
    [5, 3, 0, 1, 2, 2, 2],  # a2
    [5, 3, 3, 0, 2, 2, 2],  # </s>  (segment A)
    [5, 2, 2, 2, 0, 1, 1],  # </s>  (segment B)
    [5, 2, 2, 2, 3, 0, 1],  # b1
    [5, 2, 2, 2, 3, 3, 0],  # </s>
]
BOS, PAD, EOS, A1, A2, B1 = 0, 1, 2, 10, 11, 12


def _ids(tokens, clip=2):
    pad = tokens.eq(PAD)
    pos = real_positions(pad)
    seg = segments_from_separators(tokens, EOS, pad)
    return relative_distance_ids(pos, pos, clip=clip, seg_q=seg, seg_k=seg, cls=True), pad


def test_two_segment_table():
    tokens = torch.tensor([[BOS, A1, A2, EOS, EOS, B1, EOS]])
    ids, _ = _ids(tokens)
    assert ids[0].tolist() == HAND
    assert official_ids([0, 0, 0, 0, 1, 1, 1], 2) == HAND
    assert num_distance_ids(2) == 6


@pytest.mark.parametrize("clip", [1, 2, 3, 8, 64])
def test_equals_official_procedure(clip):
    """Random two-segment lengths (up to 3δ tokens, so clipping happens) against the official map."""
    rng = random.Random(clip)
    for _ in range(20):
        la, lb = rng.randint(1, 3 * clip + 2), rng.randint(0, 3 * clip + 2)
        types = [0] * la + [1] * lb
        pos = torch.arange(la + lb)[None]
        seg = torch.tensor([types])
        ids = relative_distance_ids(pos, pos, clip=clip, seg_q=seg, seg_k=seg, cls=True)
        want = official_ids(types, clip)
        assert ids[0].tolist() == want
        assert max(max(row) for row in want) < num_distance_ids(clip)


def test_every_id_is_used():
    """Distances from -(δ-1) to δ-1, cross, from/to [CLS]: all 2δ+2 ids occur (δ = 3)."""
    clip = 3
    types = [0] * 6 + [1] * 2
    pos = torch.arange(8)[None]
    seg = torch.tensor([types])
    ids = relative_distance_ids(pos, pos, clip=clip, seg_q=seg, seg_k=seg, cls=True)
    assert sorted(set(ids.flatten().tolist())) == list(range(num_distance_ids(clip)))


def test_table_is_padding_invariant_left_and_right():
    base = [BOS, A1, A2, EOS, EOS, B1, EOS]
    for tokens in ([PAD] * 3 + base, base + [PAD] * 3):
        ids, pad = _ids(torch.tensor([tokens]))
        real = (~pad[0]).nonzero().flatten()
        assert ids[0][real][:, real].tolist() == HAND


def test_single_segment_no_cls_clip():
    pos = torch.arange(5)[None]
    ids = relative_distance_ids(pos, pos, clip=3)
    d = [[tau - t for tau in range(5)] for t in range(5)]
    expect = [[min(x, 2) if x >= 0 else 6 - min(-x, 2) for x in row] for row in d]
    assert ids[0].tolist() == expect
    assert cross_id(3) == 3


def test_segments_single_sentence():
    tokens = torch.tensor([[BOS, A1, A2, EOS, PAD]])
    assert segments_from_separators(tokens, EOS, tokens.eq(PAD))[0, :4].tolist() == [0, 0, 0, 0]
