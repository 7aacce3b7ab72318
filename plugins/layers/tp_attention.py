"""TP-Multi-Head Attention (TP-Transformer, Schlag et al., eqs. 3-6).

Per head h, from the query stream z_t and the memory z_{1:T}:

    q^h_t = W^{h,(q)} z_t + b      k^h_i = W^{h,(k)} z_i + b      v^h_i = W^{h,(v)} z_i + b
    r^h_t = W^{h,(r)} z_t + b                      # role, from the *query* stream   (eq. 3)
    vbar^h_t = sum_i softmax_i(q^h_t . k^h_i / sqrt(d_k)) v^h_i                     (eqs. 4, 5)
    TPMHA(z_t, z_{1:T}) = sum_h W^{(o)}_h (vbar^h_t ⊙ r^h_t) + b^{(o)}              (eq. 6)

The filler vbar comes from ``F.scaled_dot_product_attention`` (the fused
kernel), so TP-attention costs one extra d×d projection and a Hadamard product
over standard attention.  With ``role_binding=False`` the role is fixed to 1
and the module is exactly standard multi-head attention (the baseline).

Tensors are batch-first: (B, T, C).
"""
from __future__ import annotations

import math
from typing import Dict, Optional

import torch
import torch.nn.functional as F
from torch import Tensor, nn

from fairseq.incremental_decoding_utils import with_incremental_state


