"""cjoin must normalise each row over its own allowed columns (issue 7, bug 1).

A shift shared by all rows (max over every column allowed for *any* row) lets a
large future logit underflow a past row's normaliser, so past outputs change
with future tokens.  These tests put such logits in on purpose.
"""
import pytest
import torch

from folnet_helpers import build, random_tokens, single_thread  # noqa: F401

from nesyseq.plugins.layers.folnet_masks import self_mask
from nesyseq.plugins.layers.folnet_ops import Cjoin

B, T, H, S, D2 = 2, 6, 2, 3, 4


def naive_cjoin(op, K, u2n, ok):
    """u_hs(x) = sum_{a: ok(x,a)} softmax_a(K_hs(a)) v_h(x, a), one row at a time, in fp64."""
    K, u2n = K.double(), u2n.double()
    v = torch.einsum("bxad,sd->bxas", u2n, op.premise.weight.double()) + op.premise.bias.double()
    out = torch.zeros(*ok.shape[:2], S, H, dtype=torch.float64)
    for b in range(ok.shape[0]):
        for x in range(ok.shape[1]):
            allowed = ok[b, x].nonzero().flatten()
            if len(allowed) == 0:
                continue
            p = torch.softmax(K[b, allowed], dim=0)  # (n, S, H), this row's own normaliser
            out[b, x] = torch.einsum("ns,nsh->sh", v[b, x, allowed], p)
    return out


@pytest.mark.parametrize("dtype,big", [(torch.float32, 95.0), (torch.float64, 720.0)])
def test_future_logit_leaves_past_rows_exact(dtype, big):
    torch.manual_seed(0)
    op = Cjoin(H * S, D2, H).to(dtype)
    pad = torch.tensor([[False] * T, [False] * (T - 1) + [True]])
    mask = self_mask("causal", pad)
    K = torch.randn(B, T, S, H, dtype=dtype)
    K[0, T - 1] = big  # the last column: future for every row but the last
    K[1, T - 2] = big  # batch 1: its last real column
    u2n = torch.randn(B, T, T, D2, dtype=dtype)
    out = op(K, u2n, mask.pair_ok)
    ref = naive_cjoin(op, K, u2n, mask.pair_ok)
    tol = dict(rtol=1e-5, atol=1e-6) if dtype == torch.float32 else dict(rtol=1e-10, atol=1e-12)
    torch.testing.assert_close(out.double(), ref, **tol)
    # the rows before the big column are visibly non-zero (the bug shrank them to ~0)
    assert out[0, : T - 1].abs().amax() > 0.05


def test_shared_column_path_is_exact_for_encoder_masks():
    """The fast path (mask kind none) under the same extreme logits."""
    torch.manual_seed(1)
    op = Cjoin(H * S, D2, H)
    mask = self_mask("none", torch.tensor([[False] * T, [True] + [False] * (T - 1)]))
    K = torch.randn(B, T, S, H)
    K[:, 2] = 95.0
    u2n = torch.randn(B, T, T, D2)
    out = op(K, u2n, mask.pair_ok, rows_share_columns=True)
    torch.testing.assert_close(out.double(), naive_cjoin(op, K, u2n, mask.pair_ok), rtol=1e-5, atol=1e-6)
    torch.testing.assert_close(out, op(K, u2n, mask.pair_ok), rtol=1e-5, atol=1e-6)


def _scaled_lm(scale, ops="jmc.atp"):
    model, d = build("folnet_lm_tiny", folnet_ops=ops)
    model = model.float()
    with torch.no_grad():
        for layer in model.decoder.stack.layers:
            layer.ops["c"].kernel.weight.mul_(scale)
    return model, d


@pytest.mark.parametrize("scale", [40.0, 60.0])
def test_whole_model_future_tokens_do_not_move_past(scale):
    model, d = _scaled_lm(scale)
    g = torch.Generator().manual_seed(3)
    x = random_tokens(d, 4, 8, g)
    moved = 0.0
    for trial in range(3):
        y = x.clone()
        y[:, 4:] = random_tokens(d, 4, 4, g)
        ox, _ = model(x)
        oy, _ = model(y)
        torch.testing.assert_close(ox[:, :4], oy[:, :4], rtol=1e-5, atol=1e-5)
        moved = max(moved, (ox[:, 4:] - oy[:, 4:]).abs().max().item())
    assert moved > 1e-3  # the perturbation does reach the future positions


@pytest.mark.parametrize("scale", [40.0, 60.0])
def test_whole_model_incremental_equals_full_at_large_kernels(scale):
    model, d = _scaled_lm(scale)
    x = random_tokens(d, 3, 8, torch.Generator().manual_seed(5))
    state, outs = {}, []
    with torch.no_grad():
        for i in range(x.size(1)):
            o, _ = model.decoder(x[:, : i + 1], incremental_state=state)
            outs.append(o[:, -1:])
        full, _ = model(x)
    torch.testing.assert_close(torch.cat(outs, 1), full, rtol=1e-4, atol=1e-4)


def test_row_chunks_and_their_recomputed_backward_match_one_chunk(monkeypatch):
    torch.manual_seed(2)
    op = Cjoin(H * S, D2, H).double()
    mask = self_mask("causal", torch.zeros(B, T, dtype=torch.bool))
    K0 = torch.randn(B, T, S, H, dtype=torch.float64)
    u0 = torch.randn(B, T, T, D2, dtype=torch.float64)

    def run():
        K, u = K0.clone().requires_grad_(), u0.clone().requires_grad_()
        out = op(K, u, mask.pair_ok)
        out.pow(2).sum().backward()
        return out.detach(), K.grad, u.grad

    whole = run()
    monkeypatch.setattr(Cjoin, "TILE", B * T * H * S * 2)  # two rows per chunk, checkpointed
    chunked = run()
    for a, b in zip(whole, chunked):
        torch.testing.assert_close(a, b, rtol=1e-12, atol=1e-12)
    torch.testing.assert_close(whole[0], naive_cjoin(op, K0, u0, mask.pair_ok), rtol=1e-10, atol=1e-12)
