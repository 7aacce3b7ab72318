"""FOLNet's lean training memory: the same model as the plain autograd path, and less kept.

``FolnetLayer.lean`` (the default) makes the LayerNorms keep their output instead of
their input, the binary bool recompute its hidden pre-activation, and trans / cjoin
rebuild their premise v in backward.  The reference is the same layer with
``lean = False``: every intermediate kept by ordinary autograd (torch's LayerNorm,
the kept pre-activation, autograd's matmul), the code path before the lean one.
Outputs and every parameter gradient must agree to round-off, over every operator
and over the encoder (dense and padded), causal LM, prefix LM and encoder-decoder.
"""
import pytest
import torch

from folnet_helpers import build, random_tokens, run_on_triton_interpreter, single_thread  # noqa: F401

from nesyseq.plugins.layers.folnet_layer import FolnetLayer, _NormKeepOutput
from nesyseq.plugins.layers.folnet_ops import _MaskDropout
from nesyseq.plugins.layers.folnet_masks import self_mask

OPS = ["jmc.atp", "c.", "j.", "m.", ".a", ".p", ".t", "c.t", "jm.ap"]


def set_lean(model, lean: bool):
    n = 0
    for m in model.modules():
        if isinstance(m, FolnetLayer):
            m.lean = lean
            n += 1
    assert n > 0


def pair(arch, dtype=torch.float64, **kw):
    torch.manual_seed(0)
    ref, d = build(arch, dropout=0.0, **kw)
    torch.manual_seed(0)
    lean, _ = build(arch, dropout=0.0, **kw)
    set_lean(ref, False)
    with torch.no_grad():  # weights large enough that every term matters
        for p in ref.parameters():
            p.normal_(0, 0.3)
    lean.load_state_dict(ref.state_dict())
    return ref.to(dtype).train(), lean.to(dtype).train(), d


def check(ref, lean, run, rtol, atol):
    out_r, out_l = run(ref), run(lean)
    torch.testing.assert_close(out_l, out_r, rtol=rtol, atol=atol)
    w = torch.randn(out_r.shape, generator=torch.Generator().manual_seed(1), dtype=out_r.dtype)
    (out_r * w).sum().backward()
    (out_l * w).sum().backward()
    grads_r = dict(ref.named_parameters())
    n = 0
    for name, p in lean.named_parameters():
        if grads_r[name].grad is None:
            assert p.grad is None or not p.grad.any(), name
            continue
        torch.testing.assert_close(p.grad, grads_r[name].grad, rtol=rtol, atol=atol, msg=lambda m: f"{name}: {m}")
        n += 1
    assert n > 0


def encoder_run(x):
    return lambda m: m(x)[0]


@pytest.mark.parametrize("ops", OPS)
@pytest.mark.parametrize("padded", [False, True])
def test_encoder_lean_equals_plain(ops, padded):
    ref, lean, d = pair("folnet_tiny", folnet_ops=ops)
    x = random_tokens(d, 2, 6, torch.Generator().manual_seed(2))
    x[:, 0] = d.bos()
    if padded:
        x[1, 4:] = d.pad()
    check(ref, lean, encoder_run(x), 1e-10, 1e-11)


@pytest.mark.parametrize("ops", ["jmc.atp", "c.t", "j.ap"])
def test_causal_and_prefix_lm_lean_equal_plain(ops):
    ref, lean, d = pair("folnet_lm_tiny", folnet_ops=ops)
    g = torch.Generator().manual_seed(3)
    x = random_tokens(d, 2, 6, g)
    x[1, 5:] = d.pad()
    check(ref, lean, lambda m: m(x)[0], 1e-10, 1e-11)
    ref, lean, d = pair("folnet_lm_tiny", folnet_ops=ops)
    src, prev = random_tokens(d, 2, 4, g), random_tokens(d, 2, 3, g)
    src[1, :2] = d.pad()
    check(ref, lean, lambda m: m(src, None, prev)[0], 1e-10, 1e-11)


