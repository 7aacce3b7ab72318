"""FOLNet's Trans module: channel-major projections with no full-size layout copies.

The trans kernels read channel-major (B, D2, X, A) matrices while FOLNet's
binary atoms are channel-last (B, X, A, D2).  ``Trans`` writes K, v (and v^E)
channel-major straight from the projection matmuls and, given the layer's
output projection as ``writer``, returns to channel-last inside that matmul.

* The module equals a naive channel-last formula (nn.Linear, permute, the
  reference trans, permute back, nn.Linear) in fp64, outputs and every gradient,
  including a large K bias (the softmax over a cancels it exactly).
* The custom autograd functions pass gradcheck.
* On the kernel path (``impl='triton'``, kernels replaced by stand-ins that only
  allocate their outputs, so this runs on CPU), forward + backward issue no copy
  op (copy_/clone/contiguous/_to_copy/cat/pad...) on a tensor of full T^2*D2 size:
  the profiler records every aten op, nested ones included.
"""
import pytest
import torch
import torch.nn as nn

from nesyseq import triton_kernels
from nesyseq.plugins.layers.folnet_ops import Trans, _FromChannelMajor, _ToChannelMajor
from nesyseq.triton_kernels import TransMask, trans_reference
from nesyseq.triton_kernels import trans_triton as tt
from nesyseq.triton_kernels.compile_check import _Recorder

COPY_OPS = {"aten::copy_", "aten::clone", "aten::contiguous", "aten::_to_copy", "aten::cat",
            "aten::constant_pad_nd", "aten::index", "aten::permute_copy", "aten::transpose_copy",
            "aten::_reshape_copy", "aten::as_strided_copy", "aten::expand_copy", "aten::view_copy"}


def _naive(mod: Trans, writer: nn.Linear, u2n, mask, v_enc_in=None):
    """The channel-last formula with every bias: linear, permute, reference trans, permute, linear."""
    K = mod.kernel(u2n).permute(0, 3, 1, 2)
    v = mod.premise(u2n).permute(0, 3, 1, 2)
    ve = mod.premise_enc(v_enc_in).permute(0, 3, 1, 2) if v_enc_in is not None else None
    out = trans_reference(K, v, mask, ve).permute(0, 2, 3, 1)
    return writer(out)


@pytest.mark.parametrize("kind", ["none", "causal"])
def test_trans_module_equals_naive_formula(kind):
    torch.manual_seed(0)
    B, T, D2 = 2, 9, 6
    mod = Trans(16, D2, 4, impl="torch").double()
    writer = nn.Linear(D2, D2).double()
    # the official readers have no bias (issue 7), but the channel-major path must handle one:
    # biased projections here keep that path covered
    mod.kernel, mod.premise = nn.Linear(D2, D2).double(), nn.Linear(D2, D2).double()
    with torch.no_grad():
        mod.kernel.bias.uniform_(-30, 30)   # cancelled by the softmax over a
        mod.premise.bias.uniform_(-1, 1)
    kp = torch.zeros(B, T, dtype=torch.bool)
    kp[1, 6:] = True
    mask = TransMask(kind, key_padding=kp)
    u2n = torch.randn(B, T, T, D2, dtype=torch.float64, requires_grad=True)
    got = mod(u2n, mod.rows(u2n), mask, writer=writer)
    params = [u2n] + list(mod.parameters()) + list(writer.parameters())
    g = torch.randn_like(got)
    ggot = torch.autograd.grad(got, params, g, allow_unused=True)
    want = _naive(mod, writer, u2n, mask)
    gwant = torch.autograd.grad(want, params, g, allow_unused=True)
    assert got.shape == (B, T, T, D2) and got.is_contiguous()
    torch.testing.assert_close(got, want)
    for i, (a, b) in enumerate(zip(ggot, gwant)):
        b = torch.zeros_like(params[i]) if b is None else b
        torch.testing.assert_close(a, b, atol=1e-9, rtol=1e-7, msg=lambda m: f"grad {i}: {m}")
    assert torch.equal(ggot[2], torch.zeros_like(mod.kernel.bias))   # exactly zero, not rounding noise
    # without a writer: the raw trans output, channel-last view
    raw = mod(u2n, mod.rows(u2n), mask)
    torch.testing.assert_close(writer(raw), want)


