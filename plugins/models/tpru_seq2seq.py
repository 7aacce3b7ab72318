"""``--arch tpru`` (presets ``tpru_tiny``, ``tpru_base``): a TPRU encoder-decoder for fairseq's
``translation`` task, the analogue of fairseq's ``lstm`` arch. This model is our extension: the slides'
third task is language modelling, not translation.

    encoder:  H = BiTPRU(Embed(src))                         (S, B, 2d) → proj → (S, B, d)
    decoder:  c_0 = 0, b_0 = W_init [b_fwd,S ; b_bwd,1]       (B, d)
              b_t = TPRU([Embed(y_{t−1}); c_{t−1}], b_{t−1})  input feeding
              c_t = Σ_s softmax_s(b_tᵀ H_s) H_s               dot-product attention over source
              logits_t = W_out tanh(W_c [b_t; c_t])
Incremental state: (b_{t−1}, c_{t−1}); ``reorder_incremental_state`` selects beams.
"""
from dataclasses import dataclass, field

import torch
from fairseq.dataclass import FairseqDataclass
from fairseq.models import (FairseqEncoder, FairseqEncoderDecoderModel, FairseqIncrementalDecoder,
                            register_model, register_model_architecture)
from torch import nn

from nesyseq.plugins.layers.tpru import BiRecurrent, TPRUCell, recurrent_param_count
from nesyseq.plugins.models.config_defaults import model_config, preset


@dataclass
class TPRUSeq2SeqConfig(FairseqDataclass):
    embed_dim: int = field(default=256, metadata={"help": "embedding size"})
    hidden_dim: int = field(default=256, metadata={"help": "TPRU state size d"})
    num_roles: int = field(default=64, metadata={"help": "TPRU role vectors N"})
    dropout: float = field(default=0.1, metadata={"help": "dropout on embeddings and outputs"})
    share_decoder_input_output_embed: bool = field(default=False, metadata={
        "help": "tie decoder input and output embeddings (needs embed_dim == hidden_dim)"})


class TPRUEncoder(FairseqEncoder):
    def __init__(self, cfg, dictionary):
        super().__init__(dictionary)
        d = cfg.hidden_dim
        self.pad = dictionary.pad()
        self.embed = nn.Embedding(len(dictionary), cfg.embed_dim, padding_idx=self.pad)
        self.rnn = BiRecurrent("tpru", cfg.embed_dim, d, num_roles=cfg.num_roles)
        self.proj = nn.Linear(2 * d, d)
        self.init = nn.Linear(2 * d, d)
        self.dropout = nn.Dropout(cfg.dropout)

    def forward(self, src_tokens, src_lengths=None, **unused):
        mask = src_tokens.ne(self.pad).t()                                 # (S, B)
        h, last = self.rnn(self.dropout(self.embed(src_tokens)).transpose(0, 1), mask)
        return {"encoder_out": [self.proj(h)],                            # (S, B, d)
                "encoder_padding_mask": [~mask],                          # (S, B) True = pad
                "init_state": [torch.tanh(self.init(torch.cat([last[0], last[1]], -1)))]}

    def reorder_encoder_out(self, encoder_out, new_order):
        return {"encoder_out": [encoder_out["encoder_out"][0].index_select(1, new_order)],
                "encoder_padding_mask": [encoder_out["encoder_padding_mask"][0].index_select(1, new_order)],
                "init_state": [encoder_out["init_state"][0].index_select(0, new_order)]}

    def max_positions(self):
        return int(1e5)


class TPRUDecoder(FairseqIncrementalDecoder):
    def __init__(self, cfg, dictionary):
        super().__init__(dictionary)
        d = cfg.hidden_dim
        self.hidden_dim = d
        self.embed = nn.Embedding(len(dictionary), cfg.embed_dim, padding_idx=dictionary.pad())
        self.cell = TPRUCell(cfg.embed_dim + d, d, num_roles=cfg.num_roles)
        self.combine = nn.Linear(2 * d, cfg.embed_dim)
        self.out = nn.Linear(cfg.embed_dim, len(dictionary), bias=False)
        if cfg.share_decoder_input_output_embed:
            self.out.weight = self.embed.weight
        self.dropout = nn.Dropout(cfg.dropout)

    def forward(self, prev_output_tokens, encoder_out=None, incremental_state=None, **unused):
        x, extra = self.extract_features(prev_output_tokens, encoder_out, incremental_state)
        return self.out(x), extra

    def extract_features(self, prev_output_tokens, encoder_out=None, incremental_state=None, **unused):
        H = encoder_out["encoder_out"][0]                                  # (S, B, d)
        pad_mask = encoder_out["encoder_padding_mask"][0]                  # (S, B)
        cached = self.get_incremental_state(incremental_state, "state") if incremental_state is not None else None
        if incremental_state is not None:
            prev_output_tokens = prev_output_tokens[:, -1:]
        if cached is not None:
            b, c = cached["b"], cached["c"]
        else:
            b = encoder_out["init_state"][0]
            c = H.new_zeros(b.shape)
        emb = self.dropout(self.embed(prev_output_tokens)).transpose(0, 1)  # (T, B, e)
        U, R = self.cell.roles()
        outs, attns = [], []
        for t in range(emb.size(0)):
            fx, gx = self.cell.input_terms(torch.cat([emb[t], c], -1), U)
            b = self.cell.recur(b, fx, gx, U, R)
            score = (H * b.unsqueeze(0)).sum(-1).masked_fill(pad_mask, float("-inf"))  # (S, B)
            a = torch.softmax(score.float(), 0).type_as(H)
            c = (a.unsqueeze(-1) * H).sum(0)
            outs.append(torch.tanh(self.combine(torch.cat([b, c], -1))))
            attns.append(a.t())
        if incremental_state is not None:
            self.set_incremental_state(incremental_state, "state", {"b": b, "c": c})
        x = self.dropout(torch.stack(outs, 0)).transpose(0, 1)             # (B, T, e)
        return x, {"attn": [torch.stack(attns, 1)]}                        # attn (B, T, S)

    def output_layer(self, x):
        return self.out(x)

    def reorder_incremental_state(self, incremental_state, new_order):
        cached = self.get_incremental_state(incremental_state, "state")
        if cached is not None:
            self.set_incremental_state(incremental_state, "state",
                                       {k: v.index_select(0, new_order) for k, v in cached.items()})

    def max_positions(self):
        return int(1e5)


@register_model("tpru", dataclass=TPRUSeq2SeqConfig)
class TPRUSeq2Seq(FairseqEncoderDecoderModel):
    @classmethod
    def build_model(cls, cfg, task):
        cfg = model_config(cfg, TPRUSeq2SeqConfig)
        model = cls(TPRUEncoder(cfg, task.source_dictionary), TPRUDecoder(cfg, task.target_dictionary))
        print(f"tpru: recurrent params (slides' count)={recurrent_param_count(model)} "
              f"total={sum(p.numel() for p in model.parameters())}", flush=True)
        return model


@register_model_architecture("tpru", "tpru_tiny")
def tpru_tiny(cfg):
    preset(cfg, embed_dim=64, hidden_dim=64, num_roles=16)


@register_model_architecture("tpru", "tpru_base")
def tpru_base(cfg):
    preset(cfg, embed_dim=512, hidden_dim=512, num_roles=128)
