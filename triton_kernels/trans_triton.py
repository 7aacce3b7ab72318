"""Launch wrappers and the autograd Function for the Triton trans kernels.

``trans_triton(K, v, mask, v_enc)`` has the reference's signature and semantics
(``triton_kernels.reference``) and returns a tensor with autograd support
(gradients for K, v and v_enc; first order only).

Execution modes:
    * CUDA tensors: compiled kernels.
    * CPU tensors with ``TRITON_INTERPRET=1``: the same kernel source run by
      the Triton interpreter.  Triton decides compiled-vs-interpreted when a
      function is decorated, so ``_trans_kernels`` is loaded once per mode (a
      second copy with the variable set).  Triton's own library functions
      (tl.zeros, tl.sum, ...) are decorated at ``import triton``, so the
      variable must be set before triton's first import in the process;
      otherwise this raises ``TransKernelUnavailable`` with that explanation.
    * anything else: ``TransKernelUnavailable``.

Block configuration: a fixed, deterministic choice per dtype (``default_config``),
overridable with ``config=TransConfig(...)``.  On CUDA, setting
``NESYSEQ_TRANS_AUTOTUNE=1`` times the candidate configurations once per shape
key and keeps the fastest.  Each configuration is deterministic; different
configurations may differ in the last bits (different summation blocking).
"""
from __future__ import annotations

import importlib
import importlib.util
import os
import sys
import time
from dataclasses import dataclass
from typing import Dict, Optional, Tuple

import torch
from torch import Tensor

from .devices import activation_dtype
from .reference import TransMask, trans_reference

KIND_IDS = {"none": 0, "causal": 1, "prefix": 2, "encdec": 3}
SUPPORTED_DTYPES = (torch.float32, torch.float16, torch.bfloat16)


class TransKernelUnavailable(RuntimeError):
    """The Triton path cannot run here (no Triton, no CUDA and no interpreter, dtype)."""


@dataclass(frozen=True)
class TransConfig:
    """Tile sizes and launch settings, per kernel.

    Forward: BX rows x, BY output/premise columns y, BA reduced columns a.
    lse (pass 1): BX x BA tiles.  dK: (BX, BA) tiles looping over y in BY steps.
    dV: (BA, BY) tiles looping over x in BX steps.  All tile sizes are powers
    of two >= 16 (tl.dot).
    """

    block_x: int = 64
    block_y: int = 64
    block_a: int = 32
    num_warps: int = 4
    num_stages: int = 3
    lse_block_x: int = 32
    lse_block_a: int = 64
    dk_block_x: int = 64
    dk_block_y: int = 64
    dk_block_a: int = 64
    dk_num_warps: int = 8
    dk_num_stages: int = 2
    dv_block_x: int = 64
    dv_block_y: int = 128
    dv_block_a: int = 64
    dv_num_warps: int = 8
    dv_num_stages: int = 2
    dv_load_kt: bool = False   # dV: load K^T tiles instead of transposing p in registers

    @classmethod
    def uniform(cls, block: int, **kw) -> "TransConfig":
        """Every tile side = ``block`` (tests use 16 for many ragged tiles)."""
        sides = {f: block for f in ("block_x", "block_y", "block_a", "lse_block_x", "lse_block_a",
                                     "dk_block_x", "dk_block_y", "dk_block_a",
                                     "dv_block_x", "dv_block_y", "dv_block_a")}
        sides.update(kw)
        return cls(**sides)


def default_config(dtype: torch.dtype, T: int = 1024) -> TransConfig:
    """Fixed choice per dtype and size.  Chosen so that every kernel compiles for
    sm_90 without register spills (``python -m nesyseq.triton_kernels.compile_check``);
    not tuned on a device yet."""
    if dtype == torch.float32:
        return TransConfig(block_x=64, block_y=64, block_a=32, num_warps=4, num_stages=2,
                           dk_block_x=64, dk_block_y=32, dk_block_a=64, dk_num_warps=8, dk_num_stages=1,
                           dv_block_x=32, dv_block_y=32, dv_block_a=32, dv_num_warps=4, dv_num_stages=1)
    if T >= 512:
        return TransConfig(block_x=128, block_y=128, block_a=32, num_warps=8, num_stages=3)
    return TransConfig()


