"""Every arm of the device- and dtype-dependent choices, driven on the CPU by device-type strings.

The choices live in small functions of the device type (plugins/layers/device_policy.py, the
trans dispatch table ``triton_kernels.trans_path``, ``Trans.path``, ``trans_triton.kernel_mode``),
so each CUDA arm is run here and its result compared with the plain formula where it computes.
"""
import pytest
import torch
import torch.nn.functional as F

from folnet_helpers import single_thread  # noqa: F401

from nesyseq import triton_kernels
from nesyseq.plugins.layers import device_policy, folnet_masks, folnet_ops
from nesyseq.plugins.layers.folnet_layer import BinaryBool, FolnetLayer, _BinaryBoolFn
from nesyseq.plugins.layers.folnet_masks import self_mask
from nesyseq.triton_kernels import TransMask
from nesyseq.triton_kernels import trans_triton as tt


def _plain_bool(m, u, uT, residual, ok):
    """(residual + W2 GELU(W1 [u; uT] + b1) + b2 + Ws uT + bs) · ok  (folnet.py:559-571)."""
    out = m.fc2(F.gelu(m.fc1(torch.cat([u, uT], dim=-1)))) + m.skip(uT)
    return (residual + out) * ok


# ------------------------------------------------------------------ the binary bool's block size
def test_block_rows_per_device_type():
    assert device_policy.bool_block_rows("cpu") == 1 << 12
    assert device_policy.bool_block_rows("cuda") == 1 << 16
    assert device_policy.bool_block_rows("xpu") == device_policy.bool_block_rows("cuda")


def test_binary_bool_with_the_cuda_block_size_equals_formula():
    """The CUDA arm's block size on CPU tensors: enough pairs for two blocks of whole rows, the
    second one partial (65,536 // 260 = 252 rows, then 8), outputs and every gradient in fp64."""
    rows = device_policy.bool_block_rows("cuda")
    torch.manual_seed(0)
    B, T, D, Fh = 1, 260, 2, 3
    assert (T * T) // rows == 1 and (T * T) % rows and T % (rows // T)  # two blocks, a partial last one
    m = BinaryBool(D, Fh).double()
    u = torch.randn(B, T, T, D, dtype=torch.float64, requires_grad=True)
    res = torch.randn(B, T, T, D, dtype=torch.float64, requires_grad=True)
    ok = (torch.rand(B, T, T, 1) > 0.3).double()
    params = list(m.parameters())
    got = _BinaryBoolFn.apply(u, u.transpose(1, 2), res, ok, *params, rows, True)
    want = _plain_bool(m, u, u.transpose(1, 2), res, ok)
    torch.testing.assert_close(got, want, rtol=1e-12, atol=1e-12)
    g = torch.randn_like(got)
    inputs = [u, res] + params
    for a, b in zip(torch.autograd.grad(got, inputs, g), torch.autograd.grad(want, inputs, g)):
        torch.testing.assert_close(a, b, rtol=1e-10, atol=1e-10)


@pytest.mark.parametrize("device_type,autocast,lean,compiling,want", [
    ("cpu", False, True, False, "blocked"),
    ("cpu", False, False, False, "blocked"),
    ("cpu", True, True, False, "blocked"),
    ("cpu", True, False, False, "plain"),
    ("cuda", False, True, False, "blocked"),
    ("cuda", True, True, False, "blocked"),
    ("cuda", False, False, False, "plain"),
    ("cuda", True, False, False, "plain"),
    ("cpu", False, True, True, "plain"),
    ("cuda", True, True, True, "plain"),
])
def test_binary_bool_path_table(device_type, autocast, lean, compiling, want):
    assert device_policy.binary_bool_path(device_type, autocast, lean, compiling) == want


@pytest.mark.parametrize("lean,autocast", [(True, False), (False, False), (True, True), (False, True)])
def test_binary_bool_both_paths_equal_formula(lean, autocast):
    """BinaryBool.forward through each arm it can take on the CPU (blocked, and plain under
    autocast without lean, the arm a GPU takes without lean) against the formula in the same dtype."""
    torch.manual_seed(1)
    B, T, D, Fh = 2, 5, 4, 6
    m = BinaryBool(D, Fh)
    u = torch.randn(B, T, T, D, requires_grad=True)
    res, ok = torch.randn(B, T, T, D), (torch.rand(B, T, T, 1) > 0.3).float()
    with torch.autocast("cpu", dtype=torch.bfloat16, enabled=autocast):
        got = m(u, u.transpose(1, 2), res, ok, lean=lean)
        want = _plain_bool(m, u, u.transpose(1, 2), res, ok)
    tol = dict(rtol=2e-2, atol=2e-2) if autocast else dict(rtol=1e-5, atol=1e-5)
    torch.testing.assert_close(got.float(), want.float(), **tol)


