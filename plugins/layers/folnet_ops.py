"""FOLNet neural logic operators (paper Table 2), one module per operator.

Notation (shapes in the comments):
    B batch, X query rows, A (or Y) columns, H heads, S = D1 / H head size,
    D1 unary channels (h, s), D2 binary channels.
    u1n (B, X, D1): layer-normed unary atoms of the previous layer
    u2n (B, X, A, D2): layer-normed binary atoms of the previous layer
    pair_ok (B, X, A) bool: see ``folnet_masks``.

Every kernel K and premise v is a linear projection of those atoms; a kernel
then gets its activation (softmax over the reduce axis, normalised only over
allowed positions, or identity).  Unary-output operators return (B, X, H, S);
assoc and prod return (B, X, A, H) and trans (B, X, A, D2).  The layer sums
them per branch and projects to D2 (H -> D2 for assoc + prod, D2 -> D2 for
trans).

Operators whose column side is a *unary* projection (join premise, cjoin
kernel, assoc premise) expose it as a separate method, so the layer can cache
it for incremental decoding and, in the encoder-decoder, prepend the
projection of the encoder output (appendix A.5).  ``enc_dim`` enables that
extra projection.
"""
from __future__ import annotations

from typing import Optional

import torch
import torch.nn as nn
import torch.nn.functional as F
import torch.utils.checkpoint
from torch import Tensor

from nesyseq import triton_kernels
from nesyseq.triton_kernels import TransMask

from nesyseq.plugins.layers.device_policy import activation_dtype, autocast_dtype, byte_mask_dropout_needed
from nesyseq.plugins.layers.folnet_masks import masked_softmax

UNARY_OPS = "cjm"  # before the dot (bool "b" is always on)
BINARY_OPS = "apt"  # after the dot
OP_NAMES = {"b": "bool", "c": "cjoin", "j": "join", "m": "mu", "a": "assoc", "p": "prod", "t": "trans"}


def parse_ops(spec: str):
    """``"jmc.atp"`` -> (unary letters, binary letters), e.g. ("cjm", "apt").

    Raises a one-line ValueError naming ``--folnet-ops`` and the valid letters.
    """
    help_ = (f"valid: unary-output letters {{b,c,j,m}} before the dot, binary-output letters "
             f"{{a,p,t}} after it, each at most once (b = bool is always on), e.g. 'jmc.atp'")
    if not isinstance(spec, str) or spec.count(".") != 1:
        raise ValueError(f"--folnet-ops={spec!r}: needs exactly one '.'; {help_}")
    left, right = spec.split(".")
    for side, letters, allowed in (("before", left, "b" + UNARY_OPS), ("after", right, BINARY_OPS)):
        for ch in letters:
            if ch not in OP_NAMES:
                raise ValueError(f"--folnet-ops={spec!r}: unknown letter {ch!r}; {help_}")
            if ch not in allowed:
                raise ValueError(f"--folnet-ops={spec!r}: {OP_NAMES[ch]} ({ch!r}) cannot go {side} the dot; {help_}")
        dup = sorted({ch for ch in letters if letters.count(ch) > 1})
        if dup:
            raise ValueError(f"--folnet-ops={spec!r}: duplicate letter {dup[0]!r}; {help_}")
    return "".join(sorted(left.replace("b", ""))), "".join(sorted(right))


def _softmax(logits: Tensor, ok: Tensor, dim: int, dense: bool) -> Tensor:
    """``masked_softmax``; with ``dense`` (every entry allowed) the plain softmax, in the same precision."""
    if not dense:
        return masked_softmax(logits, ok, dim=dim)
    acc = torch.float64 if logits.dtype == torch.float64 else torch.float32
    return torch.softmax(logits, dim=dim, dtype=acc).to(logits.dtype)