_AUTOTUNE_CANDIDATES = [
    TransConfig(),
    TransConfig(block_x=128, block_y=128, block_a=32, num_warps=8, num_stages=3),
    TransConfig(block_x=128, block_y=64, block_a=64, num_warps=8, num_stages=3),
    TransConfig(block_x=64, block_y=128, block_a=32, num_warps=4, num_stages=3,
                dv_block_y=64, dv_block_a=128),
    TransConfig(block_x=128, block_y=128, block_a=32, num_warps=8, num_stages=4,
                dk_block_x=128, dk_num_stages=1),
]


# ---------------------------------------------------------------------------
# kernel loading (compiled vs interpreted copy)
# ---------------------------------------------------------------------------
def triton_available() -> bool:
    try:
        import triton  # noqa: F401
    except Exception:
        return False
    return True


def interpreting() -> bool:
    return os.environ.get("TRITON_INTERPRET", "0").strip().lower() in ("1", "true", "on", "yes")


_KERNEL_MODULES: Dict[bool, object] = {}


def _kernels(interpret: bool):
    """``_trans_kernels`` decorated for the requested mode."""
    mod = _KERNEL_MODULES.get(interpret)
    if mod is not None:
        return mod
    if not triton_available():
        raise TransKernelUnavailable("triton is not installed")
    name = __package__ + "._trans_kernels"
    if interpret:
        name += "_interpreted"
    old = os.environ.get("TRITON_INTERPRET")
    os.environ["TRITON_INTERPRET"] = "1" if interpret else "0"
    try:
        spec = importlib.util.find_spec(__package__ + "._trans_kernels")
        mod = importlib.util.module_from_spec(importlib.util.spec_from_file_location(name, spec.origin))
        sys.modules[name] = mod
        mod.__spec__.loader.exec_module(mod)
    finally:
        if old is None:
            os.environ.pop("TRITON_INTERPRET", None)
        else:
            os.environ["TRITON_INTERPRET"] = old
    if interpret:
        _call_helpers_directly(mod)
    _KERNEL_MODULES[interpret] = mod
    return mod


def _call_helpers_directly(mod) -> None:
    """Under the interpreter, each call of a ``@triton.jit`` device function (``_fwd_step``,
    ``_valid``, ...) patches ``triton.language`` again before running the function's rewritten
    Python (about 2 ms a call in Triton 3.9, a fifth of an interpreter test's time), although the
    launched kernel's own patch, over the same module globals, is still in force.  Here the
    helpers are replaced by that rewritten Python itself; the kernels (``*_kernel``, launched
    with a grid) stay interpreted functions.  Same code, same semantics, less overhead; a
    Triton without ``InterpretedFunction.rewrite`` keeps its own path."""
    for name, obj in list(vars(mod).items()):
        rewrite = getattr(obj, "rewrite", None)
        if name.startswith("_") and not name.endswith("_kernel") and callable(rewrite):
            setattr(mod, name, rewrite())


def interpreter_usable() -> bool:
    """True when triton.language itself was imported in interpreter mode.

    Triton's own library functions (tl.zeros, tl.sum, ...) are decorated when
    triton is first imported; the interpreter can only run kernels if that
    happened with TRITON_INTERPRET=1 already set.
    """
    if not (interpreting() and triton_available()):
        return False
    import triton.language as tl
    return type(tl.zeros).__name__ == "InterpretedFunction"


def _mode_for(t: Tensor) -> bool:
    """True: interpreter; False: compiled.  Raises when neither applies."""
    return kernel_mode(t.device)


def kernel_mode(device: torch.device) -> bool:
    """The kernels' mode for tensors on ``device``: False compiled (CUDA), True the interpreter
    (TRITON_INTERPRET=1, CPU tensors).  Raises ``TransKernelUnavailable`` when neither applies."""
    if device.type == "cuda":
        if not triton_available():
            raise TransKernelUnavailable("impl='triton' needs the triton package")
        return False
    if interpreting():
        if not triton_available():
            raise TransKernelUnavailable("impl='triton' needs the triton package")
        if not interpreter_usable():
            raise TransKernelUnavailable(
                "TRITON_INTERPRET=1 was set after triton was imported in this process; the interpreter "
                "needs it set before the first `import triton` (run in a fresh process)")
        return True
    raise TransKernelUnavailable(
        "impl='triton' needs CUDA tensors (or TRITON_INTERPRET=1 for the CPU interpreter); "
        f"got tensors on {device}. Use impl='auto' or 'torch' here.")