# ------------------------------------------------------------------ dropout's mask
def test_byte_mask_dropout_per_device_type():
    assert device_policy.byte_mask_dropout_needed("cpu") is True
    assert device_policy.byte_mask_dropout_needed("cuda") is False


@pytest.mark.parametrize("byte_mask", [True, False])
def test_both_dropout_arms_are_dropout(monkeypatch, byte_mask):
    """Each arm (the CPU's 1-byte-mask Function, CUDA's F.dropout) zeroes with probability p, scales
    the rest by 1/(1-p) and sends the gradient through the same mask."""
    monkeypatch.setattr(folnet_ops, "byte_mask_dropout_needed", lambda t: byte_mask)
    torch.manual_seed(0)
    x = (torch.rand(20000) + 0.5).requires_grad_()
    y = folnet_ops.dropout(x, 0.25, True, lean=True)
    assert (y.grad_fn.name() == "_MaskDropoutBackward") == byte_mask
    keep = y.detach() != 0
    torch.testing.assert_close(y.detach()[keep], x.detach()[keep] / 0.75)
    assert abs(float(keep.float().mean()) - 0.75) < 0.02  # 3 sigma of a 20,000-draw Bernoulli is 0.009
    (g,) = torch.autograd.grad(y.sum(), x)
    torch.testing.assert_close(g, keep.float() / 0.75)


# ------------------------------------------------------------------ dense masks
def test_dense_shortcut_per_device_type():
    assert device_policy.dense_mask_shortcut("cpu") is True
    assert device_policy.dense_mask_shortcut("cuda") is False
    assert self_mask("none", torch.zeros(2, 5, dtype=torch.bool)).dense


def test_layer_without_the_dense_shortcut_equals_with_it(monkeypatch):
    """A GPU never takes the dense shortcut (it would read key_padding.any() on the host): the masked
    arithmetic it runs instead gives the same layer output and gradients, checked here in fp64."""
    torch.manual_seed(0)
    layer = FolnetLayer(d1=6, d2=4, heads=2, ffn1=7, ffn2=6, unary_ops="cjm", binary_ops="apt",
                        trans_impl="auto").double().train()
    u1 = torch.randn(2, 5, 6, dtype=torch.float64, requires_grad=True)
    u2 = torch.randn(2, 5, 5, 4, dtype=torch.float64, requires_grad=True)
    pad = torch.zeros(2, 5, dtype=torch.bool)

    def run():
        mask = self_mask("none", pad)
        out = layer(u1, u2, mask)
        loss = out[0].square().sum() + out[1].square().sum()
        return mask.dense, out, torch.autograd.grad(loss, [u1, u2] + list(layer.parameters()))

    dense, out_d, g_d = run()
    monkeypatch.setattr(folnet_masks, "dense_mask_shortcut", lambda t: t != "cpu")  # the CUDA arm
    masked, out_m, g_m = run()
    assert dense and not masked
    for a, b in zip(out_d + g_d, out_m + g_m):
        torch.testing.assert_close(a, b, rtol=1e-10, atol=1e-12)


# ------------------------------------------------------------------ autocast dtypes
def test_autocast_dtype_per_device_type():
    assert triton_kernels.autocast_dtype("cpu") is None
    assert triton_kernels.autocast_dtype("cuda") is None
    assert triton_kernels.activation_dtype("cpu", torch.float32) == torch.float32
    with torch.autocast("cpu", dtype=torch.bfloat16):
        assert triton_kernels.autocast_dtype("cpu") == torch.bfloat16
        assert triton_kernels.activation_dtype("cpu", torch.float32) == torch.bfloat16
        assert triton_kernels.autocast_dtype("cuda") is None  # autocast is per device type
    with torch.autocast("cpu", dtype=torch.float16):
        assert triton_kernels.activation_dtype("cpu", torch.float32) == torch.float16


# ------------------------------------------------------------------ trans dispatch
@pytest.mark.parametrize("impl", ["torch", "eager", "triton"])
def test_trans_path_forced_impls(impl):
    for dev in ("cpu", "cuda"):
        assert triton_kernels.trans_path(torch.float32, dev, (1, 2, 8, 8), None, impl) == impl


