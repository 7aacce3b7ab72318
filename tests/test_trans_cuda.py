"""The compiled Triton trans kernels on a CUDA device (skipped without one).

Errors are ||x - ref|| / ||ref|| (Frobenius) against the fp64 reference on the
same (already rounded) inputs, for the output and every gradient.  Bounds:
* bf16: the kernels round p to bf16 for the tensor-core dot and store bf16
  outputs (unit roundoff 2^-9 ~ 2e-3), so a few 1e-3 is expected: bound 1e-2, and
  at most 1.5x (+1e-3) the error of the same-dtype eager PyTorch op, which
  rounds the same quantities.
* fp16: roundoff 2^-11 ~ 5e-4: bound 3e-3, same eager comparison.
* fp32 with torch's TF32 setting on: the dot operands are rounded to 10-bit
  mantissas (~5e-4): bound 2e-3, and the error must exceed 5x the IEEE error
  (proof that the TF32 setting reaches the kernels).
* fp32 IEEE: fp32 FMAs, bound 1e-5.
Outputs come from a pool poisoned with NaN (allocator reuse), so an element the
kernels never write shows up as NaN.
"""
import pytest
import torch

from nesyseq.triton_kernels import TransMask, trans_reference
from nesyseq.triton_kernels import trans_triton as tt
from nesyseq.triton_kernels.eager import trans_eager

pytestmark = pytest.mark.skipif(not torch.cuda.is_available() or not tt.triton_available(),
                                reason="needs a CUDA device and triton")

BOUND = {torch.bfloat16: 1e-2, torch.float16: 3e-3}


def _poison_pool():
    """Fill free cached blocks with NaN so that unwritten outputs are visible."""
    x = torch.empty(256 * 2**20, dtype=torch.uint8, device="cuda")
    x.view(torch.float16).fill_(float("nan"))
    del x


