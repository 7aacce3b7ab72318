"""--encoder-relative-buckets: the bucket function against a scalar re-derivation, the biased
attention (plain and symbolic) against the naive formula, and the encoder: neutral at init,
wired in, invariant to left padding, and symbol-shift equivariant."""
import math

import pytest
import torch

from nesyseq import plugins  # noqa: F401  (registers the models)
from nesyseq.plugins.layers.relative_position import RelativePositionBias, relative_bucket
from nesyseq.plugins.layers.symbolic_transformer import SymbolicTPMultiheadAttention
from nesyseq.plugins.layers.tp_attention import TPMultiheadAttention
from tests.qa_helpers import encode
from tests.test_symbolic_transformer import BOTH, STORIES, equivariance_gap, naive_symbolic_attention
from tests.test_symbolic_transformer import build as build_model
from tests.test_tp_transformer import naive_tp_attention


def scalar_bucket(delta: int, n: int, max_distance: int) -> int:
    """The bucket of one offset, from the definition in words: keys after the query use buckets
    0..n/2-1, keys before it n/2..n-1; |δ| < n/4 exact; then log-spaced to max_distance."""
    half, exact = n // 2, n // 4
    base = half if delta < 0 else 0
    dist = abs(delta)
    if dist < exact:
        return base + dist
    return base + min(half - 1, exact + int(math.log(dist / exact) / math.log(max_distance / exact) * (half - exact)))


@pytest.mark.parametrize("n,max_distance", [(32, 128), (8, 20), (16, 9)])
def test_bucket_against_scalar_definition(n, max_distance):
    deltas = torch.arange(-300, 301)
    got = relative_bucket(deltas, n, max_distance).tolist()
    assert got == [scalar_bucket(int(x), n, max_distance) for x in deltas]
    assert min(got) >= 0 and max(got) == n - 1
    # the T5 table for n = 32, max 128 at a few offsets (exact below 8, then log-spaced)
    if n == 32:
        assert [got[300 + x] for x in (0, 1, 7, 8, 16, 32, 64, 127, 128, 500 - 300)] == \
            [0, 1, 7, 8, 10, 12, 14, 15, 15, 15]
        assert [got[300 + x] for x in (-1, -7, -8, -16, -128)] == [17, 23, 24, 26, 31]


def test_bucket_options_are_checked():
    with pytest.raises(ValueError, match="--encoder-relative-buckets"):
        RelativePositionBias(7, 128, 2)
    with pytest.raises(ValueError, match="--encoder-relative-max-distance"):
        RelativePositionBias(32, 8, 2)


def random_bias(T, H=4, n=16, max_distance=12, seed=0):
    """A randomised table and its bias (1, H, T, T), plus the naive bias from scalar buckets."""
    g = torch.Generator().manual_seed(seed)
    rel = RelativePositionBias(n, max_distance, H).double()
    with torch.no_grad():
        rel.table.weight.copy_(torch.randn(n, H, generator=g, dtype=torch.float64))
    naive = torch.zeros(1, H, T, T, dtype=torch.float64)
    for t in range(T):
        for i in range(T):
            naive[0, :, t, i] = rel.table.weight[scalar_bucket(i - t, n, max_distance)]
    return rel, naive


def test_bias_module_matches_table_lookup():
    rel, naive = random_bias(T=30)
    torch.testing.assert_close(rel(30), naive, rtol=0, atol=0)


def test_tp_attention_with_bias_matches_naive():
    mod = TPMultiheadAttention(32, 4, self_attention=True).double()
    g = torch.Generator().manual_seed(1)
    z = torch.randn(2, 9, 32, generator=g, dtype=torch.float64)
    pad = torch.tensor([[True] * 3 + [False] * 6, [False] * 9])          # left padding
    rel, naive_bias = random_bias(T=9)
    with torch.no_grad():
        got = mod(z, key_padding_mask=pad, attn_bias=rel(9))
        ref = naive_tp_attention(mod, z, pad=pad, bias=naive_bias)
        unbiased = mod(z, key_padding_mask=pad)
    torch.testing.assert_close(got, ref, rtol=1e-10, atol=1e-10)
    assert (got - unbiased).abs().max() > 1e-3                           # the bias acts