# ---------------------------------------------------------------------------
# mask preparation
# ---------------------------------------------------------------------------
@dataclass
class _Prep:
    kind: int
    B: int
    H: int
    Tq: int
    Ti: int
    Tt: int
    q_off: int
    dvalid: Tensor  # (B, Tt) int8 or empty
    dlo: Tensor
    dhi: Tensor
    evalid: Tensor  # (B, Ti) int8 or empty
    elo: Tensor
    ehi: Tensor
    plen: Tensor
    dspan: Tensor   # (B,) int8: 1 where the valid positions are exactly [lo, hi)
    espan: Tensor
    has_dpad: bool
    has_epad: bool

    @property
    def Y(self) -> int:
        return self.Ti + self.Tt


def _span(valid: Tensor) -> Tuple[Tensor, Tensor]:
    """Per row: [first valid, last valid + 1); (n, 0) for a row with none."""
    n = valid.shape[1]
    idx = torch.arange(n, device=valid.device, dtype=torch.int32)
    lo = torch.where(valid, idx, n).amin(1).to(torch.int32)
    hi = torch.where(valid, idx + 1, 0).amax(1).to(torch.int32)
    return lo.contiguous(), hi.contiguous()


def _pad_table(padding: Optional[Tensor], B: int, n: int, dev):
    """(validity int8 (B, n), span lo, span hi, span-is-exact int8 (B,), has padding)."""
    empty = torch.zeros(1, dtype=torch.int32, device=dev)
    if padding is None or n == 0:
        return torch.zeros(1, dtype=torch.int8, device=dev), empty, empty, empty.to(torch.int8), False
    padding = padding.to(device=dev, dtype=torch.bool)
    if tuple(padding.shape) != (B, n):
        raise ValueError(f"padding mask has shape {tuple(padding.shape)}, expected {(B, n)}")
    valid = ~padding
    lo, hi = _span(valid)
    # no holes inside [lo, hi): the kernels may treat whole tiles inside it as unmasked
    exact = (valid.sum(1, dtype=torch.int32) == (hi - lo).clamp_min(0)).to(torch.int8).contiguous()
    return valid.to(torch.int8).contiguous(), lo, hi, exact, True


def _prepare(K: Tensor, v: Tensor, mask: TransMask, v_enc: Optional[Tensor]) -> _Prep:
    if K.dim() != 4 or v.dim() != 4:
        raise ValueError(f"trans expects 4-d K and v (B, H, ., .); got {tuple(K.shape)} and {tuple(v.shape)}")
    B, H, Tq, A = K.shape
    q_off = int(mask.query_offset)
    dev = K.device
    if mask.kind == "encdec":
        if v_enc is None:
            raise ValueError("trans(kind='encdec') needs v_enc (B, H, Ti, Ti)")
        Ti = v_enc.shape[-1]
        Tt = v.shape[-2]
        if tuple(v_enc.shape) != (B, H, Ti, Ti) or tuple(v.shape) != (B, H, Tt, Ti + Tt) or A != Ti + Tt:
            raise ValueError(f"encdec shapes: K {tuple(K.shape)}, v {tuple(v.shape)}, v_enc {tuple(v_enc.shape)}; "
                             "expected K (B,H,Tq,Ti+Tt), v (B,H,Tt,Ti+Tt), v_enc (B,H,Ti,Ti)")
    else:
        Ti, Tt = 0, v.shape[-1]
        if tuple(v.shape) != (B, H, Tt, Tt) or A != Tt:
            raise ValueError(f"trans shapes: K {tuple(K.shape)}, v {tuple(v.shape)}; "
                             "expected K (B,H,Tq,T) and v (B,H,T,T)")
    if q_off < 0 or q_off + Tq > Tt:
        raise ValueError(f"query_offset={q_off} with {Tq} rows exceeds the sequence length {Tt}")
    dvalid, dlo, dhi, dspan, has_d = _pad_table(mask.key_padding, B, Tt, dev)
    if mask.kind == "encdec":
        evalid, elo, ehi, espan, has_e = _pad_table(mask.enc_padding, B, Ti, dev)
    else:
        evalid, elo, ehi, espan, has_e = _pad_table(None, B, 0, dev)
    if mask.kind == "prefix":
        plen = mask.prefix_lengths.to(device=dev, dtype=torch.int32).reshape(B).contiguous()
    else:
        plen = torch.zeros(1, dtype=torch.int32, device=dev)
    return _Prep(KIND_IDS[mask.kind], B, H, Tq, Ti, Tt, q_off, dvalid, dlo, dhi, evalid, elo, ehi, plen,
                 dspan, espan, has_d, has_e)