def test_encdec_rows_enc_channel_major():
    torch.manual_seed(1)
    B, Ti, Tt, D2, De = 2, 5, 4, 6, 3
    mod = Trans(16, D2, 4, enc_binary_dim=De, impl="torch").double()
    writer = nn.Linear(D2, D2).double()
    enc = torch.randn(B, Ti, Ti, De, dtype=torch.float64)
    u2n = torch.randn(B, Tt, Ti + Tt, D2, dtype=torch.float64)
    mask = TransMask("encdec")
    ve = mod.rows_enc(enc)
    assert ve.shape == (B, D2, Ti, Ti) and ve.is_contiguous()
    got = mod(u2n, mod.rows(u2n), mask, ve, writer=writer)
    torch.testing.assert_close(got, _naive(mod, writer, u2n, mask, enc))


def test_projection_functions_gradcheck():
    torch.manual_seed(2)
    x = torch.randn(2, 5, 3, dtype=torch.float64, requires_grad=True)
    w = torch.randn(4, 3, dtype=torch.float64, requires_grad=True)
    b = torch.randn(4, dtype=torch.float64, requires_grad=True)
    for add_bias in (True, False):
        assert torch.autograd.gradcheck(lambda x, w, b: _ToChannelMajor.apply(x, w, b, add_bias), (x, w, b))
    o = torch.randn(2, 3, 5, dtype=torch.float64, requires_grad=True)
    assert torch.autograd.gradcheck(_FromChannelMajor.apply, (o, w, b))
    # the layer's fused writer sum: + x2 w2^T + residual
    x2 = torch.randn(2, 5, 6, dtype=torch.float64, requires_grad=True)
    w2 = torch.randn(4, 6, dtype=torch.float64, requires_grad=True)
    res = torch.randn(2, 5, 4, dtype=torch.float64, requires_grad=True)
    assert torch.autograd.gradcheck(_FromChannelMajor.apply, (o, w, b, x2, w2, res))
    torch.testing.assert_close(_FromChannelMajor.apply(o, w, b, x2, w2, res),
                               o.transpose(1, 2) @ w.t() + b + x2 @ w2.t() + res)
    y = _ToChannelMajor.apply(x, w, b, True)
    assert y.is_contiguous() and y.shape == (2, 4, 5)
    torch.testing.assert_close(y, (x @ w.t() + b).transpose(1, 2))


def _fake_kernels(monkeypatch):
    """The real launch wrappers (tt._forward / tt._backward, with their input
    preparation) run on CPU tensors; only the kernel launches are replaced by a
    recorder, so outputs are allocated but not computed."""
    monkeypatch.setattr(tt, "_mode_for", lambda t: False)
    monkeypatch.setitem(tt._KERNEL_MODULES, False, _Recorder())
    monkeypatch.setattr(triton_kernels, "_triton_module", lambda: tt)


def _full_size_copies(fn, full: int):
    with torch.profiler.profile(activities=[torch.profiler.ProfilerActivity.CPU], record_shapes=True) as prof:
        fn()
    hits = []
    for e in prof.events():
        if e.name in COPY_OPS and e.input_shapes and e.input_shapes[0]:
            n = 1
            for s in e.input_shapes[0]:
                n *= s
            if n >= full:
                hits.append((e.name, e.input_shapes[0]))
    return hits


