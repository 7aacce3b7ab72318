"""FOLNet's fused CPU compute paths against the plain formulas they replace.

The layer-level equality with the official formula is in
``test_folnet_official_layer.py``; here each fused piece is checked alone, in
fp64, outputs and every gradient, with block sizes that leave a partial last
block, a transposed-view input, a residual and a pair mask.
"""
import pytest
import torch
import torch.nn.functional as F

from folnet_helpers import single_thread  # noqa: F401

from nesyseq.plugins.layers.folnet_layer import BinaryBool, _BinaryBoolFn


def _plain_bool(m, u, uT, residual, ok):
    """(residual + W2 GELU(W1 [u; uT] + b1) + b2 + Ws uT + bs) · ok  (folnet.py:559-571)."""
    out = m.fc2(F.gelu(m.fc1(torch.cat([u, uT], dim=-1)))) + m.skip(uT)
    out = out if residual is None else residual + out
    return out if ok is None else out * ok


@pytest.mark.parametrize("rows", [5, 21, 1 << 12])
@pytest.mark.parametrize("with_residual,with_ok,transposed_view", [
    (False, False, True), (True, True, True), (True, False, False), (False, True, False)])
def test_binary_bool_blocks_equal_formula(monkeypatch, rows, with_residual, with_ok, transposed_view):
    torch.manual_seed(0)
    B, T, D, Fh = 2, 7, 4, 6
    m = BinaryBool(D, Fh).double()
    m.block_rows = rows
    with torch.no_grad():
        for p in m.parameters():
            p.normal_(0, 0.7)
    u = torch.randn(B, T, T, D, dtype=torch.float64, requires_grad=True)
    other = torch.randn(B, T, T, D, dtype=torch.float64, requires_grad=True)
    res = torch.randn(B, T, T, D, dtype=torch.float64, requires_grad=True) if with_residual else None
    ok = (torch.rand(B, T, T, 1) > 0.3).double() if with_ok else None

    def both():
        uT = u.transpose(1, 2) if transposed_view else other
        return m(u, uT, res, ok), _plain_bool(m, u, uT, res, ok)

    got, want = both()
    torch.testing.assert_close(got, want, rtol=1e-12, atol=1e-12)
    inputs = [u] + ([] if transposed_view else [other]) + ([res] if res is not None else []) + list(m.parameters())
    g = torch.randn_like(got)
    for a, b in zip(torch.autograd.grad(got, inputs, g), torch.autograd.grad(want, inputs, g)):
        torch.testing.assert_close(a, b, rtol=1e-11, atol=1e-11)


def test_binary_bool_gradcheck():
    torch.manual_seed(1)
    B, T, D, Fh = 1, 3, 2, 3
    m = BinaryBool(D, Fh).double()
    u = torch.randn(B, T, T, D, dtype=torch.float64, requires_grad=True)
    res = torch.randn(B, T, T, D, dtype=torch.float64, requires_grad=True)
    ok = (torch.rand(B, T, T, 1) > 0.3).double()
    params = tuple(m.parameters())

    def f(u, res, *ps):
        return _BinaryBoolFn.apply(u, u.transpose(1, 2), res, ok, *ps, 4)  # blocks of 4 pairs

    assert torch.autograd.gradcheck(f, (u, res) + params)


def _layer_and_inputs(B=2, T=6, seed=0):
    from nesyseq.plugins.layers.folnet_layer import FolnetLayer
    torch.manual_seed(seed)
    layer = FolnetLayer(d1=6, d2=4, heads=2, ffn1=7, ffn2=6, unary_ops="cjm", binary_ops="apt",
                        trans_impl="torch").double().eval()
    with torch.no_grad():
        for p in layer.parameters():
            p.normal_(0, 0.5)
    g = torch.Generator().manual_seed(seed + 1)
    u1 = torch.randn(B, T, 6, generator=g, dtype=torch.float64, requires_grad=True)
    u2 = torch.randn(B, T, T, 4, generator=g, dtype=torch.float64, requires_grad=True)
    return layer, u1, u2


def test_dense_mask_path_equals_masked_path():
    """FolnetMask.dense skips the mask arithmetic: on an unpadded encoder batch the layer
    (and the stack's final LN) give the same outputs and gradients with dense forced off."""
    import dataclasses
    from nesyseq.plugins.layers.folnet_masks import self_mask
    layer, u1, u2 = _layer_and_inputs()
    mask = self_mask("none", torch.zeros(2, 6, dtype=torch.bool))
    assert mask.dense
    masked = dataclasses.replace(mask, dense=False)
    outs = [layer(u1, u2, m) for m in (mask, masked)]
    g1, g2 = torch.randn_like(outs[0][0]), torch.randn_like(outs[0][1])
    grads = [torch.autograd.grad(o, [u1, u2] + list(layer.parameters()), [g1, g2]) for o in outs]
    for a, b in zip(outs[0] + grads[0], outs[1] + grads[1]):
        torch.testing.assert_close(a, b, rtol=1e-10, atol=1e-10)
    # padding or causality: never dense
    assert not self_mask("none", torch.tensor([[False] * 5 + [True]] * 2)).dense
    assert not self_mask("causal", torch.zeros(2, 6, dtype=torch.bool)).dense


@pytest.mark.parametrize("pad", [False, True])
def test_layer_dropout_branch_is_wired_like_eval(pad):
    """Training with a tiny dropout takes the unfused branches (u2 + dropout(writers), bool
    without the fused residual); with p -> 0 it must equal the fused eval path."""
    from nesyseq.plugins.layers.folnet_masks import self_mask
    layer, u1, u2 = _layer_and_inputs()
    kp = torch.zeros(2, 6, dtype=torch.bool)
    if pad:
        kp[1, 4:] = True
    mask = self_mask("none", kp)
    want = layer(u1, u2, mask)
    layer.train()
    for m in layer.modules():
        if hasattr(m, "dropout") and isinstance(m.dropout, float):
            m.dropout = 1e-12
    torch.manual_seed(0)
    got = layer(u1, u2, mask)
    for a, b in zip(got, want):
        torch.testing.assert_close(a, b, rtol=1e-9, atol=1e-9)