@with_incremental_state
class TPMultiheadAttention(nn.Module):
    """Multi-head attention with per-head role binding (eq. 6)."""

    def __init__(
        self,
        embed_dim: int,
        num_heads: int,
        dropout: float = 0.0,
        role_binding: bool = True,
        self_attention: bool = True,
        role_init: str = "xavier",
    ):
        super().__init__()
        if embed_dim % num_heads != 0:
            raise ValueError(f"embed_dim={embed_dim} is not divisible by num_heads={num_heads}")
        self.embed_dim = embed_dim
        self.num_heads = num_heads
        self.head_dim = embed_dim // num_heads
        self.dropout = dropout
        self.role_binding = role_binding
        self.self_attention = self_attention
        self.role_init = role_init

        d = embed_dim
        # Projections that read the query stream: q (and r); the memory gives k, v.
        # Self-attention fuses all of them into one matmul.
        n_query_proj = 2 if role_binding else 1
        if self_attention:
            self.in_proj = nn.Linear(d, (n_query_proj + 2) * d)
        else:
            self.q_proj = nn.Linear(d, n_query_proj * d)  # [q ; r]
            self.kv_proj = nn.Linear(d, 2 * d)  # [k ; v]
        self.out_proj = nn.Linear(d, d)
        self.reset_parameters()

    def reset_parameters(self):
        """``role_init='xavier'`` (the paper, Sec. 4.1): Xavier-uniform for every
        d×d block (q, r, k, v, o), zero biases.

        ``role_init='default'``: torch's nn.Linear init for every block *and* bias
        (W_q, W_k, W_v, W_r, W_o), which is what the authors' TP-Transformer ends up
        with: its ``SelfAttention.reset_parameters`` (models/tp-transformer.py:254-262)
        is never called from ``__init__`` (lines 191-206).
        """
        d = self.embed_dim
        layers = [self.in_proj] if self.self_attention else [self.q_proj, self.kv_proj]
        layers = layers + [self.out_proj]
        for lin in layers:
            for block, bias in zip(lin.weight.split(d, dim=0), lin.bias.split(d, dim=0)):
                if self.role_init == "default":
                    # one separate nn.Linear(d, d) per projection: fan_in = d
                    nn.init.kaiming_uniform_(block, a=math.sqrt(5))
                    nn.init.uniform_(bias, -1.0 / math.sqrt(d), 1.0 / math.sqrt(d))
                else:
                    nn.init.xavier_uniform_(block)
                    nn.init.zeros_(bias)

    def roles(self, query: Tensor) -> Optional[Tensor]:
        """r_t = W^(r) z_t + b of every head (eq. 3), side by side (B, T, d), from the query stream as
        :meth:`forward` binds it; None without role binding (r ≡ 1)."""
        if not self.role_binding:
            return None
        d = query.size(-1)
        proj = self.in_proj(query) if self.self_attention else self.q_proj(query)
        return proj.split(d, dim=-1)[1]

    def _heads(self, x: Tensor) -> Tensor:
        # (B, T, d) -> (B, H, T, d_k)
        B, T, _ = x.shape
        return x.view(B, T, self.num_heads, self.head_dim).transpose(1, 2)

    def forward(
        self,
        query: Tensor,  # (B, Tq, d)
        memory: Optional[Tensor] = None,  # (B, Tk, d); None for self-attention
        key_padding_mask: Optional[Tensor] = None,  # (B, Tk) bool, True = pad
        causal: bool = False,
        incremental_state: Optional[Dict[str, Dict[str, Optional[Tensor]]]] = None,
        attn_bias: Optional[Tensor] = None,  # (1|B, H, Tq, Tk) added to the scores
    ):
        B, Tq, d = query.shape
        saved = self._get_input_buffer(incremental_state) if incremental_state is not None else {}
        heads = lambda k, v, _src: (self._heads(k), self._heads(v))  # noqa: E731
        q, r, k, v = self._project(query, memory, incremental_state, saved, heads)
        q = self._heads(q)                                                # (B, H, Tq, d_k)
        attn_mask, is_causal = self._attention_mask(key_padding_mask, causal, Tq, k.size(2), query.device)
        attn_mask = self._add_bias(attn_mask, is_causal, attn_bias, q.dtype)
        # filler vbar^h_t = sum_i alpha^{h,i}_t v^h_i                      (B, H, Tq, d_k)
        vbar = F.scaled_dot_product_attention(
            q, k, v, attn_mask=attn_mask, is_causal=is_causal,
            dropout_p=self.dropout if self.training else 0.0,
        )
        vbar = vbar.transpose(1, 2).reshape(B, Tq, d)  # heads side by side
        bound = vbar * r if r is not None else vbar  # vbar^h ⊙ r^h for every head at once
        return self.out_proj(bound)  # sum_h W^(o)_h (...) + b^(o)

    def _project(self, query, memory, incremental_state, saved, to_heads, query_src=None, memory_src=None):
        """-> q (B, Tq, d), r (B, Tq, d) or None, k and v as ``to_heads(k, v, src)`` makes them
        (B, H, Tk, ·), with the incremental cache: self-attention appends this step's keys and
        values to the cached ones; encoder-decoder attention computes them once and reuses them.
        ``src`` is ``query_src`` for self-attention and ``memory_src`` otherwise (the symbolic
        subclass passes the slot vectors there)."""
        d = query.size(-1)
        if self.self_attention:
            proj = self.in_proj(query)
            if self.role_binding:
                q, r, k, v = proj.split(d, dim=-1)
            else:
                (q, k, v), r = proj.split(d, dim=-1), None
            k, v = to_heads(k, v, query_src)
            if incremental_state is not None:
                if "prev_key" in saved:  # append this step to the cached keys / values
                    k = torch.cat([saved["prev_key"], k], dim=2)
                    v = torch.cat([saved["prev_value"], v], dim=2)
                saved["prev_key"], saved["prev_value"] = k, v
                self._set_input_buffer(incremental_state, saved)
            return q, r, k, v
        qr = self.q_proj(query)
        q, r = qr.split(d, dim=-1) if self.role_binding else (qr, None)
        if incremental_state is not None and "prev_key" in saved:
            k, v = saved["prev_key"], saved["prev_value"]  # static encoder keys / values
        else:
            k, v = self.kv_proj(memory).split(d, dim=-1)
            k, v = to_heads(k, v, memory_src)
            if incremental_state is not None:
                saved["prev_key"], saved["prev_value"] = k, v
                self._set_input_buffer(incremental_state, saved)
        return q, r, k, v

    @staticmethod
    def _attention_mask(key_padding_mask, causal, Tq, Tk, device):
        """-> (attn_mask (B, 1, 1|Tq, Tk) with True = attend, or None; is_causal)."""
        attn_mask = None
        if key_padding_mask is not None:  # callers pass None when nothing is padded
            attn_mask = ~key_padding_mask[:, None, None, :Tk]  # (B, 1, 1, Tk), True = attend
        is_causal = False
        if causal and Tq > 1:
            if Tq != Tk:
                raise ValueError("causal TP-attention with a cache expects one query step at a time")
            if attn_mask is None:
                is_causal = True
            else:
                attn_mask = attn_mask & torch.ones(Tq, Tk, dtype=torch.bool, device=device).tril()
        return attn_mask, is_causal

    @staticmethod
    def _add_bias(attn_mask, is_causal, attn_bias, dtype):
        """A float score bias (relative positions) joined with the boolean mask: masked
        entries become −inf.  Only for attention without the causal shortcut."""
        if attn_bias is None:
            return attn_mask
        if is_causal:
            raise ValueError("a score bias is only supported for non-causal attention")
        attn_bias = attn_bias.to(dtype)
        if attn_mask is None:
            return attn_bias
        return torch.where(attn_mask, attn_bias, torch.full((), float("-inf"), dtype=dtype,
                                                            device=attn_bias.device))

    def reorder_incremental_state(self, incremental_state, new_order: Tensor):
        saved = self._get_input_buffer(incremental_state)
        if saved:
            for key, value in saved.items():
                if value is not None:
                    saved[key] = value.index_select(0, new_order)
            self._set_input_buffer(incremental_state, saved)
        return incremental_state

    def _get_input_buffer(self, incremental_state) -> Dict[str, Optional[Tensor]]:
        result = self.get_incremental_state(incremental_state, "attn_state")
        return result if result is not None else {}

    def _set_input_buffer(self, incremental_state, buffer):
        return self.set_incremental_state(incremental_state, "attn_state", buffer)
