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
from torch import Tensor

import triton_kernels
from triton_kernels import TransMask

from plugins.layers.folnet_masks import masked_softmax

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


def _heads(t: Tensor, H: int) -> Tensor:
    """(..., D1) -> (..., H, S)"""
    return t.view(*t.shape[:-1], H, t.shape[-1] // H)


class Cjoin(nn.Module):
    """c (U, U, B):  u_hs(x) = sum_a softmax_a(K_hs(a)) v_h(x, a)

    K_hs(a) (B, A, H, S) unary kernel, softmax over a (only the a allowed for x)
    v_h(x, a) (B, X, A, H) binary premise, masked (Table 5)
    out (B, X, H, S)
    """

    def __init__(self, d1: int, d2: int, heads: int, enc_dim: Optional[int] = None):
        super().__init__()
        self.H = heads
        self.kernel = nn.Linear(d1, d1)
        self.premise = nn.Linear(d2, heads)
        self.kernel_enc = nn.Linear(enc_dim, d1) if enc_dim else None

    def columns(self, u1n: Tensor) -> Tensor:
        return _heads(self.kernel(u1n), self.H)  # K (B, A, H, S) logits

    def columns_enc(self, enc: Tensor) -> Tensor:
        return _heads(self.kernel_enc(enc), self.H)  # K over a in I (B, Ti, H, S)

    def forward(self, K: Tensor, u2n: Tensor, pair_ok: Tensor) -> Tensor:
        ok = pair_ok.to(u2n.dtype)
        v = self.premise(u2n) * ok[..., None]  # (B, X, A, H)
        # softmax_a K_hs(a) restricted to the allowed a of each row x, written as
        # sum_a ok(x,a) e^{K(a)-c} v(x,a) / sum_a ok(x,a) e^{K(a)-c}.  The shift c
        # (max over non-padding columns) cancels exactly in the ratio.
        acc = torch.float64 if K.dtype == torch.float64 else torch.float32
        Kf = K.to(acc)
        col_ok = pair_ok.any(dim=1)  # (B, A) columns allowed for some row
        shift = Kf.masked_fill(~col_ok[:, :, None, None], torch.finfo(acc).min).amax(dim=1, keepdim=True)
        E = torch.exp((Kf - shift.detach()).clamp(max=0)) * col_ok[:, :, None, None].to(acc)  # (B, A, H, S)
        num = torch.einsum("bxah,bahs->bxhs", v.to(acc), E)
        den = torch.einsum("bxa,bahs->bxhs", ok.to(acc), E)
        out = torch.where(den > 0, num / den.clamp_min(torch.finfo(acc).tiny), torch.zeros_like(num))
        # Safety net: a row whose allowed logits all lie far below the shift underflows
        # to den == 0; recompute those (rare) rows exactly with their own normaliser.
        bad = ((den == 0) & pair_ok.any(dim=-1)[:, :, None, None]).any(dim=-1).any(dim=-1)  # (B, X)
        for b, x in bad.nonzero().tolist():
            p = masked_softmax(Kf[b], pair_ok[b, x][:, None, None], dim=0)  # (A, H, S)
            out[b, x] = torch.einsum("ah,ahs->hs", v[b, x].to(acc), p)
        return out.to(u2n.dtype)


class Join(nn.Module):
    """j (U, B, U):  u_hs(x) = sum_a softmax_a(K_h(x, a)) v_hs(a)      (self-attention)

    K_h(x, a) (B, X, A, H) binary kernel, masked softmax over a
    v_hs(a) (B, A, H, S) unary premise
    out (B, X, H, S)
    """

    def __init__(self, d1: int, d2: int, heads: int, enc_dim: Optional[int] = None):
        super().__init__()
        self.H = heads
        self.kernel = nn.Linear(d2, heads)
        self.premise = nn.Linear(d1, d1)
        self.premise_enc = nn.Linear(enc_dim, d1) if enc_dim else None

    def columns(self, u1n: Tensor) -> Tensor:
        return _heads(self.premise(u1n), self.H)  # v (B, A, H, S)

    def columns_enc(self, enc: Tensor) -> Tensor:
        return _heads(self.premise_enc(enc), self.H)

    def forward(self, u2n: Tensor, v: Tensor, pair_ok: Tensor) -> Tensor:
        K = masked_softmax(self.kernel(u2n), pair_ok[..., None], dim=2)  # (B, X, A, H)
        return torch.einsum("bxah,bahs->bxhs", K, v)


class Mu(nn.Module):
    """m (U, B, B):  u_hs(x) = sum_a softmax_a(K_h(x, a)) v_s(x, a)

    K_h(x, a) (B, X, A, H) binary kernel, masked softmax over a
    v_s(x, a) (B, X, A, S) binary premise, masked
    out (B, X, H, S)
    """

    def __init__(self, d1: int, d2: int, heads: int, enc_dim: Optional[int] = None):
        super().__init__()
        self.kernel = nn.Linear(d2, heads)
        self.premise = nn.Linear(d2, d1 // heads)

    def forward(self, u2n: Tensor, pair_ok: Tensor) -> Tensor:
        K = masked_softmax(self.kernel(u2n), pair_ok[..., None], dim=2)  # (B, X, A, H)
        v = self.premise(u2n) * pair_ok[..., None].to(u2n.dtype)  # (B, X, A, S)
        return torch.einsum("bxah,bxas->bxhs", K, v)


class Assoc(nn.Module):
    """a (B, U, U):  u_h(x, y) = sum_w K_hw(x) v_hw(y)      (attention scores)

    K_hw(x) (B, X, H, S) unary kernel, identity activation
    v_hw(y) (B, Y, H, S) unary premise
    out (B, X, Y, H), scaled by 1/sqrt(S) (a constant folded into the kernel)
    """

    def __init__(self, d1: int, d2: int, heads: int, enc_dim: Optional[int] = None):
        super().__init__()
        self.H = heads
        self.scale = (d1 // heads) ** -0.5
        self.kernel = nn.Linear(d1, d1)
        self.premise = nn.Linear(d1, d1)
        self.premise_enc = nn.Linear(enc_dim, d1) if enc_dim else None

    def columns(self, u1n: Tensor) -> Tensor:
        return _heads(self.premise(u1n), self.H)  # v (B, Y, H, S)

    def columns_enc(self, enc: Tensor) -> Tensor:
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

    def __init__(self, d1: int, d2: int, heads: int, enc_dim: Optional[int] = None):
        super().__init__()
        self.H = heads
        self.scale = (d1 // heads) ** -0.5
        self.kernel = nn.Linear(d1, d1)
        self.premise = nn.Linear(d2, d1 // heads)

    def forward(self, u1n: Tensor, u2n: Tensor, pair_ok: Tensor) -> Tensor:
        K = _heads(self.kernel(u1n), self.H) * self.scale  # (B, X, H, S)
        v = self.premise(u2n) * pair_ok[..., None].to(u2n.dtype)  # (B, X, Y, S)
        return torch.einsum("bxhw,bxyw->bxyh", K, v)


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
    """p[b] = o[b]^T W^T + bias for channel-major o (B, Cin, N) -> p (B, N, Cout) contiguous.

    The output projection reads the kernel's output through a transposed view,
    and its backward writes the gradient for o channel-major and contiguous
    (W^T grad_p^T), which is the layout the kernels' backward reads.
    """

    @staticmethod
    def forward(ctx, o, weight, bias):
        B = o.shape[0]
        p = torch.bmm(o.transpose(1, 2), weight.t().expand(B, -1, -1))   # (B, N, Cout)
        if bias is not None:
            p.add_(bias.to(p.dtype))
        ctx.save_for_backward(o, weight)
        ctx.has_bias = bias is not None
        return p

    @staticmethod
    @torch.autograd.function.once_differentiable
    def backward(ctx, gp):
        o, weight = ctx.saved_tensors
        B = o.shape[0]
        go = gw = gb = None
        if ctx.needs_input_grad[0]:
            go = torch.bmm(weight.t().to(gp.dtype).expand(B, -1, -1), gp.transpose(1, 2)).to(o.dtype)  # (B, Cin, N)
        if ctx.needs_input_grad[1]:
            gw = torch.bmm(gp.transpose(1, 2), o.transpose(1, 2).to(gp.dtype)).sum(0).to(weight.dtype)  # (Cout, Cin)
        if ctx.has_bias and ctx.needs_input_grad[2]:
            gb = gp.sum((0, 1)).to(weight.dtype)
        return go, gw, gb


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
    """

    def __init__(self, d1: int, d2: int, heads: int, enc_dim: Optional[int] = None,
                 enc_binary_dim: Optional[int] = None, impl: str = "auto"):
        super().__init__()
        self.impl = impl
        self.kernel = nn.Linear(d2, d2)
        self.premise = nn.Linear(d2, d2)
        self.premise_enc = nn.Linear(enc_binary_dim, d2) if enc_binary_dim else None

    def rows(self, u2n: Tensor) -> Tensor:
        return _channel_major(self.premise, u2n)  # v_h(a, y) (B, D2, A, Y), a = these rows

    def rows_enc(self, enc_u2n: Tensor) -> Tensor:
        return _channel_major(self.premise_enc, enc_u2n)  # v^E (B, D2, Ti, Ti)

    def forward(self, u2n: Tensor, v: Tensor, mask: TransMask, v_enc: Optional[Tensor] = None,
                writer: Optional[nn.Linear] = None) -> Tensor:
        """out (B, X, Y, D2), or ``writer(out)`` (B, X, Y, D_out) when a writer is given."""
        # K's bias is a per-channel constant under the softmax over a: left out (see _ToChannelMajor)
        K = _channel_major(self.kernel, u2n, add_bias=False)  # (B, D2, X, A) raw logits
        out = triton_kernels.trans(K, v, mask, v_enc=v_enc, impl=self.impl)  # (B, D2, X, Y)
        B, D2, X, Y = out.shape
        if writer is None:
            return out.permute(0, 2, 3, 1)
        p = _FromChannelMajor.apply(out.reshape(B, D2, X * Y), writer.weight, writer.bias)  # (B, X*Y, D_out)
        return p.view(B, X, Y, -1)


UNARY_MODULES = {"c": Cjoin, "j": Join, "m": Mu}
BINARY_MODULES = {"a": Assoc, "p": Prod, "t": Trans}
