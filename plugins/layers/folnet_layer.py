"""One FOLNet layer (one step of forward chaining) and a stack of them.

Dual-branch, pre-LN:
    u1n, u2n = LN(u1), LN(u2)
    u1 <- u1 + W1 · sum_{op in unary ops}  op(u1n, u2n)         (B, X, D1)
    u2 <- u2 + W2 · (assoc + prod) + Wt · trans                (B, X, A, D2)
    u1 <- u1 + FFN1(LN(u1))     bool, unary:  D1 -> FFN1 -> D1, GELU
    u2 <- u2 + FFN2(LN(u2))     bool, binary: D2 -> FFN2 -> D2, GELU
and the binary atoms are multiplied by ``pair_ok`` (zero outside the allowed
pairs: causal binary atoms, padding).

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

from plugins.layers.folnet_masks import FolnetMask
from plugins.layers.folnet_ops import BINARY_MODULES, UNARY_MODULES, Trans


class BoolFFN(nn.Module):
    """b: u_hs(x) = sum_w K_hw(x) v_ws(x), implemented as the GELU FFN (D -> F -> D)."""

    def __init__(self, dim: int, hidden: int, dropout: float):
        super().__init__()
        self.fc1 = nn.Linear(dim, hidden)
        self.fc2 = nn.Linear(hidden, dim)
        self.dropout = dropout

    def forward(self, x: Tensor) -> Tensor:
        h = F.dropout(F.gelu(self.fc1(x)), p=self.dropout, training=self.training)
        return self.fc2(h)


class FolnetLayer(nn.Module):
    def __init__(self, d1: int, d2: int, heads: int, ffn1: int, ffn2: int, unary_ops: str, binary_ops: str,
                 dropout: float = 0.0, enc_dim: Optional[int] = None, enc_binary_dim: Optional[int] = None,
                 trans_impl: str = "auto"):
        super().__init__()
        if d1 % heads:
            raise ValueError(f"--folnet-unary-dim {d1} must be divisible by --folnet-heads {heads}")
        self.unary_ops, self.binary_ops = unary_ops, binary_ops
        self.dropout = dropout
        self.ln1, self.ln2 = nn.LayerNorm(d1), nn.LayerNorm(d2)
        ops = {}
        for ch in unary_ops:
            ops[ch] = UNARY_MODULES[ch](d1, d2, heads, enc_dim=enc_dim)
        for ch in binary_ops:
            if ch == "t":
                ops[ch] = Trans(d1, d2, heads, enc_dim=enc_dim, enc_binary_dim=enc_binary_dim, impl=trans_impl)
            else:
                ops[ch] = BINARY_MODULES[ch](d1, d2, heads, enc_dim=enc_dim)
        self.ops = nn.ModuleDict(ops)
        self.out1 = nn.Linear(d1, d1) if unary_ops else None
        # assoc / prod give H channels, trans gives D2 (its "heads" are the binary channels)
        self.out2 = nn.Linear(heads, d2) if set(binary_ops) & {"a", "p"} else None
        self.out_t = nn.Linear(d2, d2) if "t" in binary_ops else None
        self.ffn_ln1, self.ffn_ln2 = nn.LayerNorm(d1), nn.LayerNorm(d2)
        self.ffn1 = BoolFFN(d1, ffn1, dropout)
        self.ffn2 = BoolFFN(d2, ffn2, dropout)

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

    def forward(self, u1: Tensor, u2: Tensor, mask: FolnetMask, cache: Optional[Dict[str, Tensor]] = None,
                enc: Optional[dict] = None):
        ok = mask.pair_ok
        okf = ok[..., None].to(u2.dtype)
        u1n, u2n = self.ln1(u1), self.ln2(u2)
        unary = []
        binary = []
        trans_out = None
        for ch, op in self.ops.items():
            if ch == "c":
                unary.append(op(self._columns("c", op.columns(u1n), cache, enc), u2n, ok))
            elif ch == "j":
                unary.append(op(u2n, self._columns("j", op.columns(u1n), cache, enc), ok))
            elif ch == "m":
                unary.append(op(u2n, ok))
            elif ch == "a":
                binary.append(op(u1n, self._columns("a", op.columns(u1n), cache, enc)))
            elif ch == "p":
                binary.append(op(u1n, u2n, ok))
            elif ch == "t":
                v = op.rows(u2n)  # (B, D2, X, A)
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
                trans_out = op(u2n, v, mask.trans, v_enc, writer=self.out_t)  # Wt · trans, (B, X, A, D2)
        if unary:
            s = torch.stack(unary).sum(0).flatten(-2)  # (B, X, D1)
            u1 = u1 + F.dropout(self.out1(s), p=self.dropout, training=self.training)
        if binary or trans_out is not None:
            d2_update = 0
            if binary:
                d2_update = self.out2(torch.stack(binary).sum(0))  # (B, X, A, H) -> D2
            if trans_out is not None:
                d2_update = d2_update + trans_out  # already projected by out_t (copy-free, in Trans)
            u2 = (u2 + F.dropout(d2_update, p=self.dropout, training=self.training)) * okf
        u1 = u1 + F.dropout(self.ffn1(self.ffn_ln1(u1)), p=self.dropout, training=self.training)
        u2 = (u2 + F.dropout(self.ffn2(self.ffn_ln2(u2)), p=self.dropout, training=self.training)) * okf
        return u1, u2


class FolnetStack(nn.Module):
    """L layers of forward chaining, then a final LN on each branch."""

    def __init__(self, layers: int, checkpoint_activations: bool = False, **layer_kwargs):
        super().__init__()
        self.layers = nn.ModuleList([FolnetLayer(**layer_kwargs) for _ in range(layers)])
        self.ln1 = nn.LayerNorm(layer_kwargs["d1"])
        self.ln2 = nn.LayerNorm(layer_kwargs["d2"])
        self.checkpoint_activations = checkpoint_activations

    def forward(self, u1: Tensor, u2: Tensor, mask: FolnetMask, caches: Optional[list] = None,
                enc: Optional[dict] = None, return_all_hiddens: bool = False):
        hiddens = [u1] if return_all_hiddens else None
        for i, layer in enumerate(self.layers):
            cache = caches[i] if caches is not None else None
            if self.checkpoint_activations and self.training and cache is None:
                u1, u2 = checkpoint(layer, u1, u2, mask, None, enc, use_reentrant=False)
            else:
                u1, u2 = layer(u1, u2, mask, cache, enc)
            if return_all_hiddens:
                hiddens.append(u1)
        u2 = self.ln2(u2) * mask.pair_ok[..., None].to(u2.dtype)
        return self.ln1(u1), u2, hiddens