@pytest.mark.parametrize("ops", ["jmc.atp", "c.t"])
def test_encoder_decoder_lean_equals_plain(ops):
    ref, lean, d = pair("folnet_transformer_tiny", folnet_ops=ops)
    g = torch.Generator().manual_seed(4)
    src, prev = random_tokens(d, 2, 5, g), random_tokens(d, 2, 4, g)
    src[1, :1] = d.pad()
    check(ref, lean, lambda m: m(src, None, prev)[0], 1e-10, 1e-11)


def test_float32_lean_equals_plain_to_round_off():
    ref, lean, d = pair("folnet_tiny", dtype=torch.float32, folnet_ops="jmc.atp")
    x = random_tokens(d, 3, 7, torch.Generator().manual_seed(5))
    check(ref, lean, encoder_run(x), 2e-5, 2e-6)


def naive_ln(x):
    m = x.mean(-1, keepdim=True)
    return (x - m) / torch.sqrt((x - m).pow(2).mean(-1, keepdim=True) + 1e-12)


def test_norm_keep_output_matches_the_formula():
    """Forward and gradient of the output-keeping LayerNorm against autograd through the formula."""
    g = torch.Generator().manual_seed(6)
    x = (torch.randn(3, 4, 9, generator=g, dtype=torch.float64) * 3 + 1).requires_grad_()
    w = torch.randn(3, 4, 9, generator=g, dtype=torch.float64)
    (gx_ref,) = torch.autograd.grad((naive_ln(x) * w).sum(), x)
    y = _NormKeepOutput.apply(x, 1e-12)
    torch.testing.assert_close(y, naive_ln(x), rtol=1e-12, atol=1e-12)
    (gx,) = torch.autograd.grad((y * w).sum(), x)
    torch.testing.assert_close(gx, gx_ref, rtol=1e-10, atol=1e-12)


class Saved:
    """Bytes of the distinct storages autograd keeps for backward, parameters left out."""

    def __init__(self, params):
        self.params = {p.untyped_storage().data_ptr() for p in params}
        self.seen = {}

    def pack(self, t):
        s = t.untyped_storage()
        if s.data_ptr() not in self.params:
            self.seen[s.data_ptr()] = s.nbytes()
        return t

    @staticmethod
    def unpack(t):
        return t

    @property
    def total(self):
        return sum(self.seen.values())


def saved_bytes(layer, u1, u2, mask):
    s = Saved(layer.parameters())
    with torch.autograd.graph.saved_tensors_hooks(s.pack, s.unpack):
        o1, o2 = layer(u1, u2, mask)
    (o1.sum() + o2.sum()).backward()  # the kept tensors suffice for backward
    return s.total


def test_lean_layer_keeps_at_most_five_binary_tensors():
    """folnet_base's binary widths (D2 = 64, F2 = 256), a few positions: the lean layer keeps
    u2n, the bool's input, trans's softmax and output (4 binary-sized tensors) plus the
    small ones, under 5; the plain path keeps about 14 (the pre-activation alone is 4)."""
    torch.manual_seed(0)
    B, T, D1, D2 = 2, 16, 24, 64
    layer = FolnetLayer(d1=D1, d2=D2, heads=2, ffn1=48, ffn2=256, unary_ops="cjm", binary_ops="apt").train()
    g = torch.Generator().manual_seed(7)
    u1 = torch.randn(B, T, D1, generator=g, requires_grad=True)
    u2 = torch.randn(B, T, T, D2, generator=g, requires_grad=True)
    mask = self_mask("none", torch.zeros(B, T, dtype=torch.bool))
    binary = B * T * T * D2 * 4
    lean = saved_bytes(layer, u1, u2, mask) / binary
    layer.lean = False
    plain = saved_bytes(layer, u1, u2, mask) / binary
    assert lean < 5.0, lean
    assert plain > 12.0, plain


