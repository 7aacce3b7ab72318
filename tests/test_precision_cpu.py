"""One training step of every model family under CPU autocast (bf16, fp16) against fp32.

A GPU trains under ``--amp`` / ``--bf16``; the CPU suite cannot run CUDA autocast, but CPU
autocast takes the same mixed-precision code of ours (autocast-aware branches in FOLNet's lean
autograd Functions, the fp32 ``get_normalized_probs``, the symbolic softmaxes) with the CPU's
own op lists.  Each family: one forward + backward of a tiny model, same weights and batch, in
fp32 and under ``torch.autocast("cpu", dtype)``.  Checked: the loss and every gradient are
finite, the loss is within LOSS_RTOL of fp32's, the whole gradient vector within GRAD_RTOL
(relative L2 error) and each parameter tensor's gradient within TENSOR_RTOL of its own norm.  The tolerances are about 5x the largest error measured over the families
on one machine (bf16: loss 0.19%, gradient 3.9%; fp16: 0.04% and 0.55%; one exception below),
so a CPU whose kernels round differently still passes, while a mixed-precision path that drops
a gradient, overflows or leaves NaN does not (dropping the blocked binary bool's skip-weight
gradient in its autocast arm alone fails every FOLNet family here).
"""
import argparse

import pytest
import torch
import torch.nn.functional as F

from nesyseq import plugins  # noqa: F401  (registers the models)
from fairseq.data import Dictionary
from fairseq.models import ARCH_CONFIG_REGISTRY, ARCH_MODEL_REGISTRY

from qa_helpers import encode as qa_encode, make_dict as qa_dict

DTYPES = {"bf16": torch.bfloat16, "fp16": torch.float16}
LOSS_RTOL = {"bf16": 0.01, "fp16": 0.002}
GRAD_RTOL = {"bf16": 0.2, "fp16": 0.03}
# The Siamese TPRU classifier's bf16 gradient error measured 0.151 (worst tensor 0.98): its
# features include |u - v| of two bf16 encodings of similar formulas, a difference that bf16
# rounding of u and v dominates (fp16, 8x finer: 0.002 and 0.03)
GRAD_RTOL_FAMILY = {("tpru_classifier", "bf16"): 0.6}
TENSOR_RTOL_FAMILY = {("tpru_classifier", "bf16"): 3.0}
# Every parameter tensor's gradient against its own norm, floored at 1e-4 of the total: the worst
# measured was 0.14 (bf16, stpr's λ) and 0.05 (fp16) outside the classifier.  A gradient an
# autocast arm drops (relative error 1) fails it unless its share of the total is under 1e-4.
TENSOR_RTOL = 0.7
TENSOR_FLOOR = 1e-4
FP16_LOSS_SCALE = 128.0


class _Task:
    def __init__(self, d):
        self.source_dictionary = self.target_dictionary = d


def _dictionary(n=12):
    d = Dictionary()
    for i in range(n):
        d.add_symbol(chr(ord("a") + i))
    return d


def _build(arch, d, **overrides):
    args = argparse.Namespace(arch=arch, **overrides)
    ARCH_CONFIG_REGISTRY[arch](args)
    cls = ARCH_MODEL_REGISTRY[arch]
    return cls.build_model(cls.__dataclass.from_namespace(args), _Task(d))


def _tokens(d, B, T, g):
    return torch.randint(d.nspecial, len(d), (B, T), generator=g)


def _nll(model, net_output, target):
    lprobs = model.get_normalized_probs(net_output, log_probs=True)
    return F.nll_loss(lprobs.reshape(-1, lprobs.size(-1)).float(), target.reshape(-1))


def _seq2seq(arch, **overrides):
    def make(g):
        d = _dictionary()
        model = _build(arch, d, **overrides)
        src, prev, tgt = _tokens(d, 2, 6, g), _tokens(d, 2, 5, g), _tokens(d, 2, 5, g)
        prev[:, 0] = d.eos()
        inputs = dict(src_tokens=src, src_lengths=torch.tensor([6, 6]), prev_output_tokens=prev)
        return model, inputs, lambda m, out: _nll(m, out, tgt)
    return make


def _folnet_encoder(g):
    d = _dictionary()
    model = _build("folnet_tiny", d)
    x = _tokens(d, 2, 6, g)
    x[:, 0] = d.bos()
    tgt = _tokens(d, 2, 6, g)
    return model, dict(src_tokens=x), lambda m, out: F.cross_entropy(out[0].reshape(-1, out[0].size(-1)).float(),
                                                                      tgt.reshape(-1))


def _folnet_lm(g):
    d = _dictionary()
    model = _build("folnet_lm_tiny", d)
    x, tgt = _tokens(d, 2, 6, g), _tokens(d, 2, 6, g)
    return model, dict(src_tokens=x), lambda m, out: _nll(m, out, tgt)


