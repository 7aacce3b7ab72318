"""FOLNet decoders (appendix A.5), shared by ``folnet_lm`` and ``folnet_transformer``.

Decoder-only (``cross=False``), paper Table 5 / Figure 4(b):
    causal LM  : binary atoms u(x, y), y <= x; mask kind ``causal``
    prefix LM  : tokens [prefix ; target], bidirectional inside the prefix,
                 causal on the target; mask kind ``prefix``; the prefix and the
                 target are two segments of the relative-distance atoms.
Encoder-decoder (``cross=True``), Figure 4(c,d): the decoder binary atoms
are u(x, y) for x in T and y in I ∪ T (columns [encoder ; decoder]); the
input atoms of the I columns are the cross-segment distance id.

Incremental decoding keeps, per layer, the past column-side premises/kernels
and trans premise rows (see ``FolnetLayer``) plus the padding, positions and
segments of all past tokens; each step computes only the newest row.
"""
from __future__ import annotations

from typing import Any, Dict, List, Optional

import torch
import torch.nn as nn
import torch.nn.functional as F
from torch import Tensor

from fairseq.models import FairseqIncrementalDecoder

from nesyseq.plugins.layers.folnet_layer import FolnetStack, layer_norm
from nesyseq.plugins.layers.folnet_masks import encdec_mask, real_positions, self_mask
from nesyseq.plugins.layers.folnet_rpe import RelativeDistanceEmbedding, cross_id, relative_distance_ids
from nesyseq.plugins.layers.symbolic import ContextSymbols, lookup_phi, mixture_normalized_probs, symbolic_output_probs
from nesyseq.plugins.models.folnet_common import stack_kwargs

STATE_KEY = "folnet_state"


