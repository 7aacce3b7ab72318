"""One FOLNet layer (one step of forward chaining) and a stack of them.

Dual-branch, pre-LN, the official architecture (folnet.py:588-683):
    u1n, u2n = LN(u1), LN(u2)                          non-affine, eps 1e-12
    u1 <- u1 + drop(sum_{op in c,j,m} W_op · op(u1n, u2n))        (B, X, D1)
    u2 <- u2 + drop(sum_{op in a,p,t} W_op · op(u1n, u2n))        (B, X, A, D2)
    u1 <- u1 + drop(bool1(LN(u1)))    D1 -> FFN1 -> D1, GELU
    u2 <- u2 + drop(bool2(LN(u2)))    [u2(x,y); u2^T(x,y)] 2·D2 -> FFN2 -> D2, GELU, + skip(u2^T)
Every operator has its own writer W_op.  u2^T is u2(y, x) in the encoder
(folnet.py:561-564); decoders use u2(y, x)·pair_ok(x, y), which with causal
binary atoms is the diagonal only (no future row is read).  The binary atoms
are multiplied by ``pair_ok`` (zero outside the allowed pairs: causal binary
atoms, padding).

Incremental decoding: ``cache`` (a dict, per layer) holds the past column-side
premises/kernels (join premise, cjoin kernel, assoc premise: (B, A, H, S)) and
the past trans premise rows v_h(a, y) (B, D2, A, Y); the layer then computes
only the newest rows.  For the encoder-decoder, ``enc`` holds the layer-normed
encoder output ("u1" (B, Ti, D1e), "u2" (B, Ti, Ti, D2e)); its projections
are prepended to the column side (appendix A.5) and cached as well.
"""
from __future__ import annotations

from typing import Dict, Optional

import torch
import torch.nn as nn
import torch.nn.functional as F
from torch import Tensor
from torch.utils.checkpoint import checkpoint

from nesyseq.plugins.layers.device_policy import autocast_dtype, binary_bool_path, bool_block_rows
from nesyseq.plugins.layers.folnet_masks import FolnetMask
from nesyseq.plugins.layers.folnet_ops import BINARY_MODULES, UNARY_MODULES, Trans, dropout
from nesyseq.plugins.layers.symbolic_folnet import SymbolicJoinStream
from nesyseq.plugins.layers.symbolic import SlotLayerNorm
from nesyseq.plugins.torch_compile import call_eager


def layer_norm(dim: int) -> nn.LayerNorm:
    """The official LN: no affine parameters, eps 1e-12 (folnet.py:84)."""
    return nn.LayerNorm(dim, eps=1e-12, elementwise_affine=False)


class _NormKeepOutput(torch.autograd.Function):
    """Non-affine LayerNorm y = (x - mean) · rstd that keeps y and rstd for backward, not x.

    torch's LayerNorm keeps its input x (and mean, rstd); its output y is kept anyway
    by the readers that follow (they save their GEMM input), so keeping x is a second
    copy of a binary-sized tensor.  With y = x̂ the gradient is
    dx = rstd · (dy - mean(dy) - y · mean(dy · y)), the same formula as torch's.
    The forward is torch's own kernel (same values as ``nn.LayerNorm``).
    """

    @staticmethod
    def forward(ctx, x, eps: float):
        y, _, rstd = torch.native_layer_norm(x, (x.shape[-1],), None, None, eps)
        ctx.save_for_backward(y, rstd)
        return y

    @staticmethod
    @torch.autograd.function.once_differentiable
    def backward(ctx, gy):
        y, rstd = ctx.saved_tensors
        acc = torch.float64 if y.dtype == torch.float64 else torch.float32
        g, yf = gy.to(acc), y.to(acc)
        gx = g - g.mean(-1, keepdim=True) - yf * (g * yf).mean(-1, keepdim=True)
        return (gx.mul_(rstd.to(acc))).to(y.dtype), None