def _cuda_matmul_allows_tf32() -> bool:
    """Whether torch's CUDA fp32 matmuls may use TF32, read without raising.

    torch >= 2.9 has ``torch.backends.cuda.matmul.fp32_precision`` ("ieee",
    "tf32", or "none" = nothing set through the new API).  Once a user sets it,
    reading the legacy ``allow_tf32`` flag (or ``torch.get_float32_matmul_precision()``)
    raises "mix of the legacy and new APIs"; the new attribute is always readable and
    also reflects settings made through the legacy API.  Older torch: the legacy flag.
    """
    prec = getattr(torch.backends.cuda.matmul, "fp32_precision", None)
    if prec is not None and prec != "none":
        return prec == "tf32"
    try:
        return bool(torch.backends.cuda.matmul.allow_tf32)
    except RuntimeError:  # mixed legacy/new settings that the new attribute did not resolve
        return False


def _dot_precision(dtype: torch.dtype, interpret: bool) -> str:
    """tl.dot input precision for fp32 inputs: TF32 exactly when torch's CUDA matmuls
    use it, else IEEE fp32 (FMA, no tensor cores).  fp16/bf16 ignore it."""
    if dtype == torch.float32 and not interpret and _cuda_matmul_allows_tf32():
        return "tf32"
    return "ieee"


_GRID_AXIS0_MAX = 2**31 - 1


def _grid(n_tiles: int, bh: int) -> Tuple[int]:
    """1-D launch grid of n_tiles * bh programs (see ``_tile_and_bh`` in the kernels).

    CUDA allows 2^31 - 1 blocks on grid axis 0 but only 65535 on axes 1 and 2, so
    B * D2 (65536 for a batch of 1024 sequences with D2 = 64) must not be an axis of
    its own beyond axis 0."""
    n = n_tiles * bh
    if n > _GRID_AXIS0_MAX:
        raise TransKernelUnavailable(f"trans launch of {n_tiles} tiles x {bh} (b, h) matrices exceeds "
                                     f"CUDA's {_GRID_AXIS0_MAX} blocks; split the batch")
    return (n,)


def _cdiv(a: int, b: int) -> int:
    return (a + b - 1) // b


def _s(t: Tensor):
    return tuple(t.stride())


# ---------------------------------------------------------------------------
# launches
# ---------------------------------------------------------------------------
def _forward(K, v, v_enc, pr: _Prep, cfg: TransConfig, interpret: bool):
    kn = _kernels(interpret)
    B, H, Tq, Y = pr.B, pr.H, pr.Tq, pr.Y
    ve = v_enc if v_enc is not None else v  # dummy pointer when not encdec
    lse = torch.empty(B * H, Tq, device=K.device, dtype=torch.float32)
    out = torch.empty(B, H, Tq, Y, device=K.device, dtype=K.dtype)
    extra = {} if interpret else dict(num_warps=cfg.num_warps, num_stages=cfg.num_stages)
    masks = (pr.dvalid, pr.evalid, pr.dlo, pr.dhi, pr.elo, pr.ehi, pr.plen)
    consts = dict(KIND=pr.kind, HAS_DPAD=pr.has_dpad, HAS_EPAD=pr.has_epad)
    lse_extra = {} if interpret else dict(num_warps=4, num_stages=1)
    kn._lse_kernel[_grid(_cdiv(Tq, cfg.lse_block_x), B * H)](
        K, lse, *masks, *_s(K), H, Tq, pr.Ti, pr.Tt, pr.q_off,
        BX=cfg.lse_block_x, BA=cfg.lse_block_a, **consts, **lse_extra)
    kn._fwd_kernel[_grid(_cdiv(Tq, cfg.block_x) * _cdiv(Y, cfg.block_y), B * H)](
        K, v, ve, out, lse, *masks, pr.dspan, pr.espan, *_s(K), *_s(v), *_s(ve), *_s(out),
        H, Tq, pr.Ti, pr.Tt, pr.q_off,
        BX=cfg.block_x, BY=cfg.block_y, BA=cfg.block_a, DOT_PREC=_dot_precision(K.dtype, interpret),
        **consts, **extra)
    return out, lse


