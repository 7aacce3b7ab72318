"""``--optimizer amsgrad``: torch Adam with amsgrad=True (fairseq's ``adam`` has no amsgrad switch).

The optimiser of Evans et al.'s logical-entailment code (``main_logical.py``, Adam with amsgrad,
lr 1e-3), which ``--task entailment_pairs`` with ``--arch tpru_classifier`` reproduces.
"""
import ast
from dataclasses import dataclass, field
from typing import List

import torch
from fairseq.dataclass import FairseqDataclass
from fairseq.optim import FairseqOptimizer, register_optimizer
from omegaconf import II


@dataclass
class AmsgradConfig(FairseqDataclass):
    adam_betas: str = field(default="(0.9, 0.999)", metadata={"help": "betas"})
    adam_eps: float = field(default=1e-8, metadata={"help": "epsilon"})
    weight_decay: float = field(default=0.0, metadata={"help": "L2 weight decay (torch Adam semantics)"})
    lr: List[float] = II("optimization.lr")


@register_optimizer("amsgrad", dataclass=AmsgradConfig)
class Amsgrad(FairseqOptimizer):
    def __init__(self, cfg, params):
        super().__init__(cfg)
        betas = ast.literal_eval(cfg.adam_betas) if isinstance(cfg.adam_betas, str) else tuple(cfg.adam_betas)
        self._optimizer = torch.optim.Adam(params, lr=cfg.lr[0], betas=betas, eps=cfg.adam_eps,
                                           weight_decay=cfg.weight_decay, amsgrad=True)

    @property
    def optimizer_config(self):
        return {"lr": self.cfg.lr[0], "weight_decay": self.cfg.weight_decay, "amsgrad": True}
