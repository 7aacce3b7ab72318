"""Each FOLNet operator against a naive loop over its Table 2 formula."""
import math

import pytest
import torch

from folnet_helpers import single_thread  # noqa: F401

from nesyseq.plugins.layers.folnet_masks import encdec_mask, self_mask
from nesyseq.plugins.layers.folnet_ops import Assoc, Cjoin, Join, Mu, Prod, Trans, parse_ops
from nesyseq.triton_kernels import allowed_masks

B, T, H, S, D2 = 2, 5, 2, 3, 4
D1 = H * S


def lin(m, x):
    """An independent application of an nn.Linear: x W^T + b."""
    y = torch.einsum("...i,oi->...o", x, m.weight)
    return y if m.bias is None else y + m.bias


def naive_softmax(vals):
    m = max(vals)
    e = [math.exp(v - m) for v in vals]
    return [x / sum(e) for x in e]


MASKS = {
    "none+pad": lambda: self_mask("none", torch.tensor([[False] * T, [True, False, False, False, True]])),
    "causal+pad": lambda: self_mask("causal", torch.tensor([[False] * T, [False, False, False, True, True]])),
    "prefix": lambda: self_mask("prefix", torch.zeros(B, T, dtype=torch.bool), prefix_lengths=torch.tensor([2, 3])),
    "causal-rows": lambda: self_mask("causal", torch.zeros(B, T, dtype=torch.bool), query_offset=3, num_rows=2),
}


def inputs(mask, seed=0):
    g = torch.Generator().manual_seed(seed)
    X, A = mask.pair_ok.shape[1:]
    u1n = torch.randn(B, X, D1, generator=g, dtype=torch.float64)
    u1c = torch.randn(B, A, D1, generator=g, dtype=torch.float64)
    u2n = torch.randn(B, X, A, D2, generator=g, dtype=torch.float64)
    return u1n, u1c, u2n


def make(cls, **kw):
    torch.manual_seed(1)
    return cls(D1, D2, H, **kw).double()


@pytest.mark.parametrize("mname", list(MASKS))
def test_join(mname):
    mask = MASKS[mname]()
    op = make(Join)
    u1n, u1c, u2n = inputs(mask)
    out = op(u2n, op.columns(u1c), mask.pair_ok)
    K, v = lin(op.kernel, u2n), lin(op.premise, u1c).view(B, -1, H, S)
    ok = mask.pair_ok
    ref = torch.zeros_like(out)
    for b in range(B):
        for x in range(ok.shape[1]):
            allowed = [a for a in range(ok.shape[2]) if ok[b, x, a]]
            for h in range(H):
                if not allowed:
                    continue
                p = naive_softmax([K[b, x, a, h].item() for a in allowed])
                for s in range(S):  # u_hs(x) = sum_a K_h(x,a) v_hs(a)
                    ref[b, x, h, s] = sum(pi * v[b, a, h, s] for pi, a in zip(p, allowed))
    torch.testing.assert_close(out, ref)


@pytest.mark.parametrize("mname", list(MASKS))
def test_cjoin(mname):
    mask = MASKS[mname]()
    op = make(Cjoin)
    u1n, u1c, u2n = inputs(mask)
    out = op(op.columns(u1c), u2n, mask.pair_ok)
    K, v = lin(op.kernel, u1c).view(B, -1, S, H), lin(op.premise, u2n)  # official (S, H) split, S premise channels
    ok = mask.pair_ok
    ref = torch.zeros_like(out)
    for b in range(B):
        for x in range(ok.shape[1]):
            allowed = [a for a in range(ok.shape[2]) if ok[b, x, a]]
            if not allowed:
                continue
            for s in range(S):
                for h in range(H):  # u_sh(x) = sum_a K_sh(a) v_s(x,a), softmax over allowed a
                    p = naive_softmax([K[b, a, s, h].item() for a in allowed])
                    ref[b, x, s, h] = sum(pi * v[b, x, a, s] for pi, a in zip(p, allowed))
    torch.testing.assert_close(out, ref)