def _case(kind, B, H, T, dtype, pad=True, seed=0):
    g = torch.Generator().manual_seed(seed)
    if kind == "encdec":
        Ti, Tt = T // 2, T - T // 2
        kp = torch.zeros(B, Tt, dtype=torch.bool)
        ep = torch.zeros(B, Ti, dtype=torch.bool)
        if pad:
            kp[0, Tt - 7:] = True
            kp[1 % B, 3] = True
            ep[1 % B, :5] = True
        m = TransMask("encdec", key_padding=kp.cuda(), enc_padding=ep.cuda())
        K = 3 * torch.randn(B, H, Tt, Ti + Tt, generator=g)
        v = torch.randn(B, H, Tt, Ti + Tt, generator=g)
        ve = torch.randn(B, H, Ti, Ti, generator=g)
        return K.cuda().to(dtype), v.cuda().to(dtype), ve.cuda().to(dtype), m
    kp = torch.zeros(B, T, dtype=torch.bool)
    if pad:
        kp[0, T - 11:] = True
        kp[1 % B, :9] = True
        kp[-1, T // 2] = True
    P = torch.tensor([T // 3, T // 2, 5, T][:B] + [7] * max(0, B - 4)).cuda() if kind == "prefix" else None
    m = TransMask(kind, key_padding=kp.cuda() if pad else None, prefix_lengths=P)
    K = 3 * torch.randn(B, H, T, T, generator=g)
    v = torch.randn(B, H, T, T, generator=g)
    return K.cuda().to(dtype), v.cuda().to(dtype), None, m


def _grads(fn, K, v, ve, m, dout):
    ins = [t.detach().clone().requires_grad_() for t in (K, v) + ((ve,) if ve is not None else ())]
    _poison_pool()
    out = fn(ins[0], ins[1], m, ins[2] if ve is not None else None)
    return [out.detach()] + list(torch.autograd.grad(out, ins, dout.to(out.dtype)))


def _rel_errors(fn, case, dout):
    K, v, ve, m = case
    got = _grads(fn, K, v, ve, m, dout)
    ref = _grads(trans_reference, K.double(), v.double(), None if ve is None else ve.double(), m, dout.double())
    for t in got:
        assert torch.isfinite(t).all(), "NaN/inf: an element was not written or overflowed"
    return [float((a.double() - b).norm() / b.norm()) for a, b in zip(got, ref)]


@pytest.mark.parametrize("dtype,T", [(torch.bfloat16, 700), (torch.float16, 200)], ids=["bf16-T700", "fp16-T200"])
@pytest.mark.parametrize("kind", ["none", "causal", "prefix", "encdec"])
def test_half_precision_against_fp64(kind, dtype, T):
    """T = 700 takes the T >= 512 tiles (128 x 128 forward), T = 200 the smaller ones."""
    case = _case(kind, 3, 4, T, dtype)
    dout = torch.randn(case[0].shape[:3] + (case[1].shape[-1],), device="cuda", dtype=dtype)
    err = _rel_errors(tt.trans_triton, case, dout)
    eager = _rel_errors(lambda K, v, m, ve: trans_eager(K, v, m, ve), case, dout)
    for name, e, b in zip(["out", "dK", "dv", "dv_enc"], err, eager):
        assert e < BOUND[dtype], (name, e, err)
        assert e <= 1.5 * b + 1e-3, (name, e, b)


@pytest.fixture
def fp32_precision():
    m = torch.backends.cuda.matmul
    old = m.fp32_precision if hasattr(m, "fp32_precision") else None

    def set_(tf32: bool):
        if old is not None:
            m.fp32_precision = "tf32" if tf32 else "ieee"
        else:
            m.allow_tf32 = tf32
    yield set_
    set_(False)


@pytest.mark.parametrize("kind", ["causal", "encdec"])
def test_fp32_ieee_and_tf32(kind, fp32_precision):
    case = _case(kind, 2, 3, 300, torch.float32)
    dout = torch.randn(case[0].shape[:3] + (case[1].shape[-1],), device="cuda")
    fp32_precision(False)
    assert tt._dot_precision(torch.float32, False) == "ieee"
    ieee = _rel_errors(tt.trans_triton, case, dout)
    fp32_precision(True)
    assert tt._dot_precision(torch.float32, False) == "tf32"
    tf32 = _rel_errors(tt.trans_triton, case, dout)
    assert max(ieee) < 1e-5, ieee
    assert max(tf32) < 2e-3, tf32
    assert tf32[0] > 5 * ieee[0], (tf32, ieee)


def test_batch_of_1024_sequences_with_64_channels():
    """B * D2 = 65536 (b, h) matrices: more than CUDA's 65535 on a grid's axis 1."""
    case = _case("causal", 1024, 64, 32, torch.bfloat16, pad=False, seed=3)
    dout = torch.randn(case[0].shape, device="cuda", dtype=torch.bfloat16)
    err = _rel_errors(tt.trans_triton, case, dout)
    assert max(err) < BOUND[torch.bfloat16], err


def test_deterministic_bitwise():
    case = _case("causal", 2, 4, 600, torch.bfloat16)
    dout = torch.randn(case[0].shape, device="cuda", dtype=torch.bfloat16)
    a = _grads(tt.trans_triton, *case, dout)
    b = _grads(tt.trans_triton, *case, dout)
    assert all(torch.equal(x, y) for x, y in zip(a, b))


def test_dv_load_kt_variant_matches():
    case = _case("prefix", 2, 3, 300, torch.bfloat16)
    dout = torch.randn(case[0].shape, device="cuda", dtype=torch.bfloat16)
    cfg = tt.default_config(torch.bfloat16, 300)
    import dataclasses
    a = _rel_errors(lambda *x: tt.trans_triton(*x, config=cfg), case, dout)
    b = _rel_errors(lambda *x: tt.trans_triton(*x, config=dataclasses.replace(cfg, dv_load_kt=True)), case, dout)
    assert max(b) < BOUND[torch.bfloat16] and abs(b[2] - a[2]) < 2e-3, (a, b)


def test_trans_module_no_full_size_copies_on_cuda():
    """The real kernels: no copy op of full T^2*D2 size in Trans fwd+bwd (bf16)."""
    import torch.nn as nn
    from nesyseq.plugins.layers.folnet_ops import Trans
    B, T, D2 = 2, 256, 64
    mod = Trans(D2, D2, 1, impl="triton").cuda().bfloat16()
    writer = nn.Linear(D2, D2).cuda().bfloat16()
    u2n = torch.randn(B, T, T, D2, device="cuda", dtype=torch.bfloat16, requires_grad=True)
    mask = TransMask("causal")

    def step():
        out = mod(u2n, mod.rows(u2n), mask, writer=writer)
        out.backward(torch.randn_like(out))
    step()
    torch.cuda.synchronize()
    copy_ops = {"aten::copy_", "aten::clone", "aten::contiguous", "aten::_to_copy", "aten::cat"}
    with torch.profiler.profile(activities=[torch.profiler.ProfilerActivity.CPU], record_shapes=True) as prof:
        step()
        torch.cuda.synchronize()
    full = B * D2 * T * T // 4
    hits = []
    for e in prof.events():
        if e.name in copy_ops and e.input_shapes and e.input_shapes[0]:
            n = 1
            for s in e.input_shapes[0]:
                n *= s
            if n >= full:
                hits.append((e.name, e.input_shapes[0]))
    assert not hits, hits