def test_trans_path_auto_table():
    shape, causal = (1, 2, 8, 8), TransMask("causal")
    path = triton_kernels.trans_path
    assert path(torch.float16, "cpu", shape, causal, "auto", triton_ok=True) == "torch"
    assert path(torch.float16, "cuda", shape, causal, "auto", triton_ok=False) == "torch"
    assert path(torch.float64, "cuda", shape, causal, "auto", triton_ok=True) == "torch"
    assert path(torch.float16, "cuda", shape, causal, "auto", triton_ok=True) == "triton"
    assert path(torch.float32, "cuda", shape, None, "auto", triton_ok=True) == "eager"  # unmasked fp32
    assert path(torch.bfloat16, "cuda", (1, 2, 8, 1024), None, "auto", triton_ok=True) == "eager"
    with pytest.raises(ValueError, match="--folnet-trans-impl='fast'"):
        path(torch.float32, "cpu", shape, None, "fast")


@pytest.mark.parametrize("impl", ["auto", "torch", "eager"])
def test_trans_runs_the_path_it_names(monkeypatch, impl):
    """trans() on CPU tensors follows trans_path and equals the reference."""
    torch.manual_seed(0)
    K, v = torch.randn(2, 3, 5, 5, dtype=torch.float64), torch.randn(2, 3, 5, 5, dtype=torch.float64)
    mask = TransMask("causal")
    torch.testing.assert_close(triton_kernels.trans(K, v, mask, impl=impl),
                               triton_kernels.trans_reference(K, v, mask), rtol=1e-12, atol=1e-12)


def _trans_op(impl="auto", dropout=0.0, training=False):
    op = folnet_ops.Trans(d1=6, d2=4, heads=2, impl=impl, dropout=dropout)
    return op.train(training)


@pytest.mark.parametrize("device_type,act,kind,dense,lean,training,dropout,impl,want", [
    ("cpu", torch.float32, "none", True, True, True, 0.0, "auto", "dense"),
    ("cpu", torch.float32, "none", True, True, True, 0.1, "auto", "dense"),
    ("cuda", torch.float32, "none", True, True, True, 0.0, "auto", "kernel"),     # unmasked fp32: eager
    ("cuda", torch.bfloat16, "causal", False, True, True, 0.0, "auto", "atoms"),
    ("cuda", torch.bfloat16, "causal", False, False, True, 0.0, "auto", "kernel"),
    ("cuda", torch.bfloat16, "causal", False, True, True, 0.1, "auto", "dropout"),
    ("cpu", torch.float32, "causal", False, True, True, 0.1, "auto", "dropout"),
    ("cpu", torch.float32, "causal", False, True, True, 0.0, "auto", "kernel"),
    ("cpu", torch.float32, "none", True, True, True, 0.0, "triton", "atoms"),
    ("cpu", torch.float32, "none", True, True, False, 0.0, "eager", "kernel"),
])
def test_trans_operator_path_table(monkeypatch, device_type, act, kind, dense, lean, training, dropout, impl, want):
    monkeypatch.setattr(triton_kernels, "_triton_module", lambda: object())  # triton "imports"
    op = _trans_op(impl, dropout, training)
    with torch.enable_grad():
        assert op.path(device_type, act, (2, 8, 8), TransMask(kind), dense, lean, False) == want
    assert op.path(device_type, act, (2, 8, 8), TransMask(kind), dense, lean, True) != "dense"  # encoder columns


def test_trans_operator_paths_equal_formula():
    """Trans.forward through 'dense' and 'kernel' (the arms a CPU can run) against
    softmax_a(K) v on the same weights, fp64, with every pair allowed."""
    torch.manual_seed(0)
    op = _trans_op().double()
    u2n = torch.randn(2, 5, 5, 4, dtype=torch.float64)
    K = torch.einsum("bxac,hc->bhxa", u2n, op.kernel.weight)
    v = torch.einsum("bayc,hc->bhay", u2n, op.premise.weight)
    want = torch.softmax(K, -1) @ v                                            # (B, D2, X, Y)
    for dense in (True, False):
        got = op(u2n, None, TransMask("none"), dense=dense)
        torch.testing.assert_close(got, want.permute(0, 2, 3, 1), rtol=1e-12, atol=1e-12)


# ------------------------------------------------------------------ the kernels' mode
def test_kernel_mode_per_device(monkeypatch):
    if not tt.triton_available():
        pytest.skip("triton is not installed")
    assert tt.kernel_mode(torch.device("cuda")) is False          # compiled
    monkeypatch.delenv("TRITON_INTERPRET", raising=False)
    with pytest.raises(tt.TransKernelUnavailable, match="needs CUDA tensors"):
        tt.kernel_mode(torch.device("cpu"))
    monkeypatch.setenv("TRITON_INTERPRET", "1")
    if tt.interpreter_usable():
        assert tt.kernel_mode(torch.device("cpu")) is True
    else:
        with pytest.raises(tt.TransKernelUnavailable, match="set after triton was imported"):
            tt.kernel_mode(torch.device("cpu"))