@pytest.mark.parametrize("mname", list(MASKS))
def test_mu(mname):
    mask = MASKS[mname]()
    op = make(Mu)
    _, _, u2n = inputs(mask)
    out = op(u2n, mask.pair_ok)
    r = lin(op.reader, u2n)
    K, v = r[..., :H], r[..., H:]  # one reader: kernel first, premise after
    ok = mask.pair_ok
    ref = torch.zeros_like(out)
    for b in range(B):
        for x in range(ok.shape[1]):
            allowed = [a for a in range(ok.shape[2]) if ok[b, x, a]]
            if not allowed:
                continue
            for h in range(H):
                p = naive_softmax([K[b, x, a, h].item() for a in allowed])
                for s in range(S):  # u_hs(x) = sum_a K_h(x,a) v_s(x,a)
                    ref[b, x, h, s] = sum(pi * v[b, x, a, s] for pi, a in zip(p, allowed))
    torch.testing.assert_close(out, ref)


@pytest.mark.parametrize("mname", list(MASKS))
def test_assoc(mname):
    mask = MASKS[mname]()
    op = make(Assoc)
    u1n, u1c, _ = inputs(mask)
    out = op(u1n, op.columns(u1c))
    K, v = lin(op.kernel, u1n).view(B, -1, H, S), lin(op.premise, u1c).view(B, -1, H, S)
    ref = torch.zeros_like(out)
    for b in range(B):
        for x in range(out.shape[1]):
            for y in range(out.shape[2]):
                for h in range(H):  # u_h(x,y) = sum_w K_hw(x) v_hw(y)  (/ sqrt(S))
                    ref[b, x, y, h] = sum(K[b, x, h, w] * v[b, y, h, w] for w in range(S)) / math.sqrt(S)
    torch.testing.assert_close(out, ref)


@pytest.mark.parametrize("mname", list(MASKS))
def test_prod(mname):
    mask = MASKS[mname]()
    op = make(Prod)
    u1n, _, u2n = inputs(mask)
    out = op(u1n, u2n, mask.pair_ok)
    K, v = lin(op.kernel, u1n).view(B, -1, H, S), lin(op.premise, u2n)
    ok = mask.pair_ok
    ref = torch.zeros_like(out)
    for b in range(B):
        for x in range(out.shape[1]):
            for y in range(out.shape[2]):
                if not ok[b, x, y]:
                    continue  # premise v_w(x, y) masked
                for h in range(H):  # u_h(x,y) = sum_w K_hw(x) v_w(x,y)  (/ sqrt(S))
                    ref[b, x, y, h] = sum(K[b, x, h, w] * v[b, x, y, w] for w in range(S)) / math.sqrt(S)
    torch.testing.assert_close(out, ref)


def _naive_trans(K, V, k_ok, v_ok):
    """u_h(x,y) = sum_a softmax_{allowed a} K_h(x,a) v_h(a,y); K (B,X,A,H), V (B,A,Y,H)."""
    Bn, X, A, Hn = K.shape
    Y = V.shape[2]
    ref = torch.zeros(Bn, X, Y, Hn, dtype=K.dtype)
    for b in range(Bn):
        for x in range(X):
            allowed = [a for a in range(A) if k_ok[b, x, a]]
            if not allowed:
                continue
            for h in range(Hn):
                p = naive_softmax([K[b, x, a, h].item() for a in allowed])
                for y in range(Y):
                    ref[b, x, y, h] = sum(pi * V[b, a, y, h] * float(v_ok[b, a, y]) for pi, a in zip(p, allowed))
    return ref


@pytest.mark.parametrize("mname", ["none+pad", "causal+pad", "prefix"])
def test_trans_self(mname):
    mask = MASKS[mname]()
    op = make(Trans, impl="torch")
    _, _, u2n = inputs(mask)
    out = op(u2n, op.rows(u2n), mask.trans)
    K, V = lin(op.kernel, u2n), lin(op.premise, u2n)
    k_ok, v_ok = allowed_masks(K.permute(0, 3, 1, 2), V.permute(0, 3, 1, 2), mask.trans)
    torch.testing.assert_close(k_ok, mask.pair_ok)
    # the premise mask is the same relation as the kernel mask
    torch.testing.assert_close(v_ok, mask.pair_ok)
    torch.testing.assert_close(out, _naive_trans(K, V, mask.pair_ok, mask.pair_ok))


