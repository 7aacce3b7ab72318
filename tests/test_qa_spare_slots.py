"""stpr's --symbolic-spare-slots: k more symbol slots that no word fills, in training only.

The reference is a path that shares no code with the option: the same weights in eval mode on the
same stories, with k fresh words appended to each question, words whose semantic rows are zero and
whose α is exactly 0 (logit -1e4 underflows in float64). Each fresh word takes a slot of its own
and puts nothing into any sentence, which is what an empty slot is. The two models must then agree
on every sentence input, on β and on the semantic output; on the symbolic output they differ only
in where the empty slots' mass goes (the pad word, against the fresh words).
"""
import argparse

import pytest
import torch

from nesyseq.plugins.models.qa_tpr import SymbolicTPRModel, TPRConfig
from tests.qa_helpers import FakeTask, encode, make_dict, record_role_inputs

STORIES = ["mary moved to the kitchen . john moved to the garden . where is john ?",
           "sandra moved to the garden . mary moved to the office . where is mary ?",
           "john moved to the kitchen . where is john ?"]
FRESH = ["w1", "w2", "w3"]


def _build(**cfg):
    torch.manual_seed(0)
    d = make_dict()
    for w in FRESH:
        d.add_symbol(w)
    model = SymbolicTPRModel.build_model(TPRConfig.from_namespace(argparse.Namespace(
        embed_dim=6, hidden_dim=7, max_words=8, **cfg)), FakeTask(d)).double()
    with torch.no_grad():
        for p in model.parameters():
            p.add_(0.3 * torch.randn_like(p))
        fresh = torch.tensor([d.index(w) for w in FRESH])
        model.encoder.A.semantic.weight[fresh] = 0.0
        model.encoder.A.alpha_logit[fresh] = -1e4
    return model, d


def _run(model, src):
    """The symbolic input of every role MLP and the encoder's output (its parts included)."""
    return record_role_inputs(model.encoder, lambda: model.encoder(src))


@pytest.mark.parametrize("cfg", [{}, dict(symbolic_positions_per_role=True)])
def test_empty_slots_equal_fresh_words_that_say_nothing(cfg, monkeypatch):
    k = len(FRESH)
    model, d = _build(symbolic_spare_slots=k, **cfg)
    src = encode(d, STORIES)
    ref_src = encode(d, [s.replace(" ?", " " + " ".join(FRESH) + " ?") for s in STORIES])
    ref_inputs, ref = _run(model.eval(), ref_src)
    _, plain = _run(model.eval(), src)                  # eval: no empty slots
    monkeypatch.setattr(type(model.encoder), "_spare_slots", lambda self: k)
    got_inputs, got = _run(model.train(), src)          # no dropout is on: train differs only by the slots
    m = got["symbols"].m
    assert m == ref["symbols"].m
    for a, b in zip(got_inputs, ref_inputs):
        torch.testing.assert_close(a, b, rtol=0, atol=1e-12)
    gp, rp = got["output_parts"], ref["output_parts"]
    torch.testing.assert_close(gp["beta"], rp["beta"], rtol=0, atol=0)
    torch.testing.assert_close(gp["semantic"], rp["semantic"], rtol=0, atol=1e-12)
    fresh = [d.index(w) for w in FRESH]
    moved = rp["symbolic"][..., fresh].sum(-1)
    assert moved.min() > 1e-4                           # the empty slots do take mass
    torch.testing.assert_close(gp["symbolic"][..., d.pad()], moved, rtol=0, atol=1e-12)
    others = [i for i in range(len(d)) if i != d.pad() and i not in fresh]
    torch.testing.assert_close(gp["symbolic"][..., others], rp["symbolic"][..., others], rtol=0, atol=1e-12)
    assert plain["symbols"].m == m - k                  # and the slot count reaches the answer:
    assert (plain["output_parts"]["symbolic"][..., others] - gp["symbolic"][..., others]).abs().max() > 1e-4


def test_drawn_per_batch_in_training_only():
    K = 4
    model, d = _build(symbolic_spare_slots=K)
    src = encode(d, STORIES)
    m0 = model.eval().encoder(src)["symbols"].m
    assert model.eval().encoder(src)["symbols"].m == m0
    torch.manual_seed(1)
    drawn = {model.train().encoder(src)["symbols"].m - m0 for _ in range(60)}
    assert drawn == set(range(K + 1))                   # 60 draws of U{0..4} miss a value w.p. < 1e-5
    off, _ = _build()
    assert {off.train().encoder(src)["symbols"].m for _ in range(5)} == {m0}
