"""Every device- or dtype-dependent choice the layers make, as small functions of the device type.

The layers call these instead of testing ``tensor.is_cuda`` or ``device.type`` inline, so that
the CPU suite can drive the CUDA arm of each choice with a device-type string and compare the
result against the reference formula (tests/test_device_policy.py).  The trans operator's
dispatch is its own table, ``nesyseq.triton_kernels.trans_path``; the lines that cannot run
without a GPU at all are listed in tools/gpu_only.py.
"""
from __future__ import annotations

from nesyseq.triton_kernels import activation_dtype, autocast_dtype

__all__ = ["activation_dtype", "autocast_dtype", "binary_bool_path", "bool_block_rows", "byte_mask_dropout_needed",
           "dense_mask_shortcut"]

# Rows (pairs) per block of FOLNet's blocked binary bool.  On the CPU the hidden block
# (F2 · rows floats: 4 MiB at folnet_base's F2 = 256) stays in the cache.  On a GPU the cache
# does not set the size, kernel launches do: each block is about ten launches, so a block holds
# 16x more rows (64 MiB of fp32 hidden layer at F2 = 256, 128 blocks for 32 x 512 x 512 pairs).
BOOL_BLOCK_ROWS_CPU = 1 << 12
BOOL_BLOCK_ROWS_GPU = 1 << 16


def bool_block_rows(device_type: str) -> int:
    """Pairs per block of ``_BinaryBoolFn`` on this device type."""
    return BOOL_BLOCK_ROWS_CPU if device_type == "cpu" else BOOL_BLOCK_ROWS_GPU


def binary_bool_path(device_type: str, autocast: bool, lean: bool, compiling: bool) -> str:
    """'blocked' (``_BinaryBoolFn``) or 'plain' (the formula with whole-tensor ops).

    Under --compile the plain formula: inductor fuses it, and the blocked loop is host code.
    ``lean`` (the layer's default): blocked everywhere, under autocast too, for its memory.
    Otherwise blocked only on the CPU without autocast, where it is also the faster one; on a
    GPU the plain formula's big cuBLAS matmuls are.
    """
    if compiling:
        return "plain"
    if lean or (device_type == "cpu" and not autocast):
        return "blocked"
    return "plain"


def byte_mask_dropout_needed(device_type: str) -> bool:
    """True where ``F.dropout`` keeps a mask of the input's dtype for backward (the CPU: 4 bytes a
    value in fp32), so the lean path keeps its own 1-byte mask; CUDA's dropout already keeps one byte."""
    return device_type == "cpu"


def dense_mask_shortcut(device_type: str) -> bool:
    """Whether an all-allowed mask may be recognised by reading ``key_padding.any()`` on the host.

    Free on the CPU; on an accelerator the read would synchronise the stream every layer, so
    there the masked arithmetic runs (same values: every pair is allowed)."""
    return device_type == "cpu"
