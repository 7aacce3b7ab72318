"""``--arch tpru_classifier``: the authors' "plain" sentence-pair architecture (``models/plain.py``).

    e_A, e_B = Embed(A), Embed(B)                       # characters, (T, B, d_in)
    H_A = BiRNN(e_A), H_B = BiRNN(e_B)                  # one shared (Siamese) encoder, (T, B, 2d)
    u = max_t H_A,  v = max_t H_B                       # max-pool over real tokens, (B, 2d)
    logit = W_2 ReLU(W_1 [u; v; |u − v|; u ⊙ v] + c_1) + c_2    # W_1: (d, 8d), W_2: (1, d)

``--cell {tpru,lstm,gru}`` swaps only the cell (plugins/layers/tpru.py ``BiRecurrent``).
"""

from dataclasses import dataclass, field

import torch
from fairseq.dataclass import ChoiceEnum, FairseqDataclass
from fairseq.models import BaseFairseqModel, register_model
from torch import nn

from nesyseq.plugins.layers.tpru import BiRecurrent, recurrent_param_count


@dataclass
class TPRUClassifierConfig(FairseqDataclass):
    cell: ChoiceEnum(["tpru", "lstm", "gru"]) = field(default="tpru", metadata={"help": "recurrent cell"})
    embed_dim: int = field(default=64, metadata={"help": "character embedding size d_in"})
    hidden_dim: int = field(default=64, metadata={"help": "state size d per direction"})
    num_roles: int = field(default=32, metadata={"help": "TPRU role vectors N"})
    role_dim: int = field(default=0, metadata={"help": "TPRU role size (0: = hidden_dim)"})
    tpru_code_variant: bool = field(default=False, metadata={
        "help": "TPRU as in the authors' models/TPRU.py instead of the slides (docs/tpru.md)"})
    unfused: bool = field(default=False, metadata={"help": "step-by-step TPRU (reference path)"})
    dropout: float = field(default=0.0, metadata={"help": "dropout on embeddings and features"})


@register_model("tpru_classifier", dataclass=TPRUClassifierConfig)
class TPRUClassifier(BaseFairseqModel):
    def __init__(self, cfg, dictionary):
        super().__init__()
        self.pad = dictionary.pad()
        d = cfg.hidden_dim
        self.embed = nn.Embedding(len(dictionary), cfg.embed_dim, padding_idx=self.pad)
        self.encoder = BiRecurrent(str(cfg.cell), cfg.embed_dim, d, num_roles=cfg.num_roles,
                                   role_size=cfg.role_dim or None, bidirectional=True,
                                   code_variant=cfg.tpru_code_variant, fused=not cfg.unfused)
        self.mlp = nn.Sequential(nn.Linear(8 * d, d), nn.ReLU(), nn.Linear(d, 1))
        self.dropout = nn.Dropout(cfg.dropout)

    @classmethod
    def build_model(cls, cfg, task):
        model = cls(cfg, task.source_dictionary)
        total = sum(p.numel() for p in model.parameters())
        print(f"tpru_classifier: cell={cfg.cell} recurrent params (slides' count)={recurrent_param_count(model)} "
              f"total trainable={total}", flush=True)
        return model

    def encode(self, tokens):
        """tokens (B, T) right/left padded -> (B, 2d) max-pooled over real tokens."""
        mask = tokens.ne(self.pad).t()                                  # (T, B)
        x = self.dropout(self.embed(tokens)).transpose(0, 1)            # (T, B, d_in)
        h, _ = self.encoder(x, mask)                                    # (T, B, 2d)
        return h.masked_fill(~mask.unsqueeze(-1), float("-inf")).max(0).values

    def forward(self, a_tokens, b_tokens, **unused):
        # one encoder call for A and B (shared weights), padded to a common length
        T = max(a_tokens.size(1), b_tokens.size(1))
        pad = lambda t: nn.functional.pad(t, (0, T - t.size(1)), value=self.pad)
        uv = self.encode(torch.cat([pad(a_tokens), pad(b_tokens)], 0))
        u, v = uv.chunk(2, 0)
        feats = torch.cat([u, v, (u - v).abs(), u * v], -1)            # (B, 8d)
        return self.mlp(self.dropout(feats)).squeeze(-1)               # (B,) logits

    def max_positions(self):
        return (100000, 100000)