def _backward(dout, K, v, v_enc, out, lse, pr: _Prep, cfg: TransConfig, interpret: bool,
              need_k=True, need_v=True, need_ve=True):
    kn = _kernels(interpret)
    B, H, Tq, Y = pr.B, pr.H, pr.Tq, pr.Y
    masks = (pr.dvalid, pr.evalid, pr.dlo, pr.dhi, pr.elo, pr.ehi, pr.plen)
    consts = dict(KIND=pr.kind, HAS_DPAD=pr.has_dpad, HAS_EPAD=pr.has_epad)
    prec = _dot_precision(K.dtype, interpret)
    dout = dout.to(K.dtype)
    if dout.stride(-1) != 1:
        dout = dout.contiguous()
    ve = v_enc if v_enc is not None else v
    dK = dv = dve = None
    if need_k:
        BX, BY, BA = cfg.dk_block_x, cfg.dk_block_y, cfg.dk_block_a
        extra = {} if interpret else dict(num_warps=cfg.dk_num_warps, num_stages=cfg.dk_num_stages)
        delta = torch.empty(B * H, Tq, device=K.device, dtype=torch.float32)
        kn._delta_kernel[_grid(_cdiv(Tq, 32), B * H)](
            out, dout, delta, *_s(out), *_s(dout), H, Tq, Y, BX=32, BY=64,
            **({} if interpret else dict(num_warps=4, num_stages=1)))
        dK = torch.empty_like(K)
        segs = (0, 1) if pr.kind == 3 else (1,)
        for seg in segs:
            n_a = pr.Ti if seg == 0 else pr.Tt
            if n_a == 0:
                continue
            kn._dk_kernel[_grid(_cdiv(Tq, BX) * _cdiv(n_a, BA), B * H)](
                K, v, ve, dout, lse, delta, dK, *masks, pr.dspan, pr.espan,
                *_s(K), *_s(v), *_s(ve), *_s(dout), *_s(dK),
                H, Tq, pr.Ti, pr.Tt, pr.q_off, SEG=seg,
                BX=BX, BY=BY, BA=BA, DOT_PREC=prec, **consts, **extra)
    BX, BY, BA = cfg.dv_block_x, cfg.dv_block_y, cfg.dv_block_a
    extra = {} if interpret else dict(num_warps=cfg.dv_num_warps, num_stages=cfg.dv_num_stages)
    if need_v:
        dv = torch.empty_like(v)
        kn._dv_kernel[_grid(_cdiv(pr.Tt, BA) * _cdiv(Y, BY), B * H)](
            K, dout, lse, dv, *masks, pr.dspan, pr.espan, *_s(K), *_s(dout), *_s(dv),
            H, Tq, pr.Ti, pr.Tt, pr.q_off, SEG=1,
            BX=BX, BY=BY, BA=BA, DOT_PREC=prec, KT=cfg.dv_load_kt, **consts, **extra)
    if need_ve and pr.kind == 3 and pr.Ti > 0:
        dve = torch.empty_like(v_enc)
        kn._dv_kernel[_grid(_cdiv(pr.Ti, BA) * _cdiv(pr.Ti, BY), B * H)](
            K, dout, lse, dve, *masks, pr.dspan, pr.espan, *_s(K), *_s(dout), *_s(dve),
            H, Tq, pr.Ti, pr.Tt, pr.q_off, SEG=0,
            BX=BX, BY=BY, BA=BA, DOT_PREC=prec, KT=cfg.dv_load_kt, **consts, **extra)
    elif need_ve and v_enc is not None:
        dve = torch.zeros_like(v_enc)
    return dK, dv, dve


# ---------------------------------------------------------------------------
# autotuning (CUDA only, opt-in)
# ---------------------------------------------------------------------------
_TUNED: Dict[tuple, TransConfig] = {}


def _autotune_enabled() -> bool:
    return os.environ.get("NESYSEQ_TRANS_AUTOTUNE", "0") == "1"