def test_symbolic_attention_with_bias_matches_naive():
    mod = SymbolicTPMultiheadAttention(32, 4, self_attention=True).double()
    g = torch.Generator().manual_seed(2)
    z = torch.randn(2, 7, 32, generator=g, dtype=torch.float64)
    s = torch.randn(2, 7, 5, generator=g, dtype=torch.float64)
    slot_mask = torch.tensor([[True] * 5, [True] * 3 + [False] * 2])
    pad = torch.tensor([[False] * 7, [True] * 2 + [False] * 5])
    rel, naive_bias = random_bias(T=7, seed=3)
    with torch.no_grad():
        got = mod(z, s, slot_mask, key_padding_mask=pad, attn_bias=rel(7))
        ref = naive_symbolic_attention(mod, z, s, slot_mask, key_pad=pad, bias=naive_bias)
    for a, b in zip(got, ref):
        torch.testing.assert_close(a, b, rtol=1e-10, atol=1e-10)


def test_bias_is_refused_with_the_causal_shortcut():
    mod = TPMultiheadAttention(16, 2, self_attention=True)
    with pytest.raises(ValueError, match="non-causal"):
        mod(torch.randn(1, 3, 16), causal=True, attn_bias=torch.zeros(1, 2, 3, 3))


def build(buckets, perturb=False, tie=False, **flags):
    """test_symbolic_transformer's small fp64 model with the relative bias (at its init unless
    ``perturb``)."""
    return build_model(perturb=perturb, tie=tie, dropout=0.0, encoder_relative_buckets=buckets,
                       encoder_relative_max_distance=16, **flags)


def left_pad(d, texts):
    right = encode(d, texts)
    lengths = right.ne(d.pad()).sum(1)
    out = torch.full_like(right, d.pad())
    for b, n in enumerate(lengths.tolist()):
        out[b, right.size(1) - n:] = right[b, :n]
    return out


def encoder_states(model, src):
    with torch.no_grad():
        out = model.encoder(src)
    return out["encoder_out"][0], out.get("encoder_out_sym", [None])[0]


@pytest.mark.parametrize("flags", [{}, BOTH], ids=["plain", "symbolic"])
def test_encoder_bias_is_neutral_at_init_and_wired_in(flags):
    base, d = build(0, **flags)
    rel, _ = build(16, **flags)
    assert base.encoder.relative_bias is None
    missing = rel.load_state_dict(base.state_dict(), strict=False).missing_keys
    assert missing == ["encoder.relative_bias.table.weight"]
    src = left_pad(d, STORIES)
    for a, b in zip(encoder_states(base, src), encoder_states(rel, src)):
        if a is not None:
            torch.testing.assert_close(a, b, rtol=0, atol=1e-12)        # zero table: the same model
    with torch.no_grad():
        rel.encoder.relative_bias.table.weight.normal_(generator=torch.Generator().manual_seed(4))
    assert (encoder_states(rel, src)[0] - encoder_states(base, src)[0]).abs().max() > 1e-3


@pytest.mark.parametrize("flags", [{}, BOTH], ids=["plain", "symbolic"])
def test_encoder_bias_is_invariant_to_left_padding(flags):
    """The bias depends on i − t only: an example alone equals it batched with a longer one
    (left padding, fairseq's default for sources)."""
    model, d = build(16, **flags)
    with torch.no_grad():
        model.encoder.relative_bias.table.weight.normal_(generator=torch.Generator().manual_seed(5))
    alone = encoder_states(model, left_pad(d, STORIES[1:]))[0][0]
    batched = encoder_states(model, left_pad(d, STORIES))[0][1]
    n = alone.size(0)
    torch.testing.assert_close(batched[-n:], alone, rtol=0, atol=1e-10)


def test_symbolic_model_with_bias_stays_equivariant():
    model, d = build(16, perturb=True, tie=True, **BOTH)      # every parameter off its init, names tied
    assert model.encoder.relative_bias.table.weight.abs().min() > 0
    assert equivariance_gap(model, d) < 1e-9