@pytest.mark.parametrize("padded", [False, True])
def test_cjoin_and_trans_rebuilt_premise_gradients(padded):
    """Operator level, every output position weighted (the model hides padded rows): the premise
    rebuilt in backward gives autograd's gradients for the kernel, the atoms and the weights."""
    from nesyseq.plugins.layers.folnet_ops import Cjoin, Trans
    torch.manual_seed(0)
    B, T, D1, D2 = 2, 5, 6, 4
    pad = torch.zeros(B, T, dtype=torch.bool)
    if padded:
        pad[1, 3:] = True
    mask = self_mask("none", pad)
    g = torch.Generator().manual_seed(8)
    u1 = torch.randn(B, T, D1, generator=g, dtype=torch.float64)
    u2 = torch.randn(B, T, T, D2, generator=g, dtype=torch.float64)
    for op in (Cjoin(D1, D2, 2).double(), Trans(D1, D2, 2, impl="torch").double()):
        with torch.no_grad():
            for p in op.parameters():
                p.normal_(0, 0.5)
        grads = []
        for lean in (False, True):
            op.zero_grad()
            a = u2.clone().requires_grad_()
            if isinstance(op, Cjoin):
                K = op.columns(u1).detach().requires_grad_()
                out = op(K, a, mask.pair_ok, True, transpose=True, dense=not padded, lean=lean)
                leaves = [K, a]
            else:
                out = op(a, op.rows(a), mask.trans, dense=not padded, lean=lean)
                leaves = [a]
            w = torch.randn(out.shape, generator=torch.Generator().manual_seed(9), dtype=out.dtype)
            (out * w).sum().backward()
            grads.append([t.grad.clone() for t in leaves] + [p.grad.clone() for p in op.parameters() if p.grad is not None])
        for ref, got in zip(*grads):
            torch.testing.assert_close(got, ref, rtol=1e-10, atol=1e-12)


TRITON_SCRIPT = '''
import os, sys
os.environ["TRITON_INTERPRET"] = "1"
sys.path.insert(0, sys.argv[1])
import torch
from nesyseq.triton_kernels import trans_triton as tt
if not (tt.triton_available() and tt.interpreter_usable()):
    print("SKIP"); sys.exit(0)
from nesyseq.triton_kernels import TransMask, trans_from_atoms, trans_reference
from nesyseq.plugins.layers.folnet_layer import FolnetLayer
from nesyseq.plugins.layers.folnet_masks import self_mask
torch.set_num_threads(1)
B, T, C, D2 = 2, 7, 5, 3
g = torch.Generator().manual_seed(0)
x = torch.randn(B, T, T, C, generator=g, dtype=torch.float64)
Wk, Wv = torch.randn(D2, C, generator=g, dtype=torch.float64), torch.randn(D2, C, generator=g, dtype=torch.float64)
w = torch.randn(B, D2, T, T, generator=g, dtype=torch.float64)
pad = torch.zeros(B, T, dtype=torch.bool); pad[1, 5:] = True
for mask in (TransMask(), TransMask("none", key_padding=pad), TransMask("causal", key_padding=pad),
             TransMask("prefix", prefix_lengths=torch.tensor([3, 4]))):
    # reference: the projections written out, autograd through the PyTorch reference, in fp64
    leaves = [t.clone().requires_grad_() for t in (x, Wk, Wv)]
    K = torch.einsum("bxac,hc->bhxa", leaves[0], leaves[1])
    v = torch.einsum("bayc,hc->bhay", leaves[0], leaves[2])
    ref = trans_reference(K, v, mask)
    (ref * w).sum().backward()
    got_leaves = [t.float().clone().requires_grad_() for t in (x, Wk, Wv)]
    got = trans_from_atoms(got_leaves[0], got_leaves[1], got_leaves[2], mask)
    (got * w.float()).sum().backward()
    torch.testing.assert_close(got.double(), ref, rtol=1e-4, atol=1e-5)
    for a, b in zip(got_leaves, leaves):
        torch.testing.assert_close(a.grad.double(), b.grad, rtol=1e-4, atol=1e-4)
# the layer on the Triton path: lean (K, v rebuilt) equals the plain path (TransFunction keeps them)
torch.manual_seed(0)
layer = FolnetLayer(d1=12, d2=8, heads=2, ffn1=16, ffn2=32, unary_ops="cjm", binary_ops="apt",
                    trans_impl="triton").train()
u1, u2 = torch.randn(B, T, 12, generator=g), torch.randn(B, T, T, 8, generator=g)
for kind in ("none", "causal"):
    mask = self_mask(kind, pad)
    res = []
    for lean in (False, True):
        layer.lean = lean
        layer.zero_grad()
        a, b = u1.clone().requires_grad_(), u2.clone().requires_grad_()
        o1, o2 = layer(a, b, mask)
        ((o1 * o1.detach().sin()).sum() + (o2 * o2.detach().cos()).sum()).backward()
        res.append([o1, o2, a.grad, b.grad] + [p.grad.clone() for p in layer.parameters() if p.grad is not None])
    for r, l in zip(*res):
        torch.testing.assert_close(l, r, rtol=1e-4, atol=1e-5)
# counting with the kernels' outputs stood in for (folnet_memory.kernels_as_shapes) keeps the same bytes
from nesyseq.evaluations import folnet_memory as fm
for lean in (False, True):
    layer.lean = lean
    mask = self_mask("none", torch.zeros(B, T, dtype=torch.bool))
    run = lambda: layer(u1.clone().requires_grad_(), u2.clone().requires_grad_(), mask)
    real = fm.saved_bytes(layer, run).total
    with fm.kernels_as_shapes():
        stub = fm.saved_bytes(layer, run).total
    assert real == stub and real > 0, (lean, real, stub)
print("OK")
'''