class FolnetDecoder(FairseqIncrementalDecoder):
    def __init__(self, cfg, dictionary, embed_tokens: nn.Embedding, layers: int, cross: bool = False,
                 max_positions: int = 1024, symbolic: bool = False, symbolic_output: bool = False):
        """``symbolic``: the stack carries the symbolic stream (folnet_transformer with
        --symbolic-embeddings / --symbolic-output); ``symbolic_output``: the output is the mixture."""
        super().__init__(dictionary)

        self.cross = cross
        self.embed_tokens = embed_tokens
        self.padding_idx = embed_tokens.padding_idx
        # input embeddings as in the encoder: LN (non-affine, eps 1e-12) + dropout, no sqrt(D1) scale
        self.ln_u1, self.ln_u2 = layer_norm(cfg.folnet_unary_dim), layer_norm(cfg.folnet_binary_dim)
        self.dropout = cfg.dropout
        self.rpe = RelativeDistanceEmbedding(cfg.folnet_rpe_clip, cfg.folnet_binary_dim)
        enc_dim = cfg.folnet_unary_dim if cross else None
        enc_binary_dim = cfg.folnet_binary_dim if cross else None
        kwargs = stack_kwargs(cfg, layers, enc_dim=enc_dim, enc_binary_dim=enc_binary_dim, symbolic=symbolic)
        self.symbolic = kwargs["symbolic"]
        if self.symbolic and not cross:
            raise ValueError("--symbolic-embeddings/--symbolic-output are for the encoder-decoder "
                             "(folnet_transformer): φ numbers the source's words")
        self.stack = FolnetStack(**kwargs)
        self.max_pos = max_positions
        self.alpha: Any = None  # SymbolAlpha, set by folnet_transformer's build_model when symbolic
        self.symbolic_output = symbolic_output
        if self.symbolic_output:
            self.beta_logit = nn.Parameter(torch.zeros(()))  # β = 1/2 at init

    # ------------------------------------------------------------------ helpers
    def _embed(self, tokens: Tensor) -> Tensor:
        return F.dropout(self.ln_u1(self.embed_tokens(tokens)), self.dropout, self.training)

    def _layer_caches(self, state: Dict[str, Tensor]) -> List[Dict[str, Tensor]]:
        caches = [dict() for _ in self.stack.layers]
        for k, v in state.items():
            if k.startswith("L"):
                i, name = k[1:].split(".", 1)
                caches[int(i)][name] = v
        return caches

    @staticmethod
    def _store_caches(state: Dict[str, Tensor], caches: List[Dict[str, Tensor]]):
        for i, c in enumerate(caches):
            for name, v in c.items():
                state[f"L{i}.{name}"] = v

    # ------------------------------------------------------------------ fairseq API
    def forward(self, prev_output_tokens, encoder_out=None, incremental_state=None, features_only=False,
                src_prefix: Optional[Tensor] = None, return_all_hiddens: bool = False, **unused):
        x, extra = self.extract_features(prev_output_tokens, encoder_out, incremental_state, src_prefix,
                                         return_all_hiddens)
        if not features_only:
            x = self.output_layer(x)
            if self.symbolic_output:
                # p = β softmax(E^T u1) + (1−β) B_φ softmax(ŝ), fp32 probabilities
                symbols = ContextSymbols(encoder_out["slot_vocab"][0], encoder_out["slot_mask"][0])
                x = symbolic_output_probs(x, extra["symbolic_state"][0], symbols, self.beta_logit)
        return x, extra

    def get_normalized_probs(self, net_output, log_probs: bool, sample=None):
        """With --symbolic-output the decoder already returns the mixture p."""
        if not self.symbolic_output:
            return super().get_normalized_probs(net_output, log_probs, sample)
        return mixture_normalized_probs(net_output[0], log_probs)

    def output_layer(self, features):
        return F.linear(features, getattr(self.embed_tokens, "effective_weight", self.embed_tokens.weight))

    def max_positions(self):
        return self.max_pos

    def extract_features(self, prev_output_tokens, encoder_out=None, incremental_state=None,
                         src_prefix: Optional[Tensor] = None, return_all_hiddens: bool = False):
        if src_prefix is None and encoder_out is not None and not self.cross and "src_prefix" in encoder_out:
            src_prefix = encoder_out["src_prefix"][0]
        state = self.get_incremental_state(incremental_state, STATE_KEY) if incremental_state is not None else None
        enc = None
        if self.cross:
            enc = {"u1": encoder_out["folnet_u1"][0], "u2": encoder_out["folnet_u2"][0]}
            enc_pad = encoder_out["folnet_padding"][0]
        if state is None:  # full pass (training, scoring, or the first generation step)
            tokens = prev_output_tokens
            P = 0
            if src_prefix is not None:
                P = src_prefix.size(1)
                tokens = torch.cat([src_prefix, prev_output_tokens], dim=1)
            B, T = tokens.shape
            pad = tokens.eq(self.padding_idx)
            pos = real_positions(pad)
            seg = torch.zeros_like(tokens)
            seg[:, P:] = 1 if src_prefix is not None else 0
            offset, rows = 0, T
            new_tokens, new_pos, new_seg = tokens, pos, seg
            prefix_lengths = torch.full((B,), P, dtype=torch.long, device=tokens.device) if src_prefix is not None else None
            caches = [dict() for _ in self.stack.layers] if incremental_state is not None else None
        else:
            new_tokens = prev_output_tokens[:, -1:]
            old_pad = state["pad"]
            new_pad = new_tokens.eq(self.padding_idx)
            pad = torch.cat([old_pad, new_pad], dim=1)
            new_pos = (~old_pad).long().sum(dim=1, keepdim=True) - new_pad.long()
            pos = torch.cat([state["pos"], new_pos], dim=1)
            new_seg = state["seg"][:, -1:]
            seg = torch.cat([state["seg"], new_seg], dim=1)
            offset, rows, P = old_pad.size(1), 1, 0
            prefix_lengths = state.get("prefix_lengths")
            caches = self._layer_caches(state)

        if self.cross:
            mask = encdec_mask(pad, enc_pad, query_offset=offset, num_rows=rows)
            Ti = enc_pad.size(1)
            ids_self = relative_distance_ids(new_pos, pos, self.rpe.clip)
            ids = torch.cat([ids_self.new_full((ids_self.size(0), rows, Ti), cross_id(self.rpe.clip)), ids_self], dim=-1)
        else:
            kind = "prefix" if prefix_lengths is not None else "causal"
            mask = self_mask(kind, pad, query_offset=offset, num_rows=rows, prefix_lengths=prefix_lengths)
            ids = relative_distance_ids(new_pos, pos, self.rpe.clip, new_seg, seg)
        u1 = self._embed(new_tokens)  # (B, X, D1)
        u2 = F.dropout(self.ln_u2(self.rpe(ids)), self.dropout, self.training)
        u2 = u2 * mask.pair_ok[..., None].to(u1.dtype)  # (B, X, A, D2)
        s = None
        if self.symbolic:
            # decoder inputs that are context words are looked up through the source's φ
            symbols = ContextSymbols(encoder_out["slot_vocab"][0], encoder_out["slot_mask"][0])
            enc["s"] = encoder_out["folnet_sym"][0]
            s = self.alpha(new_tokens, lookup_phi(new_tokens, symbols), symbols.m, u1.dtype)  # (B, X, m)
            u1, u2, hiddens, s = self.stack(u1, u2, mask, caches=caches, enc=enc,
                                            return_all_hiddens=return_all_hiddens, s=s,
                                            slot_mask=symbols.slot_mask)
        else:
            u1, u2, hiddens = self.stack(u1, u2, mask, caches=caches, enc=enc,
                                         return_all_hiddens=return_all_hiddens)

        if incremental_state is not None:
            new_state = {"pad": pad, "pos": pos, "seg": seg}
            if prefix_lengths is not None:
                new_state["prefix_lengths"] = prefix_lengths
            self._store_caches(new_state, caches)
            self.set_incremental_state(incremental_state, STATE_KEY, new_state)
        extra = {"inner_states": hiddens, "binary_atoms": u2, "attn": [None]}
        if s is not None:
            extra["symbolic_state"] = [s]  # (B, X, m), slot-normalised
        if state is None and P:
            extra["prefix_features"] = u1[:, :P]
            u1 = u1[:, P:]  # outputs for the target positions only
        return u1, extra

    def reorder_incremental_state(self, incremental_state, new_order):
        state = self.get_incremental_state(incremental_state, STATE_KEY)
        if state is None:
            return
        state = {k: v.index_select(0, new_order) for k, v in state.items()}
        self.set_incremental_state(incremental_state, STATE_KEY, state)
