"""``--criterion mlm_sop`` equals a naive recomputation of the official MLM.SOP loss.

Reference (tencent-ailab/FOLNet folnet.py:856-872): CrossEntropyLoss (mean over the masked
tokens of the whole batch) + CrossEntropyLoss (mean over the pairs) of the pooled [CLS]
logits, weight 1.  Recomputed here from the full-vocabulary logits of every position and a
hand-written pooler (tanh(dense(u[CLS]))) and classifier, token by token in Python loops.
"""
import math

import numpy as np
import pytest
import torch

from folnet_helpers import build, single_thread  # noqa: F401
from nesyseq.plugins.criterions.mlm_sop import MlmSopCriterionConfig, MlmSopLoss
from nesyseq.plugins.tasks.mlm_sop import SOP_HEAD
from test_sop_pairs import dataset, dictionary


class _Task:
    def __init__(self, d):
        self.source_dictionary = self.target_dictionary = d


def batch_and_model(seed=0):
    d = dictionary(90)
    docs = [[6, 5, 7], [4, 4], [11], [3, 9, 2]]
    ds, _ = dataset(d, docs, tokens_per_sample=16, seed=seed, mask_prob=0.3)
    ds.set_epoch(1)
    batch = ds.collater([ds[i] for i in range(len(ds))])
    model, _ = build("folnet_tiny", d, dropout=0.0)
    model.register_classification_head(SOP_HEAD, num_classes=2)
    model.double().eval()
    return batch, model, d


def naive_loss(model, batch, pad, sop_weight=1.0):
    src = batch["net_input"]["src_tokens"]
    with torch.no_grad():
        logits, _ = model(src)  # (B, T, V): the LM head on every position
        feats, _ = model(src, features_only=True)  # (B, T, D1)
    head = model.classification_heads[SOP_HEAD]
    mlm_terms = []
    for b in range(src.size(0)):
        for t in range(src.size(1)):
            y = int(batch["target"][b, t])
            if y != pad:
                z = logits[b, t]
                mlm_terms.append(-(z[y] - torch.logsumexp(z, 0)).item())
    sop_terms = []
    for b in range(src.size(0)):
        pooler = model.encoder.pooler  # the official pooler belongs to the encoder (folnet.py:706-707)
        pooled = torch.tanh(pooler.weight @ feats[b, 0] + pooler.bias)
        z = head.out_proj.weight @ pooled + head.out_proj.bias  # seq_relationship
        y = int(batch["sop_target"][b])
        sop_terms.append(-(z[y] - torch.logsumexp(z, 0)).item())
    return sum(mlm_terms) / len(mlm_terms) + sop_weight * sum(sop_terms) / len(sop_terms), mlm_terms, sop_terms


@pytest.mark.parametrize("sop_weight", [1.0, 0.25])
def test_loss_equals_naive_official_formula(sop_weight):
    batch, model, d = batch_and_model()
    masked_per_row = batch["target"].ne(d.pad()).sum(1)
    assert len(set(masked_per_row.tolist())) > 1  # a mean per token differs from a mean of row means
    assert set(batch["sop_target"].tolist()) == {0, 1}
    crit = MlmSopLoss(MlmSopCriterionConfig(sop_weight=sop_weight), _Task(d))
    loss, sample_size, log = crit(model, batch)
    want, mlm_terms, sop_terms = naive_loss(model, batch, d.pad(), sop_weight)
    assert sample_size == 1
    assert loss.dtype == torch.float64
    assert math.isclose(loss.item(), want, rel_tol=1e-10)
    assert math.isclose(float(log["mlm_loss_sum"]), sum(mlm_terms), rel_tol=1e-10)
    assert math.isclose(float(log["sop_loss_sum"]), sum(sop_terms), rel_tol=1e-10)
    assert int(log["n_masked"]) == len(mlm_terms) and log["nsentences"] == len(sop_terms)


def test_gradients_reach_encoder_lm_head_and_sop_head():
    batch, model, d = batch_and_model(seed=3)
    crit = MlmSopLoss(MlmSopCriterionConfig(), _Task(d))
    loss, _, _ = crit(model, batch)
    loss.backward()
    head = model.classification_heads[SOP_HEAD]
    for name, p in [("sop out_proj", head.out_proj.weight), ("pooler", model.encoder.pooler.weight),
                    ("lm dense", model.encoder.lm_head.dense.weight),
                    ("type embedding", model.encoder.core.embed_types.weight)]:
        assert p.grad is not None and p.grad.abs().sum() > 0, name


def test_logged_metrics():
    batch, model, d = batch_and_model(seed=5)
    crit = MlmSopLoss(MlmSopCriterionConfig(), _Task(d))
    _, _, log = crit(model, batch)
    from fairseq import metrics
    with metrics.aggregate() as agg:
        MlmSopLoss.reduce_metrics([log, log])
    want, mlm_terms, sop_terms = naive_loss(model, batch, d.pad())
    vals = agg.get_smoothed_values()
    assert math.isclose(vals["loss"], round(want / math.log(2), 3), abs_tol=1e-3)
    assert math.isclose(vals["mlm_loss"], round(np.mean(mlm_terms) / math.log(2), 3), abs_tol=1e-3)
    assert math.isclose(vals["sop_loss"], round(np.mean(sop_terms) / math.log(2), 3), abs_tol=1e-3)
    assert 0 <= vals["sop_accuracy"] <= 100 and 0 <= vals["mlm_accuracy"] <= 100