def _heads(t: Tensor, H: int) -> Tensor:
    """(..., D1) -> (..., H, S)"""
    return t.view(*t.shape[:-1], H, t.shape[-1] // H)


class _MaskDropout(torch.autograd.Function):
    """Dropout keeping a 1-byte mask for backward (on the CPU ``F.dropout`` keeps a mask of the
    input's dtype, 4 bytes a value in fp32); same distribution (keep with 1 - p, scale 1/(1 - p))."""

    @staticmethod
    def forward(ctx, x, p: float):
        keep = torch.empty(x.shape, dtype=torch.bool, device=x.device).bernoulli_(1.0 - p)
        ctx.save_for_backward(keep)
        ctx.scale = 1.0 / (1.0 - p)
        return x * keep * ctx.scale

    @staticmethod
    @torch.autograd.function.once_differentiable
    def backward(ctx, g):
        (keep,) = ctx.saved_tensors
        return g * keep * ctx.scale, None


def dropout(x: Tensor, p: float, training: bool, lean: bool) -> Tensor:
    """``F.dropout``; with ``lean`` in training where ``F.dropout`` keeps a wide mask
    (``device_policy.byte_mask_dropout_needed``: the CPU; not under --compile) through ``_MaskDropout``."""
    if lean and training and 0.0 < p < 1.0 and byte_mask_dropout_needed(x.device.type) \
            and torch.is_grad_enabled() and x.requires_grad and not torch.compiler.is_compiling():
        return _MaskDropout.apply(x, p)
    return F.dropout(x, p=p, training=training)


class Cjoin(nn.Module):
    """c (U, U, B):  u_sh(x) = sum_a softmax_a(K_sh(a)) v_s(x, a)

    Official parameterisation (folnet.py:307-354): kernel D1 -> D1 without bias,
    split (S, H) (S outer); premise D2 -> S; output flattened s-major.
    K_sh(a) (B, A, S, H) unary kernel, softmax over a (only the a allowed for x)
    v_s(x, a) (B, X, A, S) binary premise, masked (Table 5)
    out (B, X, S, H)
    The encoder passes ``transpose=True``: v_s(a, x), the official contraction
    over the *row* index (folnet.py:350-351); decoders keep v_s(x, a), which
    reads no future row.
    """

    def __init__(self, d1: int, d2: int, heads: int, enc_dim: Optional[int] = None, dropout: float = 0.0):
        super().__init__()
        self.H, self.S = heads, d1 // heads
        self.dropout = dropout
        self.kernel = nn.Linear(d1, d1, bias=False)
        self.premise = nn.Linear(d2, d1 // heads)
        self.kernel_enc = nn.Linear(enc_dim, d1, bias=False) if enc_dim else None

    def _split(self, t: Tensor) -> Tensor:
        return t.view(*t.shape[:-1], self.S, self.H)  # (..., D1) -> (..., S, H)

    def columns(self, u1n: Tensor) -> Tensor:
        return self._split(self.kernel(u1n))  # K (B, A, S, H) logits

    def columns_enc(self, enc: Tensor) -> Tensor:
        assert self.kernel_enc is not None, "encoder columns need enc_dim"
        return self._split(self.kernel_enc(enc))  # K over a in I (B, Ti, S, H)

    # rows per chunk of the exact path: keeps the (B, rows, A, H, S) tile near 2^22 elements
    TILE = 1 << 22

    def _shared_softmax(self, Kf: Tensor, pair_ok: Tensor, dense: bool) -> Tensor:
        """softmax_a K_sh(a) over the one column set every row shares, then dropout: (B, A, S, H)."""
        if dense:
            P = torch.softmax(Kf, dim=1)
        else:
            col_ok = pair_ok.any(dim=1)[:, :, None, None]  # (B, A, 1, 1): the one allowed set shared by the rows
            shift = Kf.masked_fill(~col_ok, torch.finfo(Kf.dtype).min).amax(dim=1, keepdim=True)
            E = torch.exp(Kf - shift.detach()) * col_ok.to(Kf.dtype)  # (B, A, S, H), max term 1
            P = E / E.sum(dim=1, keepdim=True).clamp_min(1.0)  # softmax_a, a unary kernel
        return F.dropout(P, p=self.dropout, training=self.training)  # folnet.py:349

    def forward(self, K: Tensor, u2n: Tensor, pair_ok: Tensor, rows_share_columns: bool = False,
                transpose: bool = False, dense: bool = False, lean: bool = False) -> Tensor:
        """``rows_share_columns``: the caller guarantees that every row with an allowed
        column allows the *same* columns (mask kind ``none``, or a single query row).
        Then one shift per (b, h, s) is each row's own maximum and the cheap path is
        exact.  Otherwise (causal / prefix / encdec) every row gets its own masked
        shift, m(x) = max_{a: ok(x, a)} K(a), so no future column enters row x.
        ``dense``: every pair is allowed (``FolnetMask.dense``), the masks are skipped.
        """
        acc = torch.float64 if K.dtype == torch.float64 else torch.float32
        Kf = K.to(acc)
        if transpose:
            # official encoder form (folnet.py:350-351): u_sh(y) = sum_a P_sh(a) v_s(a, y), rows
            # contracted; needs a square, symmetric pair_ok.  The premise is written channel-major
            # v (B, S, A, Y) by its matmul, so the contraction is one batched matmul over (b, s).
            v = _channel_major(self.premise, u2n)  # v_s(a, y) (B, S, A, Y)
            m = None
            if not dense:
                m = pair_ok.transpose(1, 2)[:, None].to(v.dtype)  # ok(y, a)
                v = v * m
            P = self._shared_softmax(Kf, pair_ok, dense)  # (B, A, S, H)
            # lean: v is rebuilt in backward, not kept
            out = _matmul_premise(P.permute(0, 2, 3, 1), v.to(acc), self.premise, u2n, m, lean)  # (B, S, H, Y)
            return out.permute(0, 3, 1, 2).to(u2n.dtype)  # (B, Y, S, H)
        v = self.premise(u2n)  # (B, X, A, S)
        if not dense:
            v = v * pair_ok[..., None].to(u2n.dtype)
        vf = v.to(acc)
        if rows_share_columns:
            P = self._shared_softmax(Kf, pair_ok, dense)
            return torch.einsum("bxah,bahs->bxhs", vf, P).to(u2n.dtype)  # rows without columns: v = 0
        # exact per-row masked softmax, in row chunks (recomputed in backward so
        # the (B, rows, A, H, S) probabilities are never all alive at once)
        B, X, A = pair_ok.shape
        per_row = max(1, B * A * K.shape[-2] * K.shape[-1])
        step = max(1, self.TILE // per_row)
        outs = []
        for x0 in range(0, X, step):
            args = (Kf, vf[:, x0:x0 + step], pair_ok[:, x0:x0 + step], self.dropout if self.training else 0.0)
            if torch.is_grad_enabled() and (Kf.requires_grad or vf.requires_grad) and X > step:
                outs.append(torch.utils.checkpoint.checkpoint(_cjoin_rows, *args, use_reentrant=False))
            else:
                outs.append(_cjoin_rows(*args))
        return torch.cat(outs, dim=1).to(u2n.dtype)


def _cjoin_rows(Kf: Tensor, vf: Tensor, ok: Tensor, p_drop: float = 0.0) -> Tensor:
    """u_sh(x) = sum_a softmax_{a: ok(x,a)}(K_sh(a)) v_s(x, a) for a chunk of rows.

    Kf (B, A, S, H), vf (B, Xc, A, S), ok (B, Xc, A) -> (B, Xc, S, H)
    (the einsum letters below read h for the premise axis S, s for H)
    """
    P = masked_softmax(Kf[:, None].expand(-1, ok.shape[1], -1, -1, -1), ok[..., None, None], dim=2)
    if p_drop > 0:
        P = F.dropout(P, p=p_drop, training=True)
    return torch.einsum("bxah,bxahs->bxhs", vf, P)  # P (B, Xc, A, H, S): per-row shift, 0 if none allowed


class Join(nn.Module):
    """j (U, B, U):  u_hs(x) = sum_a softmax_a(K_h(x, a)) v_hs(a)      (self-attention)

    K_h(x, a) (B, X, A, H) binary kernel, masked softmax over a
    v_hs(a) (B, A, H, S) unary premise
    out (B, X, H, S)
    """

    def __init__(self, d1: int, d2: int, heads: int, enc_dim: Optional[int] = None, dropout: float = 0.0):
        super().__init__()
        self.H = heads
        self.dropout = dropout
        self.kernel = nn.Linear(d2, heads, bias=False)  # folnet.py:368
        self.premise = nn.Linear(d1, d1)  # folnet.py:367
        self.premise_enc = nn.Linear(enc_dim, d1) if enc_dim else None

    def columns(self, u1n: Tensor) -> Tensor:
        return _heads(self.premise(u1n), self.H)  # v (B, A, H, S)

    def columns_enc(self, enc: Tensor) -> Tensor:
        assert self.premise_enc is not None, "encoder columns need enc_dim"
        return _heads(self.premise_enc(enc), self.H)

    def forward(self, u2n: Tensor, v: Tensor, pair_ok: Tensor, dense: bool = False,
                score_bias: Optional[Tensor] = None, sym_values: Optional[Tensor] = None):
        """``score_bias`` (B, X, A, H) is added to K before the softmax and ``sym_values``
        (B, A, m) are summed with the same weights (the symbolic stream,
        plugins/layers/symbolic_folnet.py); then returns (out, (B, X, H, m))."""
        logits = self.kernel(u2n)
        if score_bias is not None:
            logits = logits + score_bias
        K = _softmax(logits, pair_ok[..., None], 2, dense)  # (B, X, A, H)
        K = F.dropout(K, p=self.dropout, training=self.training)  # folnet.py:380
        out = torch.einsum("bxah,bahs->bxhs", K, v)
        if sym_values is None:
            return out
        return out, torch.einsum("bxah,bam->bxhm", K, sym_values.to(K.dtype))


class Mu(nn.Module):
    """m (U, B, B):  u_hs(x) = sum_a softmax_a(K_h(x, a)) v_s(x, a)

    K_h(x, a) (B, X, A, H) binary kernel, masked softmax over a
    v_s(x, a) (B, X, A, S) binary premise, masked
    out (B, X, H, S)
    """

    def __init__(self, d1: int, d2: int, heads: int, enc_dim: Optional[int] = None, dropout: float = 0.0):
        super().__init__()
        self.H = heads
        # one reader D2 -> H + S without bias: kernel first, premise after (folnet.py:400-411)
        self.reader = nn.Linear(d2, heads + d1 // heads, bias=False)

    def forward(self, u2n: Tensor, pair_ok: Tensor, dense: bool = False) -> Tensor:
        W = self.reader.weight  # (H + S, D2): kernel rows, then premise rows
        K = _softmax(F.linear(u2n, W[: self.H]), pair_ok[..., None], 2, dense)  # (B, X, A, H), 0 where not ok
        # sum_a K_h(x,a) v_s(x,a) with v = Wv u2n (no bias): contract a first, on the D2 atoms,
        # then project, G_hc(x) = sum_a K_h(x,a) u2n_c(x,a), u_hs(x) = sum_c Wv_sc G_hc(x); the
        # premise mask is implied (K is 0 where not ok), and the (B, X, A, S) premise never exists
        G = torch.matmul(K.transpose(-1, -2), u2n)  # (B, X, H, D2)
        return torch.matmul(G, W[self.H:].t())  # (B, X, H, S)


class Assoc(nn.Module):
    """a (B, U, U):  u_h(x, y) = sum_w K_hw(x) v_hw(y)      (attention scores)

    K_hw(x) (B, X, H, S) unary kernel, identity activation
    v_hw(y) (B, Y, H, S) unary premise
    out (B, X, Y, H), scaled by 1/sqrt(S) (a constant folded into the kernel)
    """

    def __init__(self, d1: int, d2: int, heads: int, enc_dim: Optional[int] = None, dropout: float = 0.0):
        super().__init__()
        self.H = heads
        self.scale = (d1 // heads) ** -0.5
        self.kernel = nn.Linear(d1, d1)
        self.premise = nn.Linear(d1, d1)
        self.premise_enc = nn.Linear(enc_dim, d1) if enc_dim else None

    def columns(self, u1n: Tensor) -> Tensor:
        return _heads(self.premise(u1n), self.H)  # v (B, Y, H, S)

    def columns_enc(self, enc: Tensor) -> Tensor:
        assert self.premise_enc is not None, "encoder columns need enc_dim"
        return _heads(self.premise_enc(enc), self.H)

    def forward(self, u1n: Tensor, v: Tensor) -> Tensor:
        K = _heads(self.kernel(u1n), self.H) * self.scale  # (B, X, H, S)
        return torch.einsum("bxhw,byhw->bxyh", K, v)


class Prod(nn.Module):
    """p (B, U, B):  u_h(x, y) = sum_w K_hw(x) v_w(x, y)

    K_hw(x) (B, X, H, S) unary kernel, identity activation
    v_w(x, y) (B, X, Y, S) binary premise, masked (Table 5)
    out (B, X, Y, H), scaled by 1/sqrt(S)
    """

    def __init__(self, d1: int, d2: int, heads: int, enc_dim: Optional[int] = None, dropout: float = 0.0):
        super().__init__()
        self.H = heads
        self.scale = (d1 // heads) ** -0.5
        self.kernel = nn.Linear(d1, d1)
        self.premise = nn.Linear(d2, d1 // heads)

    def forward(self, u1n: Tensor, u2n: Tensor, pair_ok: Tensor, dense: bool = False) -> Tensor:
        K = _heads(self.kernel(u1n), self.H) * self.scale  # (B, X, H, S)
        # sum_w K_hw(x) (Wp u2n(x,y) + bp)_w: the premise projection folded into the unary kernel,
        # Kp_hc(x) = sum_w K_hw(x) Wp_wc, so the (B, X, Y, S) premise never exists
        Kp = torch.matmul(K, self.premise.weight)  # (B, X, H, D2)
        out = torch.matmul(u2n, Kp.transpose(-1, -2))  # (B, X, Y, H)
        if self.premise.bias is not None:
            out = out + torch.matmul(K, self.premise.bias)[:, :, None, :]  # sum_w K_hw(x) bp_w
        if not dense:
            out = out * pair_ok[..., None].to(out.dtype)  # the premise mask, v(x, y) = 0 where not ok
        return out


class _ToChannelMajor(torch.autograd.Function):
    """y[b] = W x[b]^T (+ bias[:, None]) for channel-last x (B, N, Cin) -> y (B, Cout, N) contiguous.

    One batched matmul with x read through a transposed view (cuBLAS takes the
    transpose for free), so the channel-major tensor the trans kernels read is
    written once, by the matmul, with no permute-and-copy.  The gradient for x is
    produced channel-last and contiguous (grad_y^T W), as LayerNorm's backward wants.
    ``add_bias=False`` leaves the bias out: for the trans kernel K the bias adds
    a per-channel constant to every logit of that channel's softmax over a,
    which the softmax cancels exactly, so the output and every gradient are the
    same with or without it and the bias gradient is exactly zero.
    """

    @staticmethod
    def forward(ctx, x, weight, bias, add_bias: bool):
        B = x.shape[0]
        y = torch.bmm(weight.expand(B, -1, -1), x.transpose(1, 2))    # (B, Cout, N)
        if add_bias and bias is not None:
            y.add_(bias.to(y.dtype)[None, :, None])
        ctx.save_for_backward(x, weight)
        ctx.add_bias, ctx.has_bias = add_bias, bias is not None
        return y

    @staticmethod
    @torch.autograd.function.once_differentiable
    def backward(ctx, gy):
        x, weight = ctx.saved_tensors
        B = x.shape[0]
        gx = gw = gb = None
        if ctx.needs_input_grad[0]:
            gx = torch.bmm(gy.transpose(1, 2), weight.to(gy.dtype).expand(B, -1, -1)).to(x.dtype)  # (B, N, Cin)
        if ctx.needs_input_grad[1]:
            gw = torch.bmm(gy, x.to(gy.dtype)).sum(0).to(weight.dtype)                     # (Cout, Cin)
        if ctx.has_bias and ctx.needs_input_grad[2]:
            gb = gy.sum((0, 2)).to(weight.dtype) if ctx.add_bias else weight.new_zeros(weight.shape[0])
        return gx, gw, gb, None


class _FromChannelMajor(torch.autograd.Function):
    """p[b] = o[b]^T W^T + bias [+ x2[b] W2^T] [+ residual[b]] for channel-major o (B, Cin, N)
    -> p (B, N, Cout) contiguous.

    The output projection reads the kernel's output through a transposed view,
    and its backward writes the gradient for o channel-major and contiguous
    (W^T grad_p^T), which is the layout the kernels' backward reads.
    Optional, for the layer's sum of binary writers: ``x2`` (B, N, K2) channel-last
    with its weight ``w2`` (Cout, K2) (assoc and prod's writers) and ``residual``
    (B, N, Cout) are added inside the same output tensor (no autograd in-place
    ops on views, no extra full-size sums).
    """

    @staticmethod
    def forward(ctx, o, weight, bias, x2=None, w2=None, residual=None):
        B = o.shape[0]
        p = torch.bmm(o.transpose(1, 2), weight.t().expand(B, -1, -1))   # (B, N, Cout)
        if x2 is not None:
            p.view(-1, p.shape[-1]).addmm_(x2.reshape(-1, x2.shape[-1]), w2.t().to(p.dtype))
        if bias is not None:
            p.add_(bias.to(p.dtype))
        if residual is not None:
            p.add_(residual.reshape(p.shape))
        ctx.save_for_backward(o, weight, x2, w2)
        ctx.has_bias, ctx.res_shape = bias is not None, None if residual is None else residual.shape
        return p

    @staticmethod
    @torch.autograd.function.once_differentiable
    def backward(ctx, gp):
        o, weight, x2, w2 = ctx.saved_tensors
        B = o.shape[0]
        go = gw = gb = gx2 = gw2 = gres = None
        if ctx.needs_input_grad[0]:
            go = torch.bmm(weight.t().to(gp.dtype).expand(B, -1, -1), gp.transpose(1, 2)).to(o.dtype)  # (B, Cin, N)
        if ctx.needs_input_grad[1]:
            gw = torch.bmm(gp.transpose(1, 2), o.transpose(1, 2).to(gp.dtype)).sum(0).to(weight.dtype)  # (Cout, Cin)
        if ctx.has_bias and ctx.needs_input_grad[2]:
            gb = gp.sum((0, 1)).to(weight.dtype)
        g2 = gp.reshape(-1, gp.shape[-1])
        if x2 is not None and ctx.needs_input_grad[3]:
            gx2 = (g2 @ w2.to(gp.dtype)).view(x2.shape).to(x2.dtype)
        if x2 is not None and ctx.needs_input_grad[4]:
            gw2 = (g2.t() @ x2.reshape(-1, x2.shape[-1]).to(gp.dtype)).to(w2.dtype)
        if ctx.res_shape is not None and ctx.needs_input_grad[5]:
            gres = gp.reshape(ctx.res_shape)
        return go, gw, gb, gx2, gw2, gres


class _MatmulRebuildV(torch.autograd.Function):
    """out = P @ v for a channel-major premise v = W x (+ b) (· m) that backward rebuilds from x.

    P (B, C, R, A), v (B, C, A, Y) -> (B, C, R, Y).  autograd's matmul would keep v, a
    binary-sized tensor; x (the layer-normed binary atoms, (B, N, Cin)) is kept by
    the projections anyway, so backward redoes the projection (a D2 -> C GEMM, the
    same product ``_ToChannelMajor`` computed) and keeps nothing new.  The gradient for
    v still flows to v's own producer, which owns the weight and input gradients.
    """

    @staticmethod
    def forward(ctx, P, v, x, W, b, m):
        ctx.save_for_backward(P, x, W, b, m)
        ctx.v_shape, ctx.v_dtype = v.shape, v.dtype
        # under autocast the product runs in its dtype; backward does the same
        ctx.cd = autocast_dtype(P.device.type)
        return torch.matmul(P, v)

    @staticmethod
    @torch.autograd.function.once_differentiable
    def backward(ctx, g):
        P, x, W, b, m = ctx.saved_tensors
        gP = gv = None
        if ctx.needs_input_grad[0]:
            v = torch.bmm(W.expand(x.shape[0], -1, -1), x.transpose(1, 2))  # as _ToChannelMajor
            if b is not None:
                v.add_(b.to(v.dtype)[None, :, None])
            v = v.view(ctx.v_shape)
            v = (v if m is None else v * m).to(ctx.cd or ctx.v_dtype)
            gP = torch.matmul(g.to(v.dtype), v.transpose(-1, -2)).to(P.dtype)
        if ctx.needs_input_grad[1]:
            cd = ctx.cd or P.dtype
            gv = torch.matmul(P.to(cd).transpose(-1, -2), g.to(cd)).to(ctx.v_dtype)
        return gP, gv, None, None, None, None


def _matmul_premise(P: Tensor, v: Tensor, linear: nn.Linear, t: Tensor, m: Optional[Tensor], lean: bool,
                    add_bias: bool = True) -> Tensor:
    """P @ v for v = _channel_major(linear, t) (· m) cast to P's dtype; ``lean`` rebuilds v in backward."""
    if not (lean and torch.is_grad_enabled() and (P.requires_grad or v.requires_grad)) \
            or torch.compiler.is_compiling():
        return torch.matmul(P, v)
    B, R, C, Cin = t.shape
    bias = linear.bias if add_bias else None
    return _MatmulRebuildV.apply(P, v, t.reshape(B, R * C, Cin), linear.weight, bias, m)


def _channel_major(linear: nn.Linear, t: Tensor, add_bias: bool = True) -> Tensor:
    """linear(t) for t (B, R, C, Cin), returned channel-major (B, Cout, R, C), contiguous."""
    B, R, C, Cin = t.shape
    y = _ToChannelMajor.apply(t.reshape(B, R * C, Cin), linear.weight, linear.bias, add_bias)
    return y.view(B, -1, R, C)


class Trans(nn.Module):
    """t (B, B, B):  u_h(x, y) = sum_a softmax_a(K_h(x, a)) v_h(a, y)

    Every factor is binary, so h runs over the D2 binary channels (D2 = 64
    scalar "heads" in folnet_base), not over the H unary heads.
    K_h(x, a) (B, D2, X, A) binary kernel, raw logits: the masked softmax over a
    happens inside ``triton_kernels.trans``; v_h(a, y) (B, D2, A, Y) binary
    premise (masked there too).  Encoder-decoder (A.5): a, y run over I ∪ T and
    v^E_h(a, y) (B, D2, Ti, Ti) comes from the encoder's binary atoms.
    out (B, X, Y, D2)

    Layout: the binary atoms are channel-last (B, X, A, D2) while the kernels
    read channel-major (B, D2, X, A) matrices.  The projections write K, v and
    v^E channel-major directly (``_ToChannelMajor``), and with ``writer`` (the
    layer's D2 -> D2 output projection) the output goes back to channel-last
    inside that projection's matmul (``_FromChannelMajor``), so no full-size
    permute-and-copy happens in forward or backward
    (tests/test_trans_layout.py counts them).

    Dropout on the softmaxed kernel (folnet.py:502-503): the kernels fuse the
    softmax and never hold it, so in training with ``dropout`` > 0 the
    operator runs the eager form (``triton_kernels.trans_eager``: masked softmax,
    dropout, matmul); at p = 0 and in eval it takes ``impl`` as before.
    """

    def __init__(self, d1: int, d2: int, heads: int, enc_dim: Optional[int] = None,
                 enc_binary_dim: Optional[int] = None, impl: str = "auto", dropout: float = 0.0):
        super().__init__()
        self.impl = impl
        self.dropout = dropout
        self.kernel = nn.Linear(d2, d2, bias=False)  # official reader D2 -> 2*D2 has no bias (folnet.py:491)
        self.premise = nn.Linear(d2, d2, bias=False)
        self.premise_enc = nn.Linear(enc_binary_dim, d2, bias=False) if enc_binary_dim else None

    def rows(self, u2n: Tensor) -> Tensor:
        return _channel_major(self.premise, u2n)  # v_h(a, y) (B, D2, A, Y), a = these rows

    def rows_enc(self, enc_u2n: Tensor) -> Tensor:
        return _channel_major(self.premise_enc, enc_u2n)  # v^E (B, D2, Ti, Ti)

    def forward(self, u2n: Tensor, v: Optional[Tensor], mask: TransMask, v_enc: Optional[Tensor] = None,
                writer: Optional[nn.Linear] = None, writer_bias: Optional[Tensor] = None,
                writer_extra: Optional[tuple] = None, residual: Optional[Tensor] = None,
                dense: bool = False, lean: bool = False) -> Tensor:
        """out (B, X, Y, D2), or ``writer(out)`` (B, X, Y, D_out) when a writer is given.
        For the layer's sum of binary writers: ``writer_bias`` replaces the writer's bias,
        ``writer_extra`` = (x2 (B, X, Y, K2), w2 (D_out, K2)) adds x2 w2^T and ``residual``
        (B, X, Y, D_out) is added, all in the writer's output (``_FromChannelMajor``).
        ``dense`` (every pair allowed, ``FolnetMask.dense``) on CPU: softmax_a K @ v, no masks.
        ``lean``: v is ``rows(u2n)`` of these same atoms (no cache, no encoder), so backward may
        rebuild it rather than keep it; on the Triton path K and v are both rebuilt
        (``triton_kernels.trans_from_atoms``).  ``v`` None: ``rows(u2n)``, made here when needed.
        The CPU shortcut for ``dense`` is taken under impl 'auto' and 'torch'."""
        B, X, A = u2n.shape[:3]
        path = self.path(u2n.device.type, activation_dtype(u2n.device.type, u2n.dtype), (B, X, A), mask,
                         dense, lean, v_enc is not None)
        if path == "atoms":
            # the kernels, with K and v rebuilt in backward from u2n (kept by the other readers)
            out = triton_kernels.trans_from_atoms(u2n, self.kernel.weight, self.premise.weight, mask)
            return self._write(out, writer, writer_bias, writer_extra, residual)
        if v is None:
            v = self.rows(u2n)
        # K's bias is a per-channel constant under the softmax over a: left out (see _ToChannelMajor)
        K = _channel_major(self.kernel, u2n, add_bias=False)  # (B, D2, X, A) raw logits
        if path == "dense":
            P = torch.softmax(K, dim=-1, dtype=torch.float64 if K.dtype == torch.float64 else torch.float32)
            P = dropout(P, self.dropout, self.training, lean)  # folnet.py:502-503
            # lean (v computed from these u2n rows alone): v rebuilt in backward, not kept
            out = _matmul_premise(P, v.to(P.dtype), self.premise, u2n, None, lean).to(K.dtype)  # (B, D2, X, Y)
        elif path == "dropout":
            out = triton_kernels.trans_eager(K, v, mask, v_enc, dropout=self.dropout)  # (B, D2, X, Y)
        else:
            out = triton_kernels.trans(K, v, mask, v_enc=v_enc, impl=self.impl)  # (B, D2, X, Y)
        return self._write(out, writer, writer_bias, writer_extra, residual)

    def path(self, device_type: str, act_dtype: torch.dtype, shape, mask: TransMask, dense: bool, lean: bool,
             has_enc: bool) -> str:
        """How ``forward`` computes trans, a function of the device type (tests drive every arm on CPU):

        'dense'    softmax_a K @ v with no masks: every pair allowed, on the CPU, impl auto/torch;
        'dropout'  training with kernel dropout > 0: the eager masked softmax, dropout, matmul
                   (the kernels fuse the softmax and never hold it);
        'atoms'    ``lean`` and ``trans_path`` says triton (self masks, no encoder, grad on):
                   the kernels with K and v rebuilt in backward (``trans_from_atoms``);
        'kernel'   ``triton_kernels.trans`` under ``impl`` (its own table picks triton/eager/torch).
        """
        B, X, A = shape
        if dense and device_type == "cpu" and mask.kind == "none" and not has_enc and self.impl in ("auto", "torch"):
            return "dense"
        training_dropout = self.training and self.dropout > 0
        if lean and not has_enc and X == A and not training_dropout and torch.is_grad_enabled() \
                and not torch.compiler.is_compiling() \
                and triton_kernels.trans_path(act_dtype, device_type, (B, self.kernel.weight.shape[0], X, A), mask,
                                              self.impl) == "triton":
            return "atoms"
        return "dropout" if training_dropout else "kernel"

    @staticmethod
    def _write(out, writer, writer_bias, writer_extra, residual):
        B, D2, X, Y = out.shape
        if writer is None:
            return out.permute(0, 2, 3, 1)
        bias = writer.bias if writer_bias is None else writer_bias
        x2, w2 = writer_extra if writer_extra is not None else (None, None)
        p = _FromChannelMajor.apply(out.reshape(B, D2, X * Y), writer.weight, bias, x2, w2, residual)
        return p.view(B, X, Y, -1)  # (B, X, Y, D_out)


UNARY_MODULES = {"c": Cjoin, "j": Join, "m": Mu}
BINARY_MODULES = {"a": Assoc, "p": Prod, "t": Trans}