def _pick_config(K, v, v_enc, pr: _Prep, interpret: bool, with_backward: bool) -> TransConfig:
    base = default_config(K.dtype, pr.Ti + pr.Tt)
    if interpret or not _autotune_enabled():
        return base
    key = (pr.kind, K.dtype, pr.B * pr.H, pr.Tq, pr.Ti, pr.Tt, with_backward)
    if key in _TUNED:
        return _TUNED[key]
    best, best_t = base, float("inf")
    for cfg in [base] + _AUTOTUNE_CANDIDATES:
        try:
            def run():
                out, lse = _forward(K, v, v_enc, pr, cfg, False)
                if with_backward:
                    _backward(torch.ones_like(out), K, v, v_enc, out, lse, pr, cfg, False)
            run()
            torch.cuda.synchronize()
            t0 = time.perf_counter()
            for _ in range(3):
                run()
            torch.cuda.synchronize()
            t = time.perf_counter() - t0
        except Exception:  # a config that does not fit (shared memory) is skipped
            continue
        if t < best_t:
            best, best_t = cfg, t
    _TUNED[key] = best
    return best


# ---------------------------------------------------------------------------
# autograd
# ---------------------------------------------------------------------------
class TransFunction(torch.autograd.Function):
    """Fused trans with Triton forward and backward.  apply(K, v, v_enc, mask, config)."""

    @staticmethod
    def forward(ctx, K, v, v_enc, mask, config):
        interpret = _mode_for(K)
        pr = _prepare(K, v, mask, v_enc)
        needs_grad = any(ctx.needs_input_grad[:3])
        cfg = config or _pick_config(K, v, v_enc, pr, interpret, needs_grad)
        out, lse = _forward(K, v, v_enc, pr, cfg, interpret)
        ctx.save_for_backward(K, v, v_enc if v_enc is not None else K.new_zeros(0), out, lse)
        ctx.pr, ctx.cfg, ctx.interpret, ctx.has_ve = pr, cfg, interpret, v_enc is not None
        return out

    @staticmethod
    @torch.autograd.function.once_differentiable
    def backward(ctx, dout):
        K, v, v_enc, out, lse = ctx.saved_tensors
        if not ctx.has_ve:
            v_enc = None
        nk, nv, nve = ctx.needs_input_grad[:3]
        dK, dv, dve = _backward(dout, K, v, v_enc, out, lse, ctx.pr, ctx.cfg, ctx.interpret,
                                need_k=nk, need_v=nv, need_ve=nve)
        return dK, dv, dve, None, None


def _project(x: Tensor, W: Tensor, dtype: torch.dtype, shape) -> Tensor:
    """Channel-major W x^T for channel-last x (B, N, C): (B, C_out, N) viewed as ``shape``, in ``dtype``."""
    return torch.bmm(W.to(dtype).expand(x.shape[0], -1, -1), x.to(dtype).transpose(1, 2)).view(shape)


class TransFromAtoms(torch.autograd.Function):
    """Fused trans of K = Wk x and v = Wv x, one set of binary atoms x, keeping neither K nor v.

    apply(x, Wk, Wv, T, mask, config): x (B, T·T, C) channel-last (the layer-normed
    binary atoms, kept by the layer's other readers anyway), Wk, Wv (D2, C) without
    bias; K_h(x, a) and v_h(a, y) are the two channel-major projections (B, D2, T, T),
    as ``plugins.layers.folnet_ops._channel_major`` writes them.  ``TransFunction``
    keeps K and v, two binary-sized tensors; here backward rebuilds them (two D2 x C
    GEMMs, the forward's own products in the forward's dtype) and keeps only the output
    and the softmax statistics the kernels' backward reads.  Self masks only (no
    encoder columns, no cached rows).
    """

    @staticmethod
    def forward(ctx, x, Wk, Wv, T: int, mask, config):
        B, D2 = x.shape[0], Wk.shape[0]
        dtype = activation_dtype(x.device.type, x.dtype)
        K = _project(x, Wk, dtype, (B, D2, T, T))
        v = _project(x, Wv, dtype, (B, D2, T, T))
        interpret = _mode_for(K)
        pr = _prepare(K, v, mask, None)
        cfg = config or _pick_config(K, v, None, pr, interpret, any(ctx.needs_input_grad[:3]))
        out, lse = _forward(K, v, None, pr, cfg, interpret)
        ctx.save_for_backward(x, Wk, Wv, out, lse)
        ctx.pr, ctx.cfg, ctx.interpret, ctx.T, ctx.dtype = pr, cfg, interpret, T, dtype
        return out

    @staticmethod
    @torch.autograd.function.once_differentiable
    def backward(ctx, dout):
        x, Wk, Wv, out, lse = ctx.saved_tensors
        B, D2, T, dtype = x.shape[0], Wk.shape[0], ctx.T, ctx.dtype
        K = _project(x, Wk, dtype, (B, D2, T, T))
        v = _project(x, Wv, dtype, (B, D2, T, T))
        dK, dv, _ = _backward(dout.to(dtype).contiguous(), K, v, None, out, lse, ctx.pr, ctx.cfg, ctx.interpret,
                              need_k=True, need_v=True, need_ve=False)
        dK, dv = dK.reshape(B, D2, T * T), dv.reshape(B, D2, T * T)
        gx = gWk = gWv = None
        if ctx.needs_input_grad[0]:
            gx = (torch.bmm(dK.transpose(1, 2), Wk.to(dtype).expand(B, -1, -1))
                  + torch.bmm(dv.transpose(1, 2), Wv.to(dtype).expand(B, -1, -1))).to(x.dtype)
        xd = x.to(dtype)
        if ctx.needs_input_grad[1]:
            gWk = torch.bmm(dK, xd).sum(0).to(Wk.dtype)
        if ctx.needs_input_grad[2]:
            gWv = torch.bmm(dv, xd).sum(0).to(Wv.dtype)
        return gx, gWk, gWv, None, None, None


