"""Triton trans kernels vs the reference, under the Triton interpreter (CPU).

TRITON_INTERPRET=1 must be set before triton is first imported in the process
(Triton decorates its own library functions at import).  This module sets it
before importing anything that imports triton.  If some other test module
imported triton first, the in-process tests skip and
``test_interpreter_in_fresh_process`` runs this file in a subprocess instead,
so the kernels are checked in every collection order.

Sizes are tiny (T <= 40, 16-wide tiles so every case has several ragged
tiles) to keep the file at about a minute on 2 cores.
"""
import os

os.environ["TRITON_INTERPRET"] = "1"

import re  # noqa: E402
import subprocess  # noqa: E402
import sys  # noqa: E402

import pytest  # noqa: E402
import torch  # noqa: E402

from nesyseq import triton_kernels  # noqa: E402
from nesyseq.triton_kernels import TransConfig, TransMask, allowed_masks, trans, trans_reference  # noqa: E402
from nesyseq.triton_kernels import trans_triton as tt  # noqa: E402

# slow: the interpreter runs every kernel instance in Python (about a minute on 2 cores)
pytestmark = [pytest.mark.slow, pytest.mark.skipif(not tt.triton_available(), reason="triton not installed")]

IN_PROCESS = tt.triton_available() and tt.interpreter_usable()
needs_interp = pytest.mark.skipif(
    not IN_PROCESS, reason="triton was imported before TRITON_INTERPRET=1; covered by the subprocess test")

CFG = TransConfig.uniform(16)
CFG_RECT = TransConfig.uniform(16, block_y=32, lse_block_a=32, dk_block_x=32, dv_block_y=32, dv_block_x=32)

TOL = {torch.float32: dict(rtol=1e-4, atol=1e-5), torch.float16: dict(rtol=2e-2, atol=4e-3)}


def _self_case(kind, B=2, H=1, T=37, pad="ragged", q_off=0, seed=0):
    g = torch.Generator().manual_seed(seed)
    kp = None
    if pad == "ragged":
        kp = torch.zeros(B, T, dtype=torch.bool)
        kp[0, T - 9:] = True     # right padding across a tile edge
        kp[0, 4] = True          # interior hole
        if B > 1:
            kp[1, :18] = True    # left padding (fairseq's left_pad_source), a fully padded tile
        if B > 2:
            kp[2, :] = True      # a fully padded sequence
    P = torch.tensor([5, 21, 0, 37][:B]) if kind == "prefix" else None
    m = TransMask(kind, key_padding=kp, prefix_lengths=P, query_offset=q_off)
    K = 3 * torch.randn(B, H, T - q_off, T, generator=g)
    v = torch.randn(B, H, T, T, generator=g)
    return K, v, None, m


def _encdec_case(B=2, H=1, Ti=19, Tt=22, pad="ragged", q_off=0, seed=1):
    g = torch.Generator().manual_seed(seed)
    kp = ep = None
    if pad == "ragged":
        kp = torch.zeros(B, Tt, dtype=torch.bool)
        ep = torch.zeros(B, Ti, dtype=torch.bool)
        kp[1, 17:] = True
        kp[0, 2] = True
        ep[0, :3] = True
        ep[1, 16:] = True
    m = TransMask("encdec", key_padding=kp, enc_padding=ep, query_offset=q_off)
    K = 3 * torch.randn(B, H, Tt - q_off, Ti + Tt, generator=g)
    v = torch.randn(B, H, Tt, Ti + Tt, generator=g)
    ve = torch.randn(B, H, Ti, Ti, generator=g)
    return K, v, ve, m


def _run(fn, K, v, ve, m, dtype, dout):
    K = K.to(dtype).requires_grad_()
    v = v.to(dtype).requires_grad_()
    ins = [K, v]
    if ve is not None:
        ve = ve.to(dtype).requires_grad_()
        ins.append(ve)
    out = fn(K, v, m, ve)
    grads = torch.autograd.grad(out, ins, dout.to(dtype))
    return out, grads


def _check(case, dtype, cfg=CFG):
    K, v, ve, m = case
    out_shape = (K.shape[0], K.shape[1], K.shape[2], v.shape[-1])
    dout = torch.randn(out_shape, generator=torch.Generator().manual_seed(7))
    got, ggot = _run(lambda *a: tt.trans_triton(*a, config=cfg), K, v, ve, m, dtype, dout)
    # fp16 inputs: reference on the same (rounded) inputs, computed in fp32 there
    want, gwant = _run(trans_reference, K, v, ve, m, dtype, dout)
    assert got.dtype == dtype and got.shape == want.shape
    assert torch.isfinite(got).all()
    torch.testing.assert_close(got.float(), want.float(), **TOL[dtype])
    for name, a, b in zip(["dK", "dv", "dv_enc"], ggot, gwant):
        assert a.dtype == b.dtype, name
        assert torch.isfinite(a).all(), name
        torch.testing.assert_close(a.float(), b.float(), **TOL[dtype], msg=lambda s: f"{name}: {s}")
    return got, ggot


