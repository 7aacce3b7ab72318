"""Encoder inputs: segment ids reach the token-type embedding; left/right padding invariance."""
import pytest
import torch

from folnet_helpers import build, random_tokens, single_thread  # noqa: F401


def pair_batch(d, g):
    """<s> A </s> </s> B </s> with A, B of different lengths per row."""
    rows = []
    for la, lb in [(3, 2), (1, 4)]:
        a, b = random_tokens(d, 1, la, g)[0], random_tokens(d, 1, lb, g)[0]
        rows.append(torch.cat([torch.tensor([d.bos()]), a, torch.tensor([d.eos(), d.eos()]), b,
                               torch.tensor([d.eos()])]))
    T = max(len(r) for r in rows)
    return torch.stack([torch.cat([r, r.new_full((T - len(r),), d.pad())]) for r in rows])


def shift_left_pad(x, pad, n):
    """Move every row's padding to the left and add n more pad tokens."""
    out = []
    for r in x:
        real = r[r.ne(pad)]
        out.append(torch.cat([r.new_full((x.size(1) + n - len(real),), pad), real]))
    return torch.stack(out)


def test_segment_ids_reach_the_type_embedding():
    model, d = build("folnet_tiny")
    x = pair_batch(d, torch.Generator().manual_seed(0))
    model(x, features_only=True)
    seen = model.encoder.core.last_token_types
    want = torch.zeros_like(x)
    for i, r in enumerate(x):
        eos = (r == d.eos()).nonzero().flatten().tolist()
        want[i, eos[1]:] = 1  # segment B starts at the second </s> of the pair
    real = x.ne(d.pad())
    assert torch.equal(seen[real], want[real])
    # the type embedding matters: zeroing row 1 changes segment-B outputs only
    ref, _ = model(x, features_only=True)
    with torch.no_grad():
        model.encoder.core.embed_types.weight[1].zero_()
    out, _ = model(x, features_only=True)
    assert not torch.allclose(out[want.bool() & real], ref[want.bool() & real])


@pytest.mark.parametrize("side", ["right", "left"])
def test_encoder_padding_invariance_two_segments(side):
    model, d = build("folnet_tiny")
    x = pair_batch(d, torch.Generator().manual_seed(1))
    ref, _ = model(x, features_only=True)
    real = x.ne(d.pad())
    if side == "right":
        y = torch.cat([x, x.new_full((x.size(0), 30), d.pad())], dim=1)
        out, _ = model(y, features_only=True)
        torch.testing.assert_close(out[:, : x.size(1)][real], ref[real], rtol=1e-9, atol=1e-9)
    else:
        y = shift_left_pad(x, d.pad(), 30)
        out, _ = model(y, features_only=True)
        torch.testing.assert_close(out[y.ne(d.pad())], ref[real], rtol=1e-9, atol=1e-9)


@pytest.mark.parametrize("arch", ["folnet_tiny", "folnet_lm_tiny"])
def test_embeddings_follow_the_official_init(arch):
    """folnet.py:63-69: every nn.Embedding ~ N(0, initializer_range = 0.02); our padding row is zero."""
    torch.manual_seed(0)
    model, d = build(arch)
    embs = {n: m.weight.detach() for n, m in model.named_modules() if isinstance(m, torch.nn.Embedding)}
    assert any("rpe" in n for n in embs) and len(embs) >= 2
    for name, w in embs.items():
        if w.size(0) == len(d):  # the word embedding
            assert torch.count_nonzero(w[d.pad()]) == 0, name
            w = torch.cat([w[: d.pad()], w[d.pad() + 1:]])
        n = w.numel()  # 5 standard errors of the mean / of the sample std of n N(0, 0.02) draws
        assert abs(w.mean().item()) < 5 * 0.02 / n ** 0.5, name
        assert abs(w.std().item() - 0.02) < 5 * 0.02 / (2 * n) ** 0.5, (name, w.std().item())