def trans_from_atoms(x: Tensor, Wk: Tensor, Wv: Tensor, mask: Optional[TransMask] = None,
                     config: Optional[TransConfig] = None) -> Tensor:
    """trans(Wk x, Wv x) (B, D2, T, T) for binary atoms x (B, T, T, C); see ``TransFromAtoms``."""
    mask = mask or TransMask()
    if mask.kind == "encdec" or mask.query_offset != 0:
        raise ValueError("trans_from_atoms: self masks over all rows only (no encoder columns, no cached rows)")
    B, T, T2, C = x.shape
    if T != T2:
        raise ValueError(f"trans_from_atoms: square binary atoms expected, got {tuple(x.shape)}")
    act = activation_dtype(x.device.type, x.dtype)
    if act not in SUPPORTED_DTYPES:
        raise TransKernelUnavailable(f"Triton trans supports fp32/fp16/bf16, got {act}")
    _mode_for(x)
    return TransFromAtoms.apply(x.reshape(B, T * T, C), Wk, Wv, T, mask, config)


def _check_inputs(K: Tensor, v: Tensor, v_enc: Optional[Tensor]):
    if K.dtype not in SUPPORTED_DTYPES:
        raise TransKernelUnavailable(f"Triton trans supports fp32/fp16/bf16, got {K.dtype}")
    if v.device != K.device or (v_enc is not None and v_enc.device != K.device):
        raise ValueError("trans: K, v and v_enc must be on one device")


def trans_triton(K: Tensor, v: Tensor, mask: Optional[TransMask] = None, v_enc: Optional[Tensor] = None,
                 config: Optional[TransConfig] = None) -> Tensor:
    """Triton trans with the reference's signature; see ``triton_kernels.reference``.

    v and v_enc are cast to K's dtype (the output dtype).  Inputs whose last
    dimension is not contiguous are copied first (the kernels read rows).
    """
    mask = mask or TransMask()
    _check_inputs(K, v, v_enc)
    _mode_for(K)  # clear error before any work
    if v.dtype != K.dtype:
        v = v.to(K.dtype)
    if v_enc is not None and v_enc.dtype != K.dtype:
        v_enc = v_enc.to(K.dtype)
    if K.stride(-1) != 1:
        K = K.contiguous()
    if v.stride(-1) != 1:
        v = v.contiguous()
    if v_enc is not None and v_enc.stride(-1) != 1:
        v_enc = v_enc.contiguous()
    if mask.kind != "encdec":
        v_enc = None
    for name, t in (("K", K), ("v", v), ("v_enc", v_enc)):
        # in-matrix offsets are int32 in the kernels (batch/head offsets are int64)
        if t is not None and (t.shape[-2] - 1) * t.stride(-2) + t.shape[-1] >= 2**31:
            raise TransKernelUnavailable(f"{name} {tuple(t.shape)}: one (b, h) matrix exceeds 2^31 elements")
    if K.numel() == 0 or v.numel() == 0:
        return trans_reference(K, v, mask, v_enc)  # nothing to launch
    return TransFunction.apply(K, v, v_enc, mask, config)
