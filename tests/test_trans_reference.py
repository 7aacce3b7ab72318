"""The trans reference (triton_kernels.reference) and the impl dispatch.

Mask semantics are checked against masks written here from the rules in
docs (paper Table 5 / appendix A.5), element by element, not with
``allowed_masks``; then a dense softmax + matmul on explicitly masked inputs
gives the expected output.  No Triton here (see test_trans_triton.py).
"""
import os

import pytest
import torch

from nesyseq import triton_kernels
from nesyseq.triton_kernels import TransMask, allowed_masks, trans, trans_reference


# ---------------------------------------------------------------------------
# independent masks, one element at a time
# ---------------------------------------------------------------------------
def _rel(kind, i, j, P):
    if kind == "none":
        return True
    if kind in ("causal", "encdec"):
        return j <= i
    return j <= i or j < P


def naive_masks(B, Tq, mask, T=None, Ti=None, Tt=None):
    """Boolean kernel mask (B, Tq, A) and premise mask (B, A, Y), loop by loop."""
    off = mask.query_offset
    if mask.kind != "encdec":
        valid = [[True] * T for _ in range(B)] if mask.key_padding is None else (~mask.key_padding).tolist()
        P = [0] * B if mask.prefix_lengths is None else mask.prefix_lengths.tolist()
        k = torch.zeros(B, Tq, T, dtype=torch.bool)
        vm = torch.zeros(B, T, T, dtype=torch.bool)
        for b in range(B):
            for x in range(Tq):
                for a in range(T):
                    k[b, x, a] = valid[b][x + off] and valid[b][a] and _rel(mask.kind, x + off, a, P[b])
            for a in range(T):
                for y in range(T):
                    vm[b, a, y] = valid[b][a] and valid[b][y] and _rel(mask.kind, a, y, P[b])
        return k, vm
    dv = [[True] * Tt for _ in range(B)] if mask.key_padding is None else (~mask.key_padding).tolist()
    ev = [[True] * Ti for _ in range(B)] if mask.enc_padding is None else (~mask.enc_padding).tolist()
    A = Ti + Tt
    k = torch.zeros(B, Tq, A, dtype=torch.bool)
    vm = torch.zeros(B, A, A, dtype=torch.bool)
    for b in range(B):
        for x in range(Tq):
            xa = x + off
            for a in range(A):
                if a < Ti:   # cross relation to encoder token a
                    k[b, x, a] = dv[b][xa] and ev[b][a]
                else:        # causal self relation to decoder token a - Ti
                    k[b, x, a] = dv[b][xa] and dv[b][a - Ti] and a - Ti <= xa
        for a in range(A):
            for y in range(A):
                if a < Ti:   # v^E for y in I, zero block for y in T
                    vm[b, a, y] = y < Ti and ev[b][a] and ev[b][y]
                elif y < Ti:  # v^D, decoder a, encoder y
                    vm[b, a, y] = dv[b][a - Ti] and ev[b][y]
                else:
                    vm[b, a, y] = dv[b][a - Ti] and dv[b][y - Ti] and y - Ti <= a - Ti
    return k, vm


def dense_then_mask(K, V, kmask, vmask):
    """softmax over explicitly -inf-masked logits, premise zeroed, empty rows -> 0."""
    logits = K.double().masked_fill(~kmask[:, None], float("-inf"))
    p = torch.softmax(logits, dim=-1)
    p = torch.nan_to_num(p, nan=0.0)  # rows with no allowed a
    return p @ (V.double() * vmask[:, None].double())


def _case(kind, B=2, H=2, T=7, Ti=5, Tt=6, pad=True, q_off=0, dtype=torch.float64, seed=0):
    g = torch.Generator().manual_seed(seed)
    if kind == "encdec":
        kp = torch.zeros(B, Tt, dtype=torch.bool)
        ep = torch.zeros(B, Ti, dtype=torch.bool)
        if pad:
            kp[1, Tt - 2:] = True
            ep[0, Ti - 1:] = True
            ep[1, 0] = True
        m = TransMask("encdec", key_padding=kp if pad else None, enc_padding=ep if pad else None,
                      query_offset=q_off)
        K = torch.randn(B, H, Tt - q_off, Ti + Tt, generator=g, dtype=dtype)
        v = torch.randn(B, H, Tt, Ti + Tt, generator=g, dtype=dtype)
        ve = torch.randn(B, H, Ti, Ti, generator=g, dtype=dtype)
        return K, v, ve, m
    kp = torch.zeros(B, T, dtype=torch.bool)
    if pad:
        kp[0, T - 2:] = True
        kp[1, 0] = True
        kp[1, 3] = True   # an interior hole
    m = TransMask(kind, key_padding=kp if pad else None, query_offset=q_off,
                  prefix_lengths=torch.tensor([3, 5][:B]) if kind == "prefix" else None)
    K = torch.randn(B, H, T - q_off, T, generator=g, dtype=dtype)
    v = torch.randn(B, H, T, T, generator=g, dtype=dtype)
    return K, v, None, m


def _full_premise(v, ve):
    if ve is None:
        return v
    B, H, Tt, _ = v.shape
    Ti = ve.shape[-1]
    return torch.cat([torch.cat([ve, ve.new_zeros(B, H, Ti, Tt)], -1), v], -2)


KINDS = ["none", "causal", "prefix", "encdec"]