CASES = {
    "none": lambda: _self_case("none", pad=None),
    "none-pad": lambda: _self_case("none"),
    "causal": lambda: _self_case("causal", pad=None, T=40),
    "causal-pad": lambda: _self_case("causal", B=3),
    "prefix": lambda: _self_case("prefix", pad=None),
    "prefix-pad": lambda: _self_case("prefix", B=3),
    "encdec": lambda: _encdec_case(pad=None),
    "encdec-pad": lambda: _encdec_case(),
}


@needs_interp
@pytest.mark.parametrize("dtype", [torch.float32, torch.float16], ids=["fp32", "fp16"])
@pytest.mark.parametrize("name", list(CASES))
def test_kernel_matches_reference(name, dtype):
    _check(CASES[name](), dtype)


@needs_interp
@pytest.mark.parametrize("kind", ["none", "causal", "prefix", "encdec"])
def test_interior_tiles(kind):
    """No padding and T = 56 with 16-wide tiles: besides boundary tiles, every
    kernel has interior tiles that take the unmasked fast path (for causal they
    need x_first >= y_last + 16), so both paths are compared with the reference
    (adding 1 to K in the unmasked branch of _fwd_step, _dk_step or _dv_step fails
    every kind)."""
    if kind == "encdec":
        case = _encdec_case(Ti=30, Tt=40, pad=None)
    else:
        K, v, _, m = _self_case(kind, B=1, T=56, pad=None)
        if kind == "prefix":
            m = TransMask("prefix", prefix_lengths=torch.tensor([29]))
        case = (K, v, None, m)
    _check(case, torch.float32)


@needs_interp
@pytest.mark.parametrize("kind", ["none", "causal", "prefix", "encdec"])
def test_interior_tiles_with_end_padding(kind):
    """Padding only at the ends of a row (right-padded decoder, left-padded
    source) keeps the unmasked path for tiles inside the valid span; a row with
    a hole falls back to masks everywhere.  T = 56, 16-wide tiles; the right
    padding starts at 50, so the causal kinds keep the interior tile (x 32-47,
    y 0-15) in the padded row (the same mutations as above fail every kind)."""
    g = torch.Generator().manual_seed(3)
    if kind == "encdec":
        Ti, Tt, B = 30, 40, 3
        kp = torch.zeros(B, Tt, dtype=torch.bool)
        ep = torch.zeros(B, Ti, dtype=torch.bool)
        kp[0, 35:] = True          # right padding
        ep[1, :5] = True           # left-padded source
        kp[2, 20] = True           # a hole
        m = TransMask("encdec", key_padding=kp, enc_padding=ep)
        case = (3 * torch.randn(B, 1, Tt, Ti + Tt, generator=g), torch.randn(B, 1, Tt, Ti + Tt, generator=g),
                torch.randn(B, 1, Ti, Ti, generator=g), m)
    else:
        T, B = 56, 3
        kp = torch.zeros(B, T, dtype=torch.bool)
        kp[0, 50:] = True          # right padding
        kp[1, :9] = True           # left padding
        kp[2, 40] = True           # a hole
        m = TransMask(kind, key_padding=kp,
                      prefix_lengths=torch.tensor([29, 40, 10]) if kind == "prefix" else None)
        case = (3 * torch.randn(B, 1, T, T, generator=g), torch.randn(B, 1, T, T, generator=g), None, m)
    _check(case, torch.float32)


@needs_interp
@pytest.mark.parametrize("name", ["causal-q", "prefix-q", "encdec-q"])
def test_query_offset_rows(name):
    """Incremental decoding: only the newest rows, absolute positions from query_offset."""
    case = {"causal-q": lambda: _self_case("causal", T=33, q_off=30),
            "prefix-q": lambda: _self_case("prefix", T=33, q_off=13),
            "encdec-q": lambda: _encdec_case(Tt=20, q_off=17)}[name]()
    _check(case, torch.float32)


@needs_interp
@pytest.mark.parametrize("name", ["causal-pad", "encdec-pad"])
def test_rectangular_tiles(name):
    _check(CASES[name](), torch.float32, cfg=CFG_RECT)


@needs_interp
@pytest.mark.parametrize("name,dtype", [("none-pad", torch.float32), ("causal-pad", torch.float32),
                                        ("prefix-pad", torch.float32), ("encdec-pad", torch.float32),
                                        ("causal-pad", torch.float16)],
                         ids=["none-pad-fp32", "causal-pad-fp32", "prefix-pad-fp32", "encdec-pad-fp32",
                              "causal-pad-fp16"])
