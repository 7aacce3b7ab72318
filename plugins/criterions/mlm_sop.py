"""``--criterion mlm_sop``: the official ``MLM.SOP`` pretraining loss (with ``--task mlm_sop``).

    L = mean over masked tokens of CE(MLM logits, original token)
      + w · mean over pairs of CE(SOP logits, swapped?)          w = --sop-weight (official: 1)

as ``FOLNetForPreTraining.forward`` (``folnet.py:856-872``): one ``CrossEntropyLoss`` (mean,
ignored positions left out) on the gathered masked positions, one on the pooled [CLS] logits,
summed with equal weight.  The MLM logits come from the model's LM head on the masked
positions only, the SOP logits from the ``sentence_order_head`` classification head on the
first token (dense + tanh, then 2-way linear).

Because L is already a per-batch mean, ``sample_size`` is 1: fairseq then averages the batch
losses over ``--update-freq`` and workers, as the official loop divides by the accumulation
steps and DDP averages over GPUs (``pretrain_folnet.py:182-194``).
Logged in base 2 like fairseq's ``masked_lm``: ``loss``, ``mlm_loss`` (per masked token),
``sop_loss`` (per pair); accuracies in %.
"""
import math
from dataclasses import dataclass, field

import torch
import torch.nn.functional as F
from fairseq import metrics
from fairseq.criterions import FairseqCriterion, register_criterion
from fairseq.dataclass import FairseqDataclass

from nesyseq.plugins.tasks.mlm_sop import SOP_HEAD


def upcast(x: torch.Tensor) -> torch.Tensor:
    """Half-precision logits -> fp32 for the softmax; fp32 / fp64 unchanged."""
    return x.float() if x.dtype in (torch.float16, torch.bfloat16) else x


@dataclass
class MlmSopCriterionConfig(FairseqDataclass):
    sop_weight: float = field(default=1.0, metadata={
        "help": "weight of the SOP loss added to the MLM loss (official: 1, folnet.py:872)"})


@register_criterion("mlm_sop", dataclass=MlmSopCriterionConfig)
class MlmSopLoss(FairseqCriterion):
    def __init__(self, cfg: MlmSopCriterionConfig, task):
        super().__init__(task)
        self.sop_weight = cfg.sop_weight

    def forward(self, model, sample, reduce=True):
        if "sop_target" not in sample:
            raise ValueError("--criterion mlm_sop needs batches with 'sop_target' (use --task mlm_sop)")
        target = sample["target"]  # (B, T): original token where masked, pad elsewhere
        masked = target.ne(self.padding_idx)  # (B, T)
        features, _ = model(**sample["net_input"], features_only=True)  # (B, T, D1)
        mlm_logits = model.encoder.output_layer(features, masked_tokens=masked)  # (M, V)
        sop_logits = model.classification_heads[SOP_HEAD](features)  # (B, 2)
        mlm_targets = target[masked]  # (M,)
        sop_targets = sample["sop_target"]  # (B,)
        mlm_sum = F.cross_entropy(upcast(mlm_logits), mlm_targets, reduction="sum")
        sop_sum = F.cross_entropy(upcast(sop_logits), sop_targets, reduction="sum")
        n_masked = masked.sum()
        bsz = sop_targets.numel()
        loss = mlm_sum / n_masked.clamp(min=1) + self.sop_weight * sop_sum / bsz
        logging_output = {
            "loss": loss.data,
            "mlm_loss_sum": mlm_sum.data,
            "sop_loss_sum": sop_sum.data,
            "n_masked": n_masked.data,
            "mlm_correct": (mlm_logits.argmax(-1) == mlm_targets).sum().data,
            "sop_correct": (sop_logits.argmax(-1) == sop_targets).sum().data,
            "ntokens": sample["ntokens"],
            "nsentences": bsz,
            "sample_size": 1,
        }
        return loss, 1, logging_output

    @staticmethod
    def reduce_metrics(logging_outputs) -> None:
        def total(key):
            return sum(float(log.get(key, 0)) for log in logging_outputs)

        sample_size, n_masked, pairs = total("sample_size"), total("n_masked"), total("nsentences")
        metrics.log_scalar("loss", total("loss") / max(sample_size, 1) / math.log(2), sample_size, round=3)
        metrics.log_scalar("mlm_loss", total("mlm_loss_sum") / max(n_masked, 1) / math.log(2), n_masked, round=3)
        metrics.log_scalar("sop_loss", total("sop_loss_sum") / max(pairs, 1) / math.log(2), pairs, round=3)
        metrics.log_scalar("mlm_accuracy", 100.0 * total("mlm_correct") / max(n_masked, 1), n_masked, round=1)
        metrics.log_scalar("sop_accuracy", 100.0 * total("sop_correct") / max(pairs, 1), pairs, round=1)

    @staticmethod
    def logging_outputs_can_be_summed() -> bool:
        return True
