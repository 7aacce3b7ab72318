"""TPRU cell vs a naive per-example implementation of the slide equations."""

import pytest
import torch

from nesyseq.plugins.layers.tpru import BiRecurrent, TPRUCell, recurrent_param_count, slide_param_formula


def naive_step(cell, x, b_prev):
    """Slides, one example at a time, with explicit loops over roles; x (d_in,), b_prev (d,)."""
    V = cell.V                                   # (N, r)
    Wu, Wr = cell.W_u.weight, cell.W_r.weight    # (d, r)
    d = cell.hidden_size
    W, Wx = cell.W_in.weight[:d], cell.W_in.weight[d:]
    N = V.size(0)
    U = torch.stack([Wu @ V[n] for n in range(N)], 1)      # u_n = W_u v_n, columns
    R = torch.stack([Wr @ V[n] for n in range(N)], 1)
    if cell.code_variant:
        Wh, Wb = cell.W_rec.weight[:d], cell.W_rec.weight[d:]
        bh, bg = cell.W_rec.bias[:d], cell.W_rec.bias[d:]
        hb = Wh @ b_prev + bh
        Wxb = cell.W_in.bias
        wx, gx = W @ x + Wxb[:d], Wx @ x + Wxb[d:]
        U = U + cell.W_u.bias[:, None]
        R = R + cell.W_r.bias[:, None]
        gb = Wb @ b_prev + bg
    else:
        hb, wx, gx, gb = b_prev, W @ x, Wx @ x, cell.W_rec.weight @ b_prev
    fb = [max(0.0, float(U[:, n] @ hb + cell.b_b)) for n in range(N)]
    fx = [max(0.0, float(U[:, n] @ wx + cell.b_x)) for n in range(N)]
    den = sum((fb[m] + fx[m]) ** 2 for m in range(N))
    f = torch.tensor([(fb[n] + fx[n]) ** 2 / max(den, cell.eps) for n in range(N)], dtype=x.dtype)
    bt = sum(f[n] * R[:, n] for n in range(N))
    if not cell.code_variant:
        bt = torch.tanh(bt)
    g = torch.sigmoid(gb + gx)
    return g * bt + (1 - g) * b_prev


@pytest.mark.parametrize("variant", [False, True])
def test_cell_matches_naive_slides(variant):
    torch.manual_seed(0)
    cell = TPRUCell(5, 6, num_roles=4, role_size=3, code_variant=variant).double()
    x = torch.randn(3, 5, dtype=torch.double)
    b = torch.randn(3, 6, dtype=torch.double)
    out = cell.step(x, b)
    for i in range(3):
        torch.testing.assert_close(out[i], naive_step(cell, x[i], b[i]))


def test_all_zero_relu_uses_epsilon():
    torch.manual_seed(1)
    cell = TPRUCell(4, 4, num_roles=3).double()
    with torch.no_grad():
        cell.b_b.fill_(-1e6)
        cell.b_x.fill_(-1e6)
    x, b = torch.randn(2, 4, dtype=torch.double), torch.randn(2, 4, dtype=torch.double)
    out = cell.step(x, b)
    assert torch.isfinite(out).all()
    g = torch.sigmoid(cell.W_rec(b) + cell.W_in(x)[:, 4:])
    torch.testing.assert_close(out, (1 - g) * b)     # f = 0 -> b̃ = 0 -> tanh 0 = 0
    torch.testing.assert_close(out[0], naive_step(cell, x[0], b[0]))


def test_v_fixed_and_not_trained():
    cell = TPRUCell(4, 4, num_roles=7)
    assert "V" not in dict(cell.named_parameters())
    assert "V" in cell.state_dict() and cell.V.shape == (7, 4)


@pytest.mark.parametrize("masked", [False, True])
def test_fused_equals_step_by_step_and_grads(masked):
    torch.manual_seed(2)
    cell = TPRUCell(5, 8, num_roles=16).double()
    x = torch.randn(7, 3, 5, dtype=torch.double, requires_grad=True)
    mask = torch.ones(7, 3, dtype=torch.bool)
    if masked:
        mask[5:, 0] = False
        mask[:2, 2] = False
    o1, h1 = cell(x, mask=mask, fused=True)
    o2, h2 = cell(x, mask=mask, fused=False)
    torch.testing.assert_close(o1, o2)
    torch.testing.assert_close(h1, h2)
    if masked:
        assert (o1[5:, 0] == 0).all() and (o1[:2, 2] == 0).all()
        torch.testing.assert_close(h1[0], o1[4, 0])
    (o1.sum() + h1.pow(2).sum()).backward()
    for name, p in cell.named_parameters():
        assert p.grad is not None and p.grad.abs().sum() > 0, name
    assert x.grad.abs().sum() > 0


def test_gradcheck_small():
    torch.manual_seed(3)
    cell = TPRUCell(3, 4, num_roles=5).double()
    x = torch.randn(3, 2, 3, dtype=torch.double, requires_grad=True)
    assert torch.autograd.gradcheck(lambda inp: cell(inp)[0], (x,))


def test_param_counter_slides():
    for cell, want in (("tpru", 40960), ("gru", 49152), ("lstm", 65536)):
        enc = BiRecurrent(cell, 64, 64, num_roles=512)
        assert recurrent_param_count(enc) == want == slide_param_formula(cell, 64, 64)
    # N does not change the count
    assert recurrent_param_count(BiRecurrent("tpru", 64, 64, num_roles=8)) == 40960


@pytest.mark.parametrize("cell", ["tpru", "lstm", "gru"])
def test_bidirectional_padding_side_invariant(cell):
    """Right- and left-padded copies of the same batch give the same per-token outputs, and the
    backward direction equals the forward direction run on the reversed sequence."""
    torch.manual_seed(4)
    enc = BiRecurrent(cell, 3, 4, num_roles=6).double()
    lens = [5, 3, 1]
    T = 5
    seqs = [torch.randn(n, 3, dtype=torch.double) for n in lens]
    xr = torch.zeros(T, 3, 3, dtype=torch.double)
    xl = torch.zeros(T, 3, 3, dtype=torch.double)
    mr = torch.zeros(T, 3, dtype=torch.bool)
    ml = torch.zeros(T, 3, dtype=torch.bool)
    for i, s in enumerate(seqs):
        xr[: len(s), i], mr[: len(s), i] = s, True
        xl[T - len(s):, i], ml[T - len(s):, i] = s, True
    orr, _ = enc(xr, mr)
    ol, _ = enc(xl, ml)
    for i, s in enumerate(seqs):
        n = len(s)
        torch.testing.assert_close(orr[:n, i], ol[T - n:, i])
        # each example alone (no padding)
        alone, _ = enc(s[:, None], torch.ones(n, 1, dtype=torch.bool))
        torch.testing.assert_close(orr[:n, i], alone[:, 0])
        if cell == "tpru":
            rev, _ = enc.cells[1](s.flip(0)[:, None])
            torch.testing.assert_close(alone[:, 0, 4:], rev.flip(0)[:, 0])