@pytest.mark.parametrize("kind", KINDS)
@pytest.mark.parametrize("pad", [False, True])
@pytest.mark.parametrize("q_off", [0, 2])
def test_reference_matches_dense_then_explicit_mask(kind, pad, q_off):
    K, v, ve, m = _case(kind, pad=pad, q_off=q_off)
    B, _, Tq, A = K.shape
    km, vm = naive_masks(B, Tq, m, T=A, Ti=None if ve is None else ve.shape[-1], Tt=v.shape[-2])
    k_ok, v_ok = allowed_masks(K, v, m, ve)
    assert torch.equal(k_ok.expand_as(km), km) and torch.equal(v_ok.expand_as(vm), vm)
    expected = dense_then_mask(K, _full_premise(v, ve), km, vm)
    got = trans_reference(K, v, m, ve)
    torch.testing.assert_close(got, expected, rtol=1e-12, atol=1e-12)


def test_causal_is_exactly_lower_triangular_and_sparse():
    """Causal: u(x, y) = sum_{y <= a <= x} ...; a hand-written loop."""
    K, v, _, m = _case("causal", B=1, H=1, T=6, pad=False)
    got = trans_reference(K, v, m)
    for x in range(6):
        w = torch.softmax(K[0, 0, x, : x + 1], 0)
        for y in range(6):
            want = sum(w[a] * v[0, 0, a, y] for a in range(y, x + 1)) if y <= x else 0.0
            assert abs(float(got[0, 0, x, y]) - float(want)) < 1e-12


@pytest.mark.parametrize("kind", KINDS)
def test_fully_masked_rows_are_zero_not_nan(kind):
    K, v, ve, m = _case(kind, dtype=torch.float32)
    K.requires_grad_()
    v.requires_grad_()
    out = trans_reference(K, v, m, ve)
    assert torch.isfinite(out).all()
    k_ok, _ = allowed_masks(K, v, m, ve)
    empty = ~k_ok.any(-1)  # (B, Tq)
    assert empty.any(), "the case must contain fully masked rows"
    assert (out.permute(0, 2, 1, 3)[empty] == 0).all()
    out.sum().backward()
    assert torch.isfinite(K.grad).all() and torch.isfinite(v.grad).all()
    # a padded batch row with *all* positions padded
    if kind != "encdec":
        m_all = TransMask(kind, key_padding=torch.ones(2, K.shape[-1], dtype=torch.bool),
                          prefix_lengths=m.prefix_lengths)
        assert (trans_reference(K.detach(), v.detach(), m_all) == 0).all()


@pytest.mark.parametrize("kind", KINDS)
def test_reference_gradcheck_float64(kind):
    K, v, ve, m = _case(kind, B=2, H=1, T=5, Ti=3, Tt=4, q_off=1)
    inputs = [K.requires_grad_(), v.requires_grad_()] + ([ve.requires_grad_()] if ve is not None else [])
    if ve is None:
        fn = lambda K_, v_: trans_reference(K_, v_, m)  # noqa: E731
    else:
        fn = lambda K_, v_, e_: trans_reference(K_, v_, m, e_)  # noqa: E731
    assert torch.autograd.gradcheck(fn, inputs, eps=1e-6, atol=1e-6)


# ---------------------------------------------------------------------------
# dispatch
# ---------------------------------------------------------------------------
def test_impl_validation():
    K, v, _, m = _case("causal", dtype=torch.float32)
    with pytest.raises(ValueError, match="valid: auto, triton, torch"):
        trans(K, v, m, impl="cuda")


def test_auto_and_torch_use_reference_on_cpu(monkeypatch):
    K, v, _, m = _case("causal", dtype=torch.float32)

    def boom(*a, **k):
        raise AssertionError("the Triton path must not run on CPU under impl='auto'")

    monkeypatch.setattr(triton_kernels._tt, "trans_triton", boom)
    monkeypatch.setenv("TRITON_INTERPRET", "1")  # even in interpreter mode
    want = trans_reference(K, v, m)
    assert torch.equal(trans(K, v, m, impl="auto"), want)
    assert torch.equal(trans(K, v, m, impl="torch"), want)


def test_forced_triton_on_cpu_without_interpreter_is_a_clear_error(monkeypatch):
    monkeypatch.delenv("TRITON_INTERPRET", raising=False)
    K, v, _, m = _case("causal", dtype=torch.float32)
    if not triton_kernels._tt.triton_available():
        with pytest.raises(triton_kernels.TransKernelUnavailable, match="triton"):
            trans(K, v, m, impl="triton")
        return
    with pytest.raises(triton_kernels.TransKernelUnavailable, match="CUDA"):
        trans(K, v, m, impl="triton")


def test_forced_triton_rejects_float64(monkeypatch):
    monkeypatch.setenv("TRITON_INTERPRET", "1")
    K, v, _, m = _case("none")
    with pytest.raises(triton_kernels.TransKernelUnavailable, match="float64"):
        trans(K, v, m, impl="triton")
    # 'auto' falls back to the reference for float64
    assert torch.equal(trans(K, v, m, impl="auto"), trans_reference(K, v, m))


def test_env_untouched_by_dispatch():
    before = os.environ.get("TRITON_INTERPRET")
    K, v, _, m = _case("none", dtype=torch.float32)
    trans(K, v, m)
    assert os.environ.get("TRITON_INTERPRET") == before