def _qa(arch, **overrides):
    def make(g):
        d = qa_dict()
        model = _build(arch, d, **overrides)
        src = qa_encode(d, ["mary moved to the kitchen . john moved to the garden . where is mary ?",
                            "john moved to the office . where is john ?"])
        tgt = torch.tensor([[d.index("kitchen"), d.eos()], [d.index("office"), d.eos()]])
        prev = torch.tensor([[d.eos(), tgt[0, 0]], [d.eos(), tgt[1, 0]]])
        inputs = dict(src_tokens=src, src_lengths=src.ne(d.pad()).sum(1), prev_output_tokens=prev)
        return model, inputs, lambda m, out: _nll(m, out, tgt)
    return make


def _tpru_classifier(g):
    from nesyseq.plugins.models.tpru_classifier import TPRUClassifier, TPRUClassifierConfig
    from nesyseq.plugins.tasks.entailment import EntailmentConfig, EntailmentPairsTask
    task = EntailmentPairsTask.setup_task(EntailmentConfig(data="", seed=0))
    model = TPRUClassifier(TPRUClassifierConfig(cell="tpru", num_roles=8), task.dictionary)
    a = torch.stack([task.encode("((a&b)>c)"), task.encode("(a|(b&c))")])
    b = torch.stack([task.encode("(a>c)"), task.encode("(c|a)")])
    y = torch.tensor([1.0, 0.0])
    return model, dict(a_tokens=a, b_tokens=b), lambda m, out: F.binary_cross_entropy_with_logits(out.float(), y)


FAMILIES = {
    "tp_transformer": _seq2seq("tp_transformer_tiny"),
    "folnet_encoder": _folnet_encoder,
    "folnet_causal_lm": _folnet_lm,
    "folnet_transformer": _seq2seq("folnet_transformer_tiny"),
    "memnet": _qa("memnet_babi", embed_dim=8, hops=2, max_story=10, max_words=12),
    "smn": _qa("smn_babi", embed_dim=8, hops=2, max_story=10, max_words=12),
    "tpr_rnn": _qa("tpr_rnn_small"),
    "stpr": _qa("stpr_small"),
    "tpru_seq2seq": _seq2seq("tpru_tiny"),
    "tpru_classifier": _tpru_classifier,
}


def _step(model, inputs, loss_fn, dtype):
    """loss and the gradient of every parameter tensor; the same dropout masks in every call (the
    same seed, and the masks are drawn by the same ops in the same order under autocast)."""
    torch.manual_seed(2)
    model.zero_grad(set_to_none=True)
    with torch.autocast("cpu", dtype=dtype or torch.bfloat16, enabled=dtype is not None):
        loss = loss_fn(model, model(**inputs))
    # fp16 trains with a loss scale (fairseq's --fp16-init-scale default, 128; --amp's GradScaler),
    # without which the smallest gradients underflow fp16's range
    scale = FP16_LOSS_SCALE if dtype == torch.float16 else 1.0
    (loss * scale).backward()
    grads = {n: (p.grad.float() / scale if p.grad is not None else torch.zeros(p.shape))
             for n, p in model.named_parameters() if p.requires_grad}
    return loss.detach().float(), grads


def _compare(family, name):
    """(loss relative error, whole-gradient relative L2 error, worst tensor's relative error, its name)."""
    torch.manual_seed(0)
    model, inputs, loss_fn = FAMILIES[family](torch.Generator().manual_seed(1))
    model.float().train()
    ref_loss, ref = _step(model, inputs, loss_fn, None)
    loss, got = _step(model, inputs, loss_fn, DTYPES[name])
    total = torch.cat([g.flatten() for g in ref.values()]).norm()
    assert torch.isfinite(ref_loss) and total > 0, family
    assert torch.isfinite(loss) and all(bool(torch.isfinite(g).all()) for g in got.values()), (family, name)
    diff = torch.cat([(got[n] - ref[n]).flatten() for n in ref]).norm()
    # each tensor against its own norm, floored at TENSOR_FLOOR of the total gradient's norm
    per = {n: float((got[n] - ref[n]).norm() / max(float(ref[n].norm()), TENSOR_FLOOR * float(total)))
           for n in ref}
    worst = max(per, key=per.get)
    return abs(float(loss - ref_loss)) / abs(float(ref_loss)), float(diff / total), per[worst], worst


@pytest.fixture(autouse=True)
def _one_thread():
    n = torch.get_num_threads()
    torch.set_num_threads(1)
    yield
    torch.set_num_threads(n)


@pytest.mark.parametrize("name", list(DTYPES))
@pytest.mark.parametrize("family", list(FAMILIES))
def test_autocast_step_tracks_fp32(family, name):
    loss_err, grad_err, tensor_err, worst = _compare(family, name)
    print(f"{family} {name}: loss rel error {loss_err:.2e}, gradient rel L2 error {grad_err:.2e}, "
          f"worst tensor {tensor_err:.2e} ({worst})")
    assert loss_err <= LOSS_RTOL[name], (family, name, loss_err)
    assert grad_err <= GRAD_RTOL_FAMILY.get((family, name), GRAD_RTOL[name]), (family, name, grad_err)
    assert tensor_err <= TENSOR_RTOL_FAMILY.get((family, name), TENSOR_RTOL), (family, name, worst, tensor_err)
