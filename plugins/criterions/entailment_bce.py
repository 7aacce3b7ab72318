"""``--criterion entailment_bce``: binary cross-entropy on one logit per sentence pair (the authors'
``main_logical.py:80-81``), logging accuracy (logit > 0 means "A entails B")."""
import torch.nn.functional as F
from fairseq import metrics
from fairseq.criterions import FairseqCriterion, register_criterion


@register_criterion("entailment_bce")
class EntailmentBCECriterion(FairseqCriterion):
    def forward(self, model, sample, reduce=True):
        logits = model(**sample["net_input"]).view(-1).float()
        target = sample["target"].float()
        loss = F.binary_cross_entropy_with_logits(logits, target, reduction="sum")
        n = target.numel()
        ncorrect = ((logits > 0).float() == target).sum()
        return loss, n, {"loss": loss.data, "ntokens": sample["ntokens"], "nsentences": n,
                         "sample_size": n, "ncorrect": ncorrect.data}

    @staticmethod
    def reduce_metrics(logging_outputs) -> None:
        loss = sum(log.get("loss", 0) for log in logging_outputs)
        n = sum(log.get("sample_size", 0) for log in logging_outputs)
        nc = sum(log.get("ncorrect", 0) for log in logging_outputs)
        metrics.log_scalar("loss", loss / max(n, 1), n, round=4)
        metrics.log_scalar("accuracy", 100.0 * nc / max(n, 1), n, round=2)

    @staticmethod
    def logging_outputs_can_be_summed() -> bool:
        return True
