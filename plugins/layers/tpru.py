"""TPRU, the tensor-product recurrent unit (Tang, Smolensky & de Sa; slides "TPRU – Parameters").

With N fixed role vectors V (N × r, random N(0,1), not trained) and state b ∈ R^d:

    U = W_u Vᵀ,  R = W_r Vᵀ                                  # (d, N): unbinding / binding vectors
    f_b = Uᵀ b_{t-1},   f_x = Uᵀ W x_t                        # (N,)   unbinding
    f̃_b = ReLU(f_b + b_b),   f̃_x = ReLU(f_x + b_x)            # scalar biases b_b, b_x
    (f_t)_n = (f̃_b + f̃_x)_n² / max(Σ_m (f̃_b + f̃_x)_m², eps)  # squared normalisation
    b̃_t = R f_t                                               # (d,)   binding
    g_t = σ(W_b b_{t-1} + W_x x_t)                            # input gate
    b_t = g_t ∘ tanh(b̃_t) + (1 − g_t) ∘ b_{t-1}

Recurrent weight matrices: W, W_x (d × d_in), W_u, W_r, W_b (d × d when r = d):
2·d·d_in + 3·d² per direction, independent of N.

``code_variant=True`` follows the authors' ``models/TPRU.py`` instead (see docs/tpru.md):
f_b = Uᵀ W_h b_{t-1} (an extra d×d matrix), no tanh on b̃_t, biases on every Linear.

Tensors are time-first: (T, B, C).  Padding (mask False) carries the state through
unchanged and emits zeros, so left- and right-padded batches both work in either direction.
"""
from __future__ import annotations

from typing import Optional, Tuple

import torch
from torch import Tensor, nn


class TPRUCell(nn.Module):
    def __init__(self, input_size: int, hidden_size: int, num_roles: int = 32,
                 role_size: Optional[int] = None, eps: float = 1e-7, code_variant: bool = False):
        super().__init__()
        d, r = hidden_size, role_size or hidden_size
        self.input_size, self.hidden_size, self.num_roles, self.role_size = input_size, d, num_roles, r
        self.eps, self.code_variant = eps, code_variant
        bias = code_variant
        # V: fixed random roles; a persistent buffer so checkpoints reproduce it exactly.
        self.register_buffer("V", torch.randn(num_roles, r))
        self.W_u = nn.Linear(r, d, bias=bias)
        self.W_r = nn.Linear(r, d, bias=bias)
        # [W ; W_x] stacked: one matmul gives the filler input and the gate input.
        self.W_in = nn.Linear(input_size, 2 * d, bias=bias)
        # slides: W_b only (d×d); code variant: [W_h ; W_b] (2d×d)
        self.W_rec = nn.Linear(d, (2 if code_variant else 1) * d, bias=bias)
        self.b_b = nn.Parameter(torch.ones(()))
        self.b_x = nn.Parameter(torch.ones(()))

    # ---- pieces -------------------------------------------------------------------------------
    def roles(self) -> Tuple[Tensor, Tensor]:
        """U, R: (d, N)."""
        return self.W_u(self.V).t(), self.W_r(self.V).t()

    def input_terms(self, x: Tensor, U: Tensor) -> Tuple[Tensor, Tensor]:
        """x (..., d_in) -> f̃_x (..., N), gate input W_x x (..., d)."""
        wx, gx = self.W_in(x).chunk(2, -1)
        return torch.relu(wx @ U + self.b_x), gx

    def recur(self, b_prev: Tensor, fx: Tensor, gx: Tensor, U: Tensor, R: Tensor) -> Tensor:
        """One recurrence step from precomputed input terms. b_prev (B, d) -> b_t (B, d)."""
        rec = self.W_rec(b_prev)
        if self.code_variant:
            hb, gb = rec.chunk(2, -1)
        else:
            hb, gb = b_prev, rec
        fb = torch.relu(hb @ U + self.b_b)                              # (B, N)
        s = (fb + fx).pow(2)
        f = s / s.sum(-1, keepdim=True).clamp_min(self.eps)             # (B, N)
        bt = f @ R.t()                                                  # (B, d)
        if not self.code_variant:
            bt = torch.tanh(bt)
        g = torch.sigmoid(gb + gx)
        return g * bt + (1 - g) * b_prev

    def step(self, x_t: Tensor, b_prev: Tensor) -> Tensor:
        """Plain single step: x_t (B, d_in), b_prev (B, d) -> (B, d)."""
        U, R = self.roles()
        fx, gx = self.input_terms(x_t, U)
        return self.recur(b_prev, fx, gx, U, R)

    # ---- sequence -----------------------------------------------------------------------------
    def forward(self, x: Tensor, b0: Optional[Tensor] = None, mask: Optional[Tensor] = None,
                fused: bool = True) -> Tuple[Tensor, Tensor]:
        """x (T, B, d_in), b0 (B, d), mask (T, B) bool (True = token) -> outputs (T, B, d), b_T (B, d).

        fused: input projections of all steps in one matmul, only the recurrence loops.
        fused=False calls ``step`` per time step (the reference path).
        """
        T, B, _ = x.shape
        b = x.new_zeros(B, self.hidden_size) if b0 is None else b0
        outs = []
        if fused:
            U, R = self.roles()
            fx, gx = self.input_terms(x, U)                             # (T, B, N), (T, B, d)
        for t in range(T):
            nb = self.recur(b, fx[t], gx[t], U, R) if fused else self.step(x[t], b)
            if mask is not None:
                m = mask[t].unsqueeze(-1).to(nb.dtype)
                b = m * nb + (1 - m) * b
                outs.append(m * nb)
            else:
                b = nb
                outs.append(nb)
        return torch.stack(outs, 0), b


