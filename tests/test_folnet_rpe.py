"""Relative-distance ids against a hand-computed table, and segment detection."""
import torch

from folnet_helpers import single_thread  # noqa: F401

from plugins.layers.folnet_masks import real_positions
from plugins.layers.folnet_rpe import num_distance_ids, relative_distance_ids, segments_from_separators

# ids with clip δ = 2: 0 [CLS]-[CLS], 1 from [CLS], 2 to [CLS], 3 cross-segment,
# 4 / 5 / 6 = same segment, clipped distance tau - t = -1 / 0 / +1
HAND = [
    # <s> a1 a2 </s> </s> b1 </s>
    [0, 1, 1, 1, 1, 1, 1],  # <s>
    [2, 5, 6, 6, 3, 3, 3],  # a1
    [2, 4, 5, 6, 3, 3, 3],  # a2
    [2, 4, 4, 5, 3, 3, 3],  # </s>  (segment A)
    [2, 3, 3, 3, 5, 6, 6],  # </s>  (segment B)
    [2, 3, 3, 3, 4, 5, 6],  # b1
    [2, 3, 3, 3, 4, 4, 5],  # </s>
]
BOS, PAD, EOS, A1, A2, B1 = 0, 1, 2, 10, 11, 12


def _ids(tokens):
    pad = tokens.eq(PAD)
    pos = real_positions(pad)
    seg = segments_from_separators(tokens, EOS, pad)
    return relative_distance_ids(pos, pos, clip=2, seg_q=seg, seg_k=seg, cls=True), pad


def test_two_segment_table():
    tokens = torch.tensor([[BOS, A1, A2, EOS, EOS, B1, EOS]])
    ids, _ = _ids(tokens)
    assert ids[0].tolist() == HAND
    assert num_distance_ids(2) == 7


def test_table_is_padding_invariant_left_and_right():
    base = [BOS, A1, A2, EOS, EOS, B1, EOS]
    for tokens in ([PAD] * 3 + base, base + [PAD] * 3):
        ids, pad = _ids(torch.tensor([tokens]))
        real = (~pad[0]).nonzero().flatten()
        assert ids[0][real][:, real].tolist() == HAND


def test_single_segment_no_cls_clip():
    pos = torch.arange(5)[None]
    ids = relative_distance_ids(pos, pos, clip=3)
    # 4 + (δ-1) + clip(tau - t, -2, 2)
    expect = [[4 + 2 + max(-2, min(2, tau - t)) for tau in range(5)] for t in range(5)]
    assert ids[0].tolist() == expect


def test_segments_single_sentence():
    tokens = torch.tensor([[BOS, A1, A2, EOS, PAD]])
    assert segments_from_separators(tokens, EOS, tokens.eq(PAD))[0, :4].tolist() == [0, 0, 0, 0]
