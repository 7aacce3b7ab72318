"""impl='auto' dispatch and the impl='eager' path (CPU; the GPU timings behind the rule are in docs/benchmarks.md)."""
import pytest
import torch

from nesyseq import triton_kernels
from nesyseq.triton_kernels import EAGER_UNMASKED_MIN_COLUMNS, TransMask, auto_path, trans, trans_reference


def _K(T, dtype=torch.bfloat16):
    return torch.empty(1, 1, T, T, dtype=dtype)


@pytest.mark.parametrize("kind", ["causal", "prefix", "encdec"])
@pytest.mark.parametrize("T", [64, 512, 1024, 4096])
def test_masked_kinds_take_the_kernels(kind, T):
    extra = {"prefix_lengths": torch.tensor([T // 2])} if kind == "prefix" else {}
    assert auto_path(_K(T), TransMask(kind, **extra)) == "triton"


def test_unmasked_switches_to_eager_at_long_lengths():
    # measured on the H100: kernels win at T = 512, lose at T = 1024
    assert auto_path(_K(512), TransMask("none")) == "triton"
    assert auto_path(_K(1024), None) == "eager"
    assert auto_path(_K(1024), TransMask("none", key_padding=torch.zeros(1, 1024, dtype=torch.bool))) == "eager"
    assert auto_path(_K(EAGER_UNMASKED_MIN_COLUMNS - 1), None) == "triton"
    assert auto_path(_K(EAGER_UNMASKED_MIN_COLUMNS), None) == "eager"


@pytest.mark.parametrize("dtype", [torch.float16, torch.bfloat16, torch.float32])
def test_unmasked_float32_takes_eager_at_every_length(dtype):
    # measured on the H100 at T = 512: fp32 kernel/eager 0.52x (IEEE), 0.96x (TF32); bf16 1.16x
    for T in (64, 512):
        assert auto_path(_K(T, dtype), None) == ("eager" if dtype == torch.float32 else "triton")
        assert auto_path(_K(T, dtype), TransMask("causal")) == "triton"      # causal fp32 won (1.74x)


@pytest.mark.parametrize("kind", ["none", "causal", "prefix", "encdec"])
def test_eager_impl_equals_reference(kind):
    torch.manual_seed(0)
    B, H, T, Ti = 2, 3, 7, 5
    kp = torch.zeros(B, T, dtype=torch.bool)
    kp[1, 5:] = True
    extra = {}
    if kind == "prefix":
        extra["prefix_lengths"] = torch.tensor([3, 4])
    A = T + Ti if kind == "encdec" else T
    mask = TransMask(kind, key_padding=kp, **extra)
    K = torch.randn(B, H, T, A, dtype=torch.float64)
    v = torch.randn(B, H, T, T if kind != "encdec" else T + Ti, dtype=torch.float64)
    ve = torch.randn(B, H, Ti, Ti, dtype=torch.float64) if kind == "encdec" else None
    got = trans(K, v, mask, v_enc=ve, impl="eager")
    torch.testing.assert_close(got, trans_reference(K, v, mask, ve))


def test_unknown_impl_names_the_option():
    with pytest.raises(ValueError, match="--folnet-trans-impl"):
        trans(_K(4), torch.empty(1, 1, 4, 4), None, impl="cuda")
    assert "eager" in triton_kernels.TRANS_IMPLS