def norm(ln: nn.LayerNorm, x: Tensor, lean: bool) -> Tensor:
    """``ln(x)``; with ``lean`` (training, not under --compile) through ``_NormKeepOutput``."""
    if lean and torch.is_grad_enabled() and x.requires_grad and not torch.compiler.is_compiling():
        if autocast_dtype(x.device.type) is not None:  # autocast runs layer_norm in float32
            with torch.autocast(x.device.type, enabled=False):
                return _NormKeepOutput.apply(x.float(), ln.eps)
        return _NormKeepOutput.apply(x, ln.eps)
    return ln(x)


class BoolFFN(nn.Module):
    """b (unary): u_hs(x) = sum_w K_hw(x) v_ws(x), the GELU FFN D -> F -> D (folnet.py:540-571).
    The official bool has no inner dropout."""

    def __init__(self, dim: int, hidden: int):
        super().__init__()
        self.fc1 = nn.Linear(dim, hidden)
        self.fc2 = nn.Linear(hidden, dim)

    def forward(self, x: Tensor) -> Tensor:
        return self.fc2(F.gelu(self.fc1(x)))


class BinaryBool(nn.Module):
    """b (binary): u(x, y) = W2 GELU(W1 [u(x,y); uT(x,y)]) + Ws uT(x,y)   (folnet.py:559-571)

    u, uT (B, X, A, D2) -> (B, X, A, D2); uT is u(y, x) (encoder) or its causal-safe form.
    ``residual`` (B, X, A, D2) and ``ok`` (B, X, A, 1) give the layer's update
    (residual + b(u, uT)) · ok in the same pass (see ``_BinaryBoolFn``).
    """

    def __init__(self, dim: int, hidden: int):
        super().__init__()
        self.fc1 = nn.Linear(2 * dim, hidden)
        self.fc2 = nn.Linear(hidden, dim)
        self.skip = nn.Linear(dim, dim)
        self.block_rows: Optional[int] = None  # pairs per block; None: device_policy.bool_block_rows

    def forward(self, u: Tensor, uT: Tensor, residual: Optional[Tensor] = None, ok: Optional[Tensor] = None,
                lean: bool = True) -> Tensor:
        """``lean``: the blocked function on every device and under autocast, recomputing the hidden
        pre-activation in backward instead of keeping it; otherwise the blocked function on the CPU
        without autocast (keeping the pre-activation) and the plain formula elsewhere
        (``device_policy.binary_bool_path``)."""
        dev = u.device.type
        act = autocast_dtype(dev)
        if binary_bool_path(dev, act is not None, lean, torch.compiler.is_compiling()) == "blocked":
            rows = self.block_rows or bool_block_rows(dev)
            args = (u, uT, residual, ok, self.fc1.weight, self.fc1.bias, self.fc2.weight, self.fc2.bias,
                    self.skip.weight, self.skip.bias, rows, lean)
            if act is None:
                return _BinaryBoolFn.apply(*args)
            with torch.autocast(dev, enabled=False):  # autocast's casts, made by the function itself
                return _BinaryBoolFn.apply(*args, act)
        # the plain formula (big cuBLAS matmuls; autocast casts the linears)
        out = self.fc2(F.gelu(self.fc1(torch.cat([u, uT], dim=-1)))) + self.skip(uT)
        out = out if residual is None else residual + out
        return out if ok is None else out * ok


