"""The FOLNet layer against a naive re-implementation of the official layer formula.

The reference below is written from tencent-ailab/FOLNet folnet.py (operators
:307-506, bool :529-571, Deduction :588-637, ReasonerLayer :641-660): every
operator, its own writer, both bools, the non-affine LNs.  It reads our
modules' weights only; the arithmetic is independent (plain einsums, no masks:
the official encoder has none, so the batch has no padding).
"""
import math

import pytest
import torch
import torch.nn.functional as F

from folnet_helpers import single_thread  # noqa: F401

from nesyseq.plugins.layers.folnet_layer import FolnetLayer, FolnetStack
from nesyseq.plugins.layers.folnet_masks import self_mask

B, T, H, S, D2, F1, F2 = 2, 5, 2, 3, 4, 7, 6
D1 = H * S


def ln(x):
    u = x.mean(-1, keepdim=True)
    return (x - u) / torch.sqrt((x - u).pow(2).mean(-1, keepdim=True) + 1e-12)


def lin(m, x):
    y = x @ m.weight.T
    return y if m.bias is None else y + m.bias


def official_layer(layer, u1, u2):
    o = layer.ops
    w = layer.writers
    x1, x2 = ln(u1), ln(u2)
    q = math.sqrt(math.sqrt(S))
    # join: softmax_a K_h(x,a) v_hs(a)
    Kj = torch.softmax(lin(o["j"].kernel, x2), dim=2)  # (B, X, A, H)
    Vj = lin(o["j"].premise, x1).view(B, T, H, S)
    oj = torch.einsum("bxah,bahs->bxhs", Kj, Vj).reshape(B, T, D1)
    # mu: reader D2 -> H + S (kernel first)
    r = lin(o["m"].reader, x2)
    om = torch.einsum("bxah,bxas->bxhs", torch.softmax(r[..., :H], dim=2), r[..., H:]).reshape(B, T, D1)
    # cjoin: kernel split (S, H), softmax over a; premise S channels, contracted over the ROW index
    Kc = torch.softmax(lin(o["c"].kernel, x1).view(B, T, S, H), dim=1)
    Vc = lin(o["c"].premise, x2)  # (B, A, Y, S): row a, column y
    oc = torch.einsum("bash,bays->bysh", Kc, Vc).reshape(B, T, D1)
    u1 = u1 + lin(w["j"], oj) + lin(w["m"], om) + lin(w["c"], oc)
    # assoc: q and k each / S^(1/4)
    qa = (lin(o["a"].kernel, x1) / q).view(B, T, H, S)
    ka = (lin(o["a"].premise, x1) / q).view(B, T, H, S)
    oa = torch.einsum("bxhw,byhw->bxyh", qa, ka)
    # prod
    qp = (lin(o["p"].kernel, x1) / q).view(B, T, H, S)
    kp = lin(o["p"].premise, x2) / q
    op = torch.einsum("bxhw,bxyw->bxyh", qp, kp)
    # trans: softmax over a of the kernel, channel by channel
    Kt = torch.softmax(lin(o["t"].kernel, x2), dim=2)  # (B, X, A, D2)
    Vt = lin(o["t"].premise, x2)  # (B, A, Y, D2)
    ot = torch.einsum("bxad,bayd->bxyd", Kt, Vt)
    u2 = u2 + lin(w["a"], oa) + lin(w["p"], op) + lin(w["t"], ot)
    # bools (the "predic" deduction)
    f = layer.ffn1
    u1 = u1 + lin(f.fc2, F.gelu(lin(f.fc1, ln(u1))))
    g = layer.ffn2
    z = ln(u2)
    zt = z.transpose(1, 2)
    u2 = u2 + lin(g.fc2, F.gelu(lin(g.fc1, torch.cat([z, zt], dim=-1)))) + lin(g.skip, zt)
    return u1, u2


def make_layer(seed=0):
    torch.manual_seed(seed)
    layer = FolnetLayer(d1=D1, d2=D2, heads=H, ffn1=F1, ffn2=F2, unary_ops="cjm", binary_ops="apt",
                        trans_impl="torch").double().eval()
    with torch.no_grad():
        for p in layer.parameters():  # large enough that every term matters
            p.normal_(0, 0.5)
    g = torch.Generator().manual_seed(seed + 1)
    u1 = torch.randn(B, T, D1, generator=g, dtype=torch.float64)
    u2 = torch.randn(B, T, T, D2, generator=g, dtype=torch.float64)
    return layer, u1, u2


def test_layer_equals_official_formula():
    layer, u1, u2 = make_layer()
    mask = self_mask("none", torch.zeros(B, T, dtype=torch.bool))
    o1, o2 = layer(u1, u2, mask)
    r1, r2 = official_layer(layer, u1, u2)
    torch.testing.assert_close(o1, r1, rtol=1e-10, atol=1e-10)
    torch.testing.assert_close(o2, r2, rtol=1e-10, atol=1e-10)


@pytest.mark.parametrize("part", ["c", "j", "m", "a", "p", "t", "bool1", "bool2", "bool2.skip", "ln1"])
def test_each_part_is_wired(part):
    """Mutation check kept as a test: cutting one operator's writer (or a bool) breaks the equality."""
    layer, u1, u2 = make_layer()
    mask = self_mask("none", torch.zeros(B, T, dtype=torch.bool))
    r1, r2 = official_layer(layer, u1, u2)
    with torch.no_grad():
        if part in layer.writers:
            layer.writers[part].weight.zero_()
            layer.writers[part].bias.zero_()
        elif part == "bool1":
            layer.ffn1.fc2.weight.zero_()
            layer.ffn1.fc2.bias.zero_()
        elif part == "bool2":
            layer.ffn2.fc2.weight.zero_()
        elif part == "bool2.skip":
            layer.ffn2.skip.weight.zero_()
    if part == "ln1":
        layer.ln1 = torch.nn.Identity()
    o1, o2 = layer(u1, u2, mask)
    assert not (torch.allclose(o1, r1, rtol=1e-6, atol=1e-6) and torch.allclose(o2, r2, rtol=1e-6, atol=1e-6))


@pytest.mark.parametrize("size,want", [((12, 768, 12, 3072), 114_336_000), ((24, 1024, 16, 4096), 404_931_072)])
def test_stack_parameter_count_equals_official(size, want):
    """The official reasoner stack (jmc.atp, D2 64, FFN2 256): counts from folnet.py's own Reasoner."""
    L, d1, h, f1 = size
    with torch.device("meta"):
        st = FolnetStack(layers=L, d1=d1, d2=64, heads=h, ffn1=f1, ffn2=256, unary_ops="cjm", binary_ops="apt")
    assert sum(p.numel() for p in st.parameters()) == want