@pytest.mark.slow
def test_trans_from_atoms_and_lean_layer_on_the_triton_interpreter(tmp_path):
    """``trans_from_atoms`` (Triton kernels, K and v rebuilt in backward) against autograd through
    the PyTorch reference, every self mask kind; and the lean layer on the Triton path against
    the plain one."""
    from pathlib import Path

    run_on_triton_interpreter(tmp_path, TRITON_SCRIPT, Path(__file__).resolve().parents[1])


def test_autocast_bf16_lean_equals_plain_to_bf16_round_off():
    """Under autocast (bf16) the lean path runs the bool's blocked function with autocast's casts
    and the output-keeping LayerNorm in float32; the plain path is autocast's own.  Same
    products, rounded once per bf16 GEMM: equal to bf16 round-off."""
    ref, lean, d = pair("folnet_tiny", dtype=torch.float32, folnet_ops="jmc.atp")
    x = random_tokens(d, 2, 6, torch.Generator().manual_seed(10))
    outs, grads = [], []
    for m in (ref, lean):
        with torch.autocast("cpu", dtype=torch.bfloat16):
            out = m(x)[0].float()
        w = torch.randn(out.shape, generator=torch.Generator().manual_seed(11))
        (out * w).sum().backward()
        outs.append(out)
        grads.append({k: p.grad for k, p in m.named_parameters() if p.grad is not None})
    scale = outs[0].abs().max()
    torch.testing.assert_close(outs[1], outs[0], rtol=0.02, atol=0.02 * float(scale))
    assert grads[0].keys() == grads[1].keys()
    for k, g in grads[0].items():
        err = (grads[1][k] - g).norm() / g.norm().clamp_min(1e-12)
        assert err < 0.03, (k, float(err))


def test_mask_dropout_is_dropout_with_a_byte_mask():
    """Kept values are x / (1 - p), dropped ones 0, the gradient is the same mask times the scale,
    about 1 - p of the values are kept (fixed seed, 10^5 draws), and the kept mask is 1 byte a value."""
    torch.manual_seed(0)
    p = 0.25
    x = (torch.rand(100_000, dtype=torch.float64) + 0.5).requires_grad_()
    s = Saved(())
    with torch.autograd.graph.saved_tensors_hooks(s.pack, s.unpack):
        y = _MaskDropout.apply(x, p)
    keep = y.detach() != 0
    torch.testing.assert_close(y.detach()[keep], x.detach()[keep] / (1 - p), rtol=1e-15, atol=0)
    assert abs(keep.double().mean().item() - (1 - p)) < 0.01
    w = torch.randn(x.shape, generator=torch.Generator().manual_seed(1), dtype=torch.float64)
    (y * w).sum().backward()
    torch.testing.assert_close(x.grad, w * keep / (1 - p), rtol=1e-15, atol=0)
    assert s.total == x.numel()  # one bool per value