def recurrent_param_count(module: nn.Module) -> int:
    """Parameters as the slides count them: recurrent weight matrices only (no biases,
    embeddings, classifier or V), all directions."""
    n = 0
    for mod in module.modules():
        if isinstance(mod, TPRUCell):
            n += sum(l.weight.numel() for l in (mod.W_u, mod.W_r, mod.W_in, mod.W_rec))
        elif isinstance(mod, (nn.LSTM, nn.GRU, nn.RNN)):
            n += sum(p.numel() for name, p in mod.named_parameters() if name.startswith("weight_"))
    return n


def slide_param_formula(cell: str, d: int, d_in: int, bidirectional: bool = True) -> int:
    """Per direction: TPRU 2·d·d_in + 3d², GRU 3d(d_in + d), LSTM 4d(d_in + d)."""
    per = {"tpru": 2 * d * d_in + 3 * d * d, "gru": 3 * d * (d_in + d), "lstm": 4 * d * (d_in + d)}[cell]
    return per * (2 if bidirectional else 1)


class BiRecurrent(nn.Module):
    """Uni/bidirectional recurrent encoder over (T, B, d_in) with a padding mask; the cell is
    TPRU or torch's LSTM/GRU so that baselines differ only in the cell.

    Returns outputs (T, B, dirs·d) with zeros at padding, and the final states (dirs, B, d).
    """

    def __init__(self, cell: str, input_size: int, hidden_size: int, num_roles: int = 32,
                 role_size: Optional[int] = None, bidirectional: bool = True,
                 code_variant: bool = False, fused: bool = True):
        super().__init__()
        self.cell_type, self.hidden_size, self.fused = cell, hidden_size, fused
        self.num_dirs = 2 if bidirectional else 1
        if cell == "tpru":
            self.cells = nn.ModuleList(
                TPRUCell(input_size, hidden_size, num_roles, role_size, code_variant=code_variant)
                for _ in range(self.num_dirs))
        elif cell in ("lstm", "gru"):
            cls = nn.LSTM if cell == "lstm" else nn.GRU
            self.rnn = cls(input_size, hidden_size, bidirectional=bidirectional)
        else:
            raise ValueError(f"--cell: unknown cell {cell!r} (choose tpru, lstm, gru)")

    @staticmethod
    def _reverse_padded(x: Tensor, lengths: Tensor, mask: Tensor) -> Tensor:
        """Reverse each sequence's tokens in place of their positions (works for any padding side)."""
        T = x.size(0)
        pos = mask.long().cumsum(0) - 1                                  # rank of each token
        # index of the token that goes to position t: the token with rank len-1-rank(t)
        order = torch.argsort((~mask).long() * 2 * T + torch.arange(T, device=x.device)[:, None], dim=0)
        # order[k] = position of k-th token (tokens first, then pads)
        rank_rev = (lengths[None, :] - 1 - pos).clamp_min(0)
        src = torch.gather(order, 0, rank_rev)
        src = torch.where(mask, src, torch.arange(T, device=x.device)[:, None].expand_as(src))
        return torch.gather(x, 0, src.unsqueeze(-1).expand_as(x))

    def forward(self, x: Tensor, mask: Tensor) -> Tuple[Tensor, Tensor]:
        """x (T, B, d_in), mask (T, B) bool, True = token."""
        lengths = mask.long().sum(0)
        if self.cell_type == "tpru":
            out_f, h_f = self.cells[0](x, mask=mask, fused=self.fused)
            if self.num_dirs == 1:
                return out_f, h_f.unsqueeze(0)
            xr = self._reverse_padded(x, lengths, mask)
            out_b, h_b = self.cells[1](xr, mask=mask, fused=self.fused)
            out_b = self._reverse_padded(out_b, lengths, mask)
            return torch.cat([out_f, out_b], -1), torch.stack([h_f, h_b], 0)
        # torch RNNs: move tokens to the front, pack, run, and put them back
        T = x.size(0)
        order = torch.argsort((~mask).long() * 2 * T + torch.arange(T, device=x.device)[:, None], dim=0)
        xs = torch.gather(x, 0, order.unsqueeze(-1).expand_as(x))
        packed = nn.utils.rnn.pack_padded_sequence(xs, lengths.clamp_min(1).cpu(), enforce_sorted=False)
        out, h = self.rnn(packed)
        h = h[0] if isinstance(h, tuple) else h
        out, _ = nn.utils.rnn.pad_packed_sequence(out, total_length=T)
        back = torch.empty_like(order).scatter_(0, order, torch.arange(T, device=x.device)[:, None].expand_as(order))
        out = torch.gather(out, 0, back.unsqueeze(-1).expand(-1, -1, out.size(-1)))
        return out * mask.unsqueeze(-1).to(out.dtype), h