def test_several_heads_default_tiles(name, dtype):
    """H = 3 heads (the flat grid decodes (tile, b*H + h)) with the default tile
    configuration for the dtype (config=None: 64-wide tiles below T = 512),
    T = 70 so every kernel has a full and a ragged tile per axis.  Every mask kind in fp32;
    fp16's default tiles once (its masks are test_kernel_matches_reference's, in both dtypes)."""
    if name == "encdec-pad":
        case = _encdec_case(B=2, H=3, Ti=30, Tt=40)
    else:
        case = _self_case(name.split("-")[0], B=3, H=3, T=70)
    _check(case, dtype, cfg=None)


@needs_interp
def test_default_large_tiles_t_above_512():
    """The T >= 512 default (128 x 128 forward tiles, 8 warps on a GPU), causal, fp16,
    two heads, T = 520 (a ragged last tile)."""
    K, v, ve, m = _self_case("causal", B=1, H=2, T=520, pad=None)
    assert tt.default_config(torch.float16, 520).block_x == 128
    _check((K, v, ve, m), torch.float16, cfg=None)


@needs_interp
@pytest.mark.parametrize("name", ["causal-pad", "prefix-pad", "encdec-pad", "none"])
def test_dv_loading_k_transposed(name):
    """dV's K^T-load variant (TransConfig.dv_load_kt) against the reference."""
    _check(CASES[name](), torch.float32, cfg=TransConfig.uniform(16, dv_load_kt=True))


@needs_interp
def test_fully_masked_rows_zero_and_deterministic():
    K, v, ve, m = _self_case("causal", B=3, T=20)
    first, g1 = _check((K, v, ve, m), torch.float32)
    k_ok, _ = allowed_masks(K, v, m)
    empty = ~k_ok.any(-1)
    assert empty[2].all() and empty[1, :18].all()
    assert (first.permute(0, 2, 1, 3)[empty] == 0).all()
    second, g2 = _run(lambda *a: tt.trans_triton(*a, config=CFG), K, v, ve, m, torch.float32,
                      torch.randn(first.shape, generator=torch.Generator().manual_seed(7)))
    assert torch.equal(first, second)
    assert all(torch.equal(a, b) for a, b in zip(g1, g2))


@needs_interp
@pytest.mark.parametrize("kind", ["causal", "prefix", "encdec"])
def test_masked_entries_are_never_read(kind):
    """Poison every masked K and premise entry with NaN: the kernels load them
    masked (or skip their tiles), so the result equals the reference on clean inputs."""
    K, v, ve, m = _encdec_case() if kind == "encdec" else _self_case(kind)
    k_ok, v_ok = allowed_masks(K, v, m, ve)
    Kp = K.masked_fill(~k_ok[:, None], float("nan"))
    if ve is None:
        vp = v.masked_fill(~v_ok[:, None], float("nan"))
        vep = None
    else:
        Ti = ve.shape[-1]
        vp = v.masked_fill(~v_ok[:, None, Ti:], float("nan"))
        vep = ve.masked_fill(~v_ok[:, None, :Ti, :Ti], float("nan"))
    got = tt.trans_triton(Kp, vp, m, vep, config=CFG)
    torch.testing.assert_close(got, trans_reference(K, v, m, ve), **TOL[torch.float32])


@needs_interp
def test_dispatch_forced_triton_runs_kernel_on_cpu_interpreter(monkeypatch):
    K, v, ve, m = _self_case("causal", T=20, pad=None)
    calls = []
    orig = tt._forward

    def spy(*a, **k):
        calls.append(1)
        return orig(*a, **k)

    monkeypatch.setattr(tt, "_forward", spy)
    out = trans(K, v, m, impl="triton")
    assert calls, "impl='triton' must run the kernels"
    torch.testing.assert_close(out, trans_reference(K, v, m), **TOL[torch.float32])
    calls.clear()
    trans(K, v, m, impl="auto")  # CPU tensors: reference even when interpreting
    assert not calls


def test_interpreter_in_fresh_process():
    """Runs this file in a new interpreter-mode process when triton was imported
    in compiled mode here first (the in-process tests skip in that case)."""
    if IN_PROCESS:
        pytest.skip("interpreter usable in this process; the tests above ran")
    env = dict(os.environ, TRITON_INTERPRET="1")
    r = subprocess.run([sys.executable, "-m", "pytest", "-q", "-x", "-p", "no:cacheprovider", __file__],
                       env=env, capture_output=True, text=True, timeout=900)
    assert r.returncode == 0, r.stdout[-4000:] + r.stderr[-2000:]
    summary = r.stdout.strip().splitlines()[-1]
    passed = re.search(r"(\d+) passed", summary)
    assert passed and int(passed.group(1)) >= 37 and "1 skipped" in summary, summary