class _BinaryBoolFn(torch.autograd.Function):
    """(residual + W2 GELU(W1 [u; uT] + b1) + b2 + Ws uT + bs) · ok, in blocks of rows.

    The (B, X, A, 2·D2 -> F2) hidden layer is 4x wider than the binary atoms; run
    whole, its GELU and bias/residual passes stream tensors of F2 channels through
    main memory.  Here each block of ``rows`` pairs (``device_policy.bool_block_rows``:
    the hidden block is F2·rows floats, cache-sized on the CPU) goes through every step at once: gather [u; uT]
    (no full-size concatenation; uT may be a transposed view), fc1, GELU, fc2 and
    the skip accumulated into the output, the residual and the pair mask.
    Backward gathers the input block again and, with ``lean`` (the layer's default),
    recomputes the pre-activation z = W1 [u; uT] + b1 from it: nothing of the hidden
    layer is kept, which is 4 binary-sized tensors per layer at folnet_base widths
    (the memory-bound part of a step is cheap to redo; the GEMM input [u; uT] is kept,
    as selective activation recomputation does, Korthikanti et al. 2022).  Without
    ``lean`` the pre-activation is kept, one tensor per block (one whole (B, X, A, F2)
    buffer is mmap-allocated by glibc and page-faults afresh every step).  Weight
    gradients accumulate block by block.  The arithmetic is the
    formula's (same products and sums); only the order of the weight-gradient
    sums over pairs differs.  ``BinaryBool`` takes it where ``device_policy.binary_bool_path``
    says 'blocked': always with ``lean``, else on the CPU without autocast.
    """

    @staticmethod
    def _steps(u: Tensor, rows: int):
        """(b, x0, x1) blocks of about ``rows`` pairs: whole rows x of one batch element."""
        B, X, A, _ = u.shape
        step = max(1, rows // A)
        for b in range(B):
            for x0 in range(0, X, step):
                yield b, x0, min(X, x0 + step)

    @staticmethod
    def _gather(buf: Tensor, u: Tensor, uT: Tensor, b: int, x0: int, x1: int) -> Tensor:
        D = u.shape[-1]
        xi = buf[: (x1 - x0) * u.shape[2]]
        v = xi.view(x1 - x0, u.shape[2], 2 * D)
        v[..., :D].copy_(u[b, x0:x1])
        v[..., D:].copy_(uT[b, x0:x1])
        return xi  # (rows, 2·D2): [u; uT]

    @staticmethod
    def forward(ctx, u, uT, residual, ok, W1, b1, W2, b2, Ws, bs, rows: int, lean=False, compute_dtype=None):
        """``compute_dtype`` (autocast's dtype): the GEMMs and GELU in it, with the weights cast
        as autocast casts them; the output is residual's dtype (the residual stream), or it."""
        B, X, A, D = u.shape
        Fh = W1.shape[0]
        cd = compute_dtype or u.dtype
        mixed = cd != u.dtype or cd != W1.dtype
        if mixed:
            W1, b1, W2, Ws = W1.to(cd), b1.to(cd), W2.to(cd), Ws.to(cd)
        out_dtype = residual.dtype if (mixed and residual is not None) else cd if mixed else u.dtype
        out = torch.empty(B, X, A, D, dtype=out_dtype, device=u.device)
        Zs = []  # pre-activation per block, saved (block-sized allocations)
        steps = list(_BinaryBoolFn._steps(u, rows))
        buf = torch.empty(max(x1 - x0 for _, x0, x1 in steps) * A, 2 * D, dtype=cd, device=u.device)
        bo = (b2 + bs).to(cd)
        for b, x0, x1 in steps:
            n = (x1 - x0) * A
            xi = _BinaryBoolFn._gather(buf, u, uT, b, x0, x1)
            z = torch.addmm(b1, xi, W1.t())
            if not lean:
                Zs.append(z)
            o = out[b, x0:x1].view(n, D)
            if mixed:  # the bool in cd, then into the output's dtype
                blk = torch.addmm(bo, F.gelu(z), W2.t())
                blk.addmm_(xi[:, D:], Ws.t())
                if residual is not None:
                    o.copy_(residual[b, x0:x1].reshape(n, D)).add_(blk)
                else:
                    o.copy_(blk)
            else:
                torch.addmm(bo, F.gelu(z), W2.t(), out=o)
                o.addmm_(xi[:, D:], Ws.t())
                if residual is not None:
                    o.add_(residual[b, x0:x1].reshape(n, D))
            if ok is not None:
                o.mul_(ok[b, x0:x1].reshape(n, 1))
        ctx.save_for_backward(u, uT, ok, W1, b1, W2, Ws, *Zs)
        ctx.has_residual, ctx.lean, ctx.cd, ctx.rows = residual is not None, lean, cd, rows
        ctx.wdtype = b2.dtype
        return out

    @staticmethod
    @torch.autograd.function.once_differentiable
    def backward(ctx, gout):
        u, uT, ok, W1, b1, W2, Ws, *Zs = ctx.saved_tensors
        B, X, A, D = u.shape
        Fh = W1.shape[0]
        cd, wd = ctx.cd, ctx.wdtype
        gy_all = gout * ok if ok is not None else gout.contiguous()  # d/d(residual + bool)
        gu = torch.empty_like(u, memory_format=torch.contiguous_format)
        guT = torch.empty(uT.shape, dtype=uT.dtype, device=uT.device)
        gW1, gW2, gWs = (torch.zeros(w.shape, dtype=wd, device=w.device) for w in (W1, W2, Ws))
        gb1 = torch.zeros(Fh, dtype=wd, device=W1.device)

        def acc(g, a, b):  # g += a @ b, accumulated in the weights' dtype
            if a.dtype == g.dtype:
                g.addmm_(a, b)
            else:
                g.add_(torch.mm(a, b).to(g.dtype))

        steps = list(_BinaryBoolFn._steps(u, ctx.rows))
        buf = torch.empty(max(x1 - x0 for _, x0, x1 in steps) * A, 2 * D, dtype=cd, device=u.device)
        zbuf = None if not ctx.lean else torch.empty(buf.shape[0], Fh, dtype=cd, device=u.device)
        for i, (b, x0, x1) in enumerate(steps):
            n = (x1 - x0) * A
            xi = _BinaryBoolFn._gather(buf, u, uT, b, x0, x1)
            # lean: the pre-activation again, the forward's own product (same values)
            z = torch.addmm(b1, xi, W1.t(), out=zbuf[:n]) if ctx.lean else Zs[i]
            gy = gy_all[b, x0:x1].reshape(n, D).to(cd)
            acc(gW2, gy.t(), F.gelu(z))
            acc(gWs, gy.t(), xi[:, D:])
            gz = torch.ops.aten.gelu_backward(gy @ W2, z)
            acc(gW1, gz.t(), xi)
            gb1 += gz.sum(0, dtype=wd) if gz.dtype != wd else gz.sum(0)
            gx = gz @ W1  # (rows, 2·D2)
            gx[:, D:].addmm_(gy, Ws)
            gu[b, x0:x1].view(n, D).copy_(gx[:, :D])
            guT[b, x0:x1].view(n, D).copy_(gx[:, D:])
        gb = gy_all.sum((0, 1, 2)).to(wd)
        g_res = gy_all if ctx.has_residual else None
        return gu, guT, g_res, None, gW1, gb1, gW2, gb, gWs, gb.clone(), None, None, None


def transposed_binary(u2n: Tensor, mask: FolnetMask) -> Tensor:
    """u(y, x) for the binary bool, without reading a future row.

    Square self masks (all rows, offset 0): u(y, x)·pair_ok(x, y)·pair_ok(y, x); for the
    encoder (mask ``none``) that is u(y, x) with padding zeroed, for causal atoms the
    diagonal.  Otherwise (incremental rows, encoder-decoder columns) only the diagonal
    u(x, x) can be allowed both ways, so that is what is kept.
    """
    ok = mask.pair_ok
    B, X, A = ok.shape
    if X == A and mask.trans.query_offset == 0 and mask.trans.kind != "encdec":
        both = (ok & ok.transpose(1, 2))[..., None].to(u2n.dtype)
        return u2n.transpose(1, 2) * both
    # diagonal: row i is absolute position offset + i, at column [Ti +] offset + i
    base = A - mask.trans.key_padding.shape[1] if mask.trans.kind == "encdec" else 0
    cols = torch.arange(X, device=ok.device) + mask.trans.query_offset + base
    diag = torch.zeros(X, A, dtype=u2n.dtype, device=u2n.device)
    diag[torch.arange(X, device=ok.device), cols] = 1
    return u2n * (diag[None, :, :, None] * ok[..., None].to(u2n.dtype))


class FolnetLayer(nn.Module):
    compile_unit = True  # --compile compiles each of these (plugins/torch_compile.py)

    def __init__(self, d1: int, d2: int, heads: int, ffn1: int, ffn2: int, unary_ops: str, binary_ops: str,
                 dropout: float = 0.0, enc_dim: Optional[int] = None, enc_binary_dim: Optional[int] = None,
                 trans_impl: str = "auto", symbolic: bool = False):
        super().__init__()
        if d1 % heads:
            raise ValueError(f"--folnet-unary-dim {d1} must be divisible by --folnet-heads {heads}")
        if symbolic and "j" not in unary_ops:
            raise ValueError(f"--symbolic-embeddings/--symbolic-output need the join operator j in "
                             f"--folnet-ops (got unary ops '{unary_ops}')")
        # the symbolic part of the unary atoms (plugins/layers/symbolic_folnet.py)
        self.sym = SymbolicJoinStream(heads) if symbolic else None
        self.unary_ops, self.binary_ops = unary_ops, binary_ops
        self.dropout = dropout
        self.ln1, self.ln2 = layer_norm(d1), layer_norm(d2)
        ops = {}
        for ch in unary_ops:
            ops[ch] = UNARY_MODULES[ch](d1, d2, heads, enc_dim=enc_dim, dropout=dropout)
        for ch in binary_ops:
            if ch == "t":
                ops[ch] = Trans(d1, d2, heads, enc_dim=enc_dim, enc_binary_dim=enc_binary_dim, impl=trans_impl,
                                dropout=dropout)
            else:
                ops[ch] = BINARY_MODULES[ch](d1, d2, heads, enc_dim=enc_dim, dropout=dropout)
        self.ops = nn.ModuleDict(ops)
        # one writer per operator (folnet.py:325, 370, 406, 434, 467, 493): unary ops give
        # D1 = H*S channels, assoc / prod H, trans D2
        width = {"c": d1, "j": d1, "m": d1, "a": heads, "p": heads, "t": d2}
        self.writers = nn.ModuleDict({ch: nn.Linear(width[ch], d1 if ch in "cjm" else d2) for ch in ops})
        self.ffn_ln1, self.ffn_ln2 = layer_norm(d1), layer_norm(d2)
        self.ffn1 = BoolFFN(d1, ffn1)
        self.ffn2 = BinaryBool(d2, ffn2)
        # lean training memory (docs/folnet.md, "Memory"): LayerNorms keep their output, not their
        # input; the binary bool, trans and cjoin rebuild cheap tensors in backward.  False: keep
        # every intermediate (the plain autograd path; same values, more memory)
        self.lean = True

    def _columns(self, ch: str, new: Tensor, cache: Optional[Dict[str, Tensor]], enc: Optional[dict]) -> Tensor:
        """Column-side unary term over all positions: [enc part ;] cached past ; new rows."""
        if cache is not None:
            if ch in cache:
                new = torch.cat([cache[ch], new], dim=1)
            cache[ch] = new
        if enc is not None:
            key = "enc." + ch
            if cache is not None and key in cache:
                e = cache[key]
            else:
                e = self.ops[ch].columns_enc(enc["u1"])
                if cache is not None:
                    cache[key] = e
            new = torch.cat([e, new], dim=1)
        return new

    def _sym_columns(self, new: Tensor, cache: Optional[Dict[str, Tensor]], enc: Optional[dict]) -> Tensor:
        """Column-side symbolic states ŝ(a): [encoder's final ŝ ;] cached past ; new rows.  (B, A, m)"""
        if cache is not None:
            if "j.sym" in cache:
                new = torch.cat([cache["j.sym"], new], dim=1)
            cache["j.sym"] = new
        if enc is not None:
            new = torch.cat([enc["s"].to(new.dtype), new], dim=1)
        return new

    def forward(self, u1: Tensor, u2: Tensor, mask: FolnetMask, cache: Optional[Dict[str, Tensor]] = None,
                enc: Optional[dict] = None, s: Optional[Tensor] = None, slot_mask: Optional[Tensor] = None):
        """Returns (u1, u2), or (u1, u2, s) when the symbolic state s (B, X, m) is given."""
        ok = mask.pair_ok
        dense = mask.dense and cache is None and enc is None  # every pair allowed: no mask arithmetic
        okf = None if dense else ok[..., None].to(u2.dtype)
        lean = self.lean
        u1n, u2n = norm(self.ln1, u1, lean), norm(self.ln2, u2, lean)
        unary = []
        if s is not None:
            sn = self.sym.ln(s, slot_mask)
            s_cols = self._sym_columns(sn, cache, enc)
        for ch, op in self.ops.items():
            if ch == "c":
                # rows share one column set only without causality (or with one row)
                shared = mask.trans.kind == "none" or ok.shape[1] == 1
                rows = mask.trans.kind == "none" and ok.shape[1] == ok.shape[2]  # official: contract rows
                out = op(self._columns("c", op.columns(u1n), cache, enc), u2n, ok, shared or rows, transpose=rows,
                         dense=dense, lean=lean)
                unary.append(self.writers["c"](out.flatten(-2)))
            elif ch == "j" and s is not None:
                out, out_sym = op(u2n, self._columns("j", op.columns(u1n), cache, enc), ok,
                                  score_bias=self.sym.score_bias(sn, s_cols, slot_mask), sym_values=s_cols)
                unary.append(self.writers["j"](out.flatten(-2)))
                s = s + self.sym.write(out_sym, slot_mask)
            elif ch == "j":
                v = self._columns("j", op.columns(u1n), cache, enc)
                unary.append(self.writers["j"](op(u2n, v, ok, dense=dense).flatten(-2)))
            elif ch == "m":
                unary.append(self.writers["m"](op(u2n, ok, dense=dense).flatten(-2)))
        # binary writers, one output tensor: assoc and prod (H -> D2 each) as one matmul on their
        # concatenated outputs, every writer's bias, and (dropout inactive) the residual u2, all
        # added inside trans's writer when trans is on
        u2_res = None if (self.training and self.dropout > 0) else u2
        bias2 = sum(self.writers[ch].bias for ch in self.binary_ops) if self.binary_ops else None
        ap = [ch for ch in "ap" if ch in self.ops]
        x2 = w2 = None
        if ap:
            outs = []
            for ch in ap:
                op = self.ops[ch]
                if ch == "a":
                    outs.append(op(u1n, self._columns("a", op.columns(u1n), cache, enc)))  # (B, X, A, H)
                else:
                    outs.append(op(u1n, u2n, ok, dense=dense))  # (B, X, A, H)
            x2 = torch.cat(outs, dim=-1) if len(outs) > 1 else outs[0]
            w2 = torch.cat([self.writers[ch].weight for ch in ap], dim=1) if len(ap) > 1 else self.writers[ap[0]].weight
        acc2 = None  # (B, X, A, D2): u2_res + sum of the binary writers
        if "t" in self.ops:
            op = self.ops["t"]
            # lean, no cache, no encoder: Trans makes v itself, or never (its Triton path rebuilds it)
            v = None if (lean and cache is None and enc is None) else op.rows(u2n)  # (B, D2, X, A)
            if cache is not None:
                if "t" in cache:
                    past = cache["t"]  # (B, H, Ap_rows, Ap_cols): new columns are zero for past rows
                    past = F.pad(past, (0, v.shape[-1] - past.shape[-1]))
                    v = torch.cat([past, v], dim=2)
                cache["t"] = v
            v_enc = None
            if enc is not None:
                if cache is not None and "enc.t" in cache:
                    v_enc = cache["enc.t"]
                else:
                    v_enc = op.rows_enc(enc["u2"])
                    if cache is not None:
                        cache["enc.t"] = v_enc
            acc2 = op(u2n, v, mask.trans, v_enc, writer=self.writers["t"], writer_bias=bias2,
                      writer_extra=None if x2 is None else (x2, w2), residual=u2_res, dense=dense,
                      lean=lean and cache is None and enc is None)
        elif x2 is not None:
            acc2 = torch.addmm(bias2, x2.reshape(-1, x2.shape[-1]), w2.t()).view(*x2.shape[:-1], -1)
            acc2 = acc2 if u2_res is None else acc2 + u2_res
        if unary:
            u1 = u1 + F.dropout(sum(unary), p=self.dropout, training=self.training)
        if acc2 is not None:
            u2 = acc2 if u2_res is not None else u2 + dropout(acc2, self.dropout, True, lean)
            if okf is not None:
                u2 = u2 * okf
        u1 = u1 + F.dropout(self.ffn1(norm(self.ffn_ln1, u1, lean)), p=self.dropout, training=self.training)
        u2n = norm(self.ffn_ln2, u2, lean)
        u2T = u2n.transpose(1, 2) if dense else transposed_binary(u2n, mask)
        if self.training and self.dropout > 0:
            u2 = u2 + dropout(self.ffn2(u2n, u2T, lean=lean), self.dropout, True, lean)
            u2 = u2 if okf is None else u2 * okf
        else:
            u2 = self.ffn2(u2n, u2T, residual=u2, ok=okf, lean=lean)  # (u2 + bool2) · ok in one pass
        if s is not None:
            s = s + self.sym.ffn(self.sym.ffn_ln(s, slot_mask), slot_mask)
            return u1, u2, s
        return u1, u2


def official_init(m: nn.Module, std: float = 0.02):
    """N(0, 0.02) weights, zero biases (folnet.py:63-76)."""
    if isinstance(m, (nn.Linear, nn.Embedding)):
        nn.init.normal_(m.weight, mean=0.0, std=std)
    if isinstance(m, nn.Linear) and m.bias is not None:
        nn.init.zeros_(m.bias)


class FolnetStack(nn.Module):
    """L layers of forward chaining, then a final LN on each branch."""

    def __init__(self, layers: int, checkpoint_activations: bool = False, **layer_kwargs):
        super().__init__()
        self.layers = nn.ModuleList([FolnetLayer(**layer_kwargs) for _ in range(layers)])
        self.ln1 = layer_norm(layer_kwargs["d1"])
        self.ln2 = layer_norm(layer_kwargs["d2"])
        self.sym_ln = SlotLayerNorm() if layer_kwargs.get("symbolic") else None
        self.checkpoint_activations = checkpoint_activations
        self.apply(official_init)

    def forward(self, u1: Tensor, u2: Tensor, mask: FolnetMask, caches: Optional[list] = None,
                enc: Optional[dict] = None, return_all_hiddens: bool = False,
                s: Optional[Tensor] = None, slot_mask: Optional[Tensor] = None):
        """Returns (u1, u2, hiddens), plus the final slot-normalised ŝ when s is given."""
        hiddens = [u1] if return_all_hiddens else None
        for i, layer in enumerate(self.layers):
            cache = caches[i] if caches is not None else None
            if s is not None:
                if self.checkpoint_activations and self.training and cache is None:
                    u1, u2, s = checkpoint(layer, u1, u2, mask, None, enc, s, slot_mask, use_reentrant=False)
                elif cache is not None:  # a decoding step: eager
                    u1, u2, s = call_eager(layer, u1, u2, mask, cache, enc, s, slot_mask)
                else:
                    u1, u2, s = layer(u1, u2, mask, cache, enc, s, slot_mask)
            elif self.checkpoint_activations and self.training and cache is None:
                u1, u2 = checkpoint(layer, u1, u2, mask, None, enc, use_reentrant=False)
            elif cache is not None:  # a decoding step: never through --compile's graph
                u1, u2 = call_eager(layer, u1, u2, mask, cache, enc)
            else:
                u1, u2 = layer(u1, u2, mask, cache, enc)
            if return_all_hiddens:
                hiddens.append(u1)
        u2 = self.ln2(u2) if mask.dense else self.ln2(u2) * mask.pair_ok[..., None].to(u2.dtype)
        if s is not None:
            assert self.sym_ln is not None, "a symbolic state needs a stack built with symbolic=True"
            return self.ln1(u1), u2, hiddens, self.sym_ln(s, slot_mask)
        return self.ln1(u1), u2, hiddens