def test_trans_encdec():
    Ti, Tt = 3, 4
    enc_pad = torch.tensor([[False] * Ti, [True, False, False]])
    dec_pad = torch.tensor([[False] * Tt, [False, False, False, True]])
    mask = encdec_mask(dec_pad, enc_pad)
    g = torch.Generator().manual_seed(3)
    u2n = torch.randn(B, Tt, Ti + Tt, D2, generator=g, dtype=torch.float64)
    enc_u2 = torch.randn(B, Ti, Ti, D2, generator=g, dtype=torch.float64)
    torch.manual_seed(1)
    op = Trans(D1, D2, H, enc_dim=D1, enc_binary_dim=D2, impl="torch").double()
    out = op(u2n, op.rows(u2n), mask.trans, op.rows_enc(enc_u2))
    K, VD, VE = lin(op.kernel, u2n), lin(op.premise, u2n), lin(op.premise_enc, enc_u2)
    # appendix A.5:  y in T: sum_{a in T} K(x,a) v^D(a,y);  y in I: sum_{a in I} K v^E(a,y) + sum_{a in T} K v^D(a,y)
    ev, dv = ~enc_pad, ~dec_pad
    assert K.shape[-1] == D2  # trans has one scalar head per binary channel
    ref = torch.zeros(B, Tt, Ti + Tt, D2, dtype=torch.float64)
    for b in range(B):
        for x in range(Tt):
            if not dv[b, x]:
                continue
            allowed = [a for a in range(Ti) if ev[b, a]] + [Ti + a for a in range(x + 1) if dv[b, a]]
            for h in range(D2):
                p = dict(zip(allowed, naive_softmax([K[b, x, a, h].item() for a in allowed])))
                for y in range(Ti + Tt):
                    acc = 0.0
                    for a, pa in p.items():
                        if a < Ti:  # a in I: only y in I, from the encoder premise
                            if y < Ti and ev[b, y]:
                                acc += pa * VE[b, a, y, h]
                        else:
                            ad = a - Ti
                            y_ok = (y < Ti and ev[b, y]) or (y >= Ti and y - Ti <= ad and dv[b, y - Ti])
                            if y_ok:
                                acc += pa * VD[b, ad, y, h]
                    ref[b, x, y, h] = acc
    torch.testing.assert_close(out, ref)
    k_ok, _ = allowed_masks(K.permute(0, 3, 1, 2), VD.permute(0, 3, 1, 2), mask.trans, VE.permute(0, 3, 1, 2))
    torch.testing.assert_close(k_ok, mask.pair_ok)


def test_rows_with_nothing_allowed_give_zeros_not_nan():
    pad = torch.ones(B, T, dtype=torch.bool)
    mask = self_mask("causal", pad)
    u1n, u1c, u2n = inputs(mask)
    for op, out in [(make(Join), None), (make(Cjoin), None), (make(Mu), None)]:
        if isinstance(op, Join):
            out = op(u2n, op.columns(u1c), mask.pair_ok)
        elif isinstance(op, Cjoin):
            out = op(op.columns(u1c), u2n, mask.pair_ok)
        else:
            out = op(u2n, mask.pair_ok)
        assert torch.isfinite(out).all() and (out == 0).all()


def test_parse_ops():
    assert parse_ops("jmc.atp") == ("cjm", "apt")
    assert parse_ops("j.a") == ("j", "a")
    assert parse_ops("bj.") == ("j", "")
    for bad in ["jmx.atp", "jma.tp", "jj.a", "j.aa", "jmc", "j.a.t", "t.j"]:
        with pytest.raises(ValueError) as e:
            parse_ops(bad)
        msg = str(e.value)
        assert "--folnet-ops" in msg and "{b,c,j,m}" in msg and "{a,p,t}" in msg and "\n" not in msg


def test_cjoin_extreme_logits_match_naive():
    """Future logits far above the allowed ones must not underflow the allowed rows."""
    mask = MASKS["causal+pad"]()
    op = make(Cjoin)
    _, _, u2n = inputs(mask)
    A = mask.pair_ok.shape[2]
    K = torch.zeros(B, A, S, H, dtype=torch.float64)
    K[:, 0] = torch.randn(B, S, H, dtype=torch.float64)
    K[:, 1:] = 2000.0 + torch.randn(B, A - 1, S, H, dtype=torch.float64)  # exp(-2000) underflows even in fp64
    out = op(K, u2n, mask.pair_ok)
    v = lin(op.premise, u2n)
    ok = mask.pair_ok
    ref = torch.zeros_like(out)
    for b in range(B):
        for x in range(ok.shape[1]):
            allowed = [a for a in range(A) if ok[b, x, a]]
            for s in range(S):
                for h in range(H):
                    if allowed:
                        p = naive_softmax([K[b, a, s, h].item() for a in allowed])
                        ref[b, x, s, h] = sum(pi * v[b, x, a, s] for pi, a in zip(p, allowed))
    torch.testing.assert_close(out, ref)
    assert torch.isfinite(out).all()