@pytest.mark.parametrize("kind", ["causal", "none"])
def test_kernel_path_makes_no_full_size_copy(monkeypatch, kind):
    _fake_kernels(monkeypatch)
    torch.manual_seed(3)
    B, T, D2 = 3, 16, 8
    mod = Trans(16, D2, 4, impl="triton")
    writer = nn.Linear(D2, D2)
    u2n = torch.randn(B, T, T, D2, requires_grad=True)
    mask = TransMask(kind)

    def step():
        out = mod(u2n, mod.rows(u2n), mask, writer=writer)
        assert out.shape == (B, T, T, D2) and out.is_contiguous()
        out.backward(torch.randn_like(out))
        assert u2n.grad.is_contiguous()

    hits = _full_size_copies(step, B * D2 * T * T // 4)
    assert not hits, f"full-size copies on the kernel path: {hits}"


def test_copy_counter_sees_the_old_layout(monkeypatch):
    """The counter is live: the channel-last formula (permute views into the
    wrapper, nn.Linear on the permuted output) makes full-size copies."""
    _fake_kernels(monkeypatch)
    B, T, D2 = 3, 16, 8
    lin_k, lin_v, writer = nn.Linear(D2, D2), nn.Linear(D2, D2), nn.Linear(D2, D2)
    u2n = torch.randn(B, T, T, D2, requires_grad=True)

    def step():
        K = lin_k(u2n).permute(0, 3, 1, 2)
        v = lin_v(u2n).permute(0, 3, 1, 2)
        out = writer(triton_kernels.trans(K, v, TransMask("causal"), impl="triton").permute(0, 2, 3, 1))
        out.backward(torch.randn_like(out))

    hits = _full_size_copies(step, B * D2 * T * T // 4)
    assert len(hits) >= 5, hits


def _naive_dropout_trans(mod: Trans, writer: nn.Linear, u2n, kind, key_padding, keep):
    """Official trans with kernel dropout (folnet.py:502-503), channel-last and written out:
    u_d(x, y) = sum_a [softmax_{allowed a} K_d(x, ·)](a) · keep_d(x, a) · v_d(a, y) · ok(a, y),
    keep (B, D2, X, A) in {0, 1/(1-p)}; rows with no allowed a give 0."""
    B, T = key_padding.shape
    valid = ~key_padding
    rel = torch.ones(T, T, dtype=torch.bool) if kind == "none" else torch.ones(T, T, dtype=torch.bool).tril()
    ok = valid[:, :, None] & valid[:, None, :] & rel                         # (B, X, A)
    K = u2n @ mod.kernel.weight.t()                                           # (B, X, A, D2)
    V = (u2n @ mod.premise.weight.t()) * ok[..., None]                        # (B, A, Y, D2)
    P = torch.softmax(K.masked_fill(~ok[..., None], float("-inf")), dim=2).nan_to_num(0.0)
    P = P * keep.permute(0, 2, 3, 1)
    return writer(torch.einsum("bxad,bayd->bxyd", P, V))


@pytest.mark.parametrize("kind", ["none", "causal"])
def test_trans_kernel_dropout_equals_naive_formula(kind):
    """Training with dropout: the softmaxed kernel is dropped out, the premise and output are not.

    Both sides draw the keep mask from the same seeded RNG stream: the naive side
    as F.dropout of ones of the kernel's shape (B, D2, X, A)."""
    torch.manual_seed(0)
    B, T, D2, p = 2, 7, 5, 0.4
    mod = Trans(16, D2, 4, impl="torch", dropout=p).double().train()
    writer = nn.Linear(D2, D2).double()
    kp = torch.zeros(B, T, dtype=torch.bool)
    kp[1, 5:] = True
    u2n = torch.randn(B, T, T, D2, dtype=torch.float64, requires_grad=True)
    torch.manual_seed(123)
    got = mod(u2n, mod.rows(u2n), TransMask(kind, key_padding=kp), writer=writer)
    torch.manual_seed(123)
    keep = torch.nn.functional.dropout(torch.ones(B, D2, T, T, dtype=torch.float64), p=p, training=True)
    assert (keep == 0).float().mean() > 0.2 and (keep > 0).any()
    want = _naive_dropout_trans(mod, writer, u2n, kind, kp, keep)
    torch.testing.assert_close(got, want)
    params = [u2n, mod.kernel.weight, mod.premise.weight, writer.weight]
    g = torch.randn_like(got)
    for a, b in zip(torch.autograd.grad(got, params, g), torch.autograd.grad(want, params, g)):
        torch.testing.assert_close(a, b)
    # eval (and p = 0) take the kernel entry point: no dropout
    ones = torch.ones_like(keep)
    mod.eval()
    torch.testing.assert_close(mod(u2n, mod.rows(u2n), TransMask(kind, key_padding=kp), writer=writer),
                               _naive_dropout_trans(mod, writer, u2n, kind, kp, ones))
    mod.train()
    mod.dropout = 0.0
    torch.testing.assert_close(mod(u2n, mod.rows(u2n), TransMask(kind, key_padding=kp), writer=writer),
                               _naive_dropout_trans(mod, writer, u2n, kind, kp, ones))


def test_layer_passes_its_dropout_to_trans():
    from nesyseq.plugins.layers.folnet_layer import FolnetLayer
    layer = FolnetLayer(d1=8, d2=4, heads=2, ffn1=8, ffn2=8, unary_ops="cjm", binary_ops="apt", dropout=0.3)
    assert layer.ops["t"].dropout == 0.3 == layer.ops["c"].dropout == layer.ops["j"].dropout
