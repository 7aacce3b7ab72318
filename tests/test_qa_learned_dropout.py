"""--entity-dropout-learn: the words entity dropout may pick, learnt from the loss of the examples
that dropped them (plugins/layers/entity_dropout.py, WordCosts).

The statistics are checked against a loop over examples; the rule against losses made, by
construction, to depend on one word only; the babi_qa task's hand-over of per-example losses
against fairseq's own cross-entropy criterion."""
import argparse

import pytest
import torch
from fairseq.criterions.cross_entropy import CrossEntropyCriterion

from nesyseq.plugins.layers.entity_dropout import WordCosts
from nesyseq.plugins.models.qa_tpr import SymbolicTPRModel, TPRConfig
from nesyseq.plugins.tasks.babi_qa import BabiQATask, example_losses, learning_dropouts
from tests.qa_helpers import FakeTask, encode, make_dict

STORIES = ["mary moved to the kitchen . john moved to the garden . where is john ?",
           "sandra moved to the garden . mary moved to the office . where is mary ?"]


def _build(seed=0, **cfg):
    torch.manual_seed(seed)
    d = make_dict()
    model = SymbolicTPRModel.build_model(TPRConfig.from_namespace(argparse.Namespace(
        embed_dim=6, hidden_dim=7, max_words=8, **cfg)), FakeTask(d))
    return model, d


def test_word_costs_equal_a_loop_over_examples():
    g = torch.Generator().manual_seed(0)
    V, window = 9, 4
    costs = WordCosts(V, margin=0.1, window=window)
    ref = torch.zeros(4, V, dtype=torch.float64)
    for _ in range(6):
        B, m = 5, 4
        vocab = torch.stack([torch.randperm(V, generator=g)[:m] for _ in range(B)])       # distinct per row
        real = torch.rand(B, m, generator=g) < 0.8
        picked = (torch.rand(B, m, generator=g) < 0.5) & real
        loss = torch.rand(B, generator=g) * 3
        costs.observe(loss, picked, vocab, real)
        ref *= 1 - 1 / window
        for b in range(B):
            for j in range(m):
                if real[b, j]:
                    k = 0 if picked[b, j] else 2
                    ref[k, vocab[b, j]] += float(loss[b])
                    ref[k + 1, vocab[b, j]] += 1
    torch.testing.assert_close(costs.stats.double(), ref, rtol=1e-6, atol=1e-6)
    gap = costs.gaps()
    both = (ref[1] > 0) & (ref[3] > 0)
    torch.testing.assert_close(gap[both].double(), (ref[0] / ref[1] - ref[2] / ref[3])[both], rtol=1e-5, atol=1e-6)
    assert torch.isnan(gap[~both]).all()


def test_a_word_whose_drop_costs_loss_stops_being_droppable_and_comes_back():
    """The loss is 2 nats when 'moved' was dropped and 0 otherwise, so its gap is 2 and every other
    word's is about 2·P('moved' dropped) - 2·P(...) = 0 (the draws are independent).  'moved' stops
    being droppable: with the explore rate 0 no draw picks it, story dropout included; once its
    drops cost nothing, it is droppable again."""
    model, d = _build(entity_dropout=0.5, entity_dropout_learn=True, entity_dropout_learn_margin=0.3,
                      entity_dropout_learn_explore=0.0, entity_dropout_learn_window=20)
    drop_mod = model.encoder.entity_dropout
    src = encode(d, STORIES * 16)
    moved = d.index("moved")
    words = {d.index(w) for t in STORIES for w in t.split()} - {d.index("."), d.index("?")}
    model.train()
    for _ in range(60):
        drop = model.encoder.entity_dropout_mask(src)
        drop_mod.observe(2.0 * drop[:, moved].float())
    ok = drop_mod.costs.droppable()
    assert not ok[moved]
    assert all(ok[w] for w in words - {moved})
    assert "moved +2.000" in drop_mod.learned_summary()
    drop_mod.cfg.entity_dropout_story = 1.0          # every droppable word at once, never 'moved'
    drop = model.encoder.entity_dropout_mask(src)
    assert not drop[:, moved].any()
    assert all(drop[:, w].any() for w in words - {moved})
    drop_mod.cfg.entity_dropout_story = 0.0
    drop_mod.cfg.entity_dropout_learn_explore = 0.5  # drops of 'moved' now cost nothing
    for _ in range(200):
        model.encoder.entity_dropout_mask(src)
        drop_mod.observe(torch.zeros(src.size(0)))
    assert drop_mod.costs.droppable()[moved]


def test_no_pending_draw_no_update_and_the_options_are_checked():
    model, d = _build(entity_dropout=0.5, entity_dropout_learn=True)
    drop_mod = model.encoder.entity_dropout
    model.eval()
    assert model.encoder.entity_dropout_mask(encode(d, STORIES)) is None
    drop_mod.observe(torch.ones(2))                  # eval mode drew nothing: nothing to learn
    assert drop_mod.costs.stats.abs().sum() == 0
    model.train()
    model.encoder.entity_dropout_mask(encode(d, STORIES))
    with pytest.raises(ValueError, match="3 per-example losses for a batch of 2"):
        drop_mod.observe(torch.ones(3))
    with pytest.raises(ValueError, match="--entity-dropout-learn learns the words --entity-dropout-words"):
        _build(entity_dropout=0.5, entity_dropout_learn=True, entity_dropout_words="mary")
    with pytest.raises(ValueError, match="--entity-dropout-learn-margin must be >= 0"):
        _build(entity_dropout=0.5, entity_dropout_learn=True, entity_dropout_learn_margin=-1.0)
    with pytest.raises(ValueError, match="--entity-dropout-learn-explore must be in"):
        _build(entity_dropout=0.5, entity_dropout_learn=True, entity_dropout_learn_explore=2.0)


def test_costs_are_saved_and_read_into_a_larger_dictionary():
    model, d = _build(entity_dropout=0.5, entity_dropout_learn=True)
    costs = model.encoder.entity_dropout.costs
    costs.stats.copy_(torch.arange(4.0 * len(d)).view(4, -1))
    saved = {k: v.clone() for k, v in model.state_dict().items()}
    key = [k for k in saved if k.endswith("costs.stats")]
    assert len(key) == 1
    bigger = WordCosts(len(d) + 3, margin=0.05, window=200)
    bigger.load_state_dict({"stats": saved[key[0]]})
    torch.testing.assert_close(bigger.stats[:, :len(d)], saved[key[0]], rtol=0, atol=0)
    assert bigger.stats[:, len(d):].abs().sum() == 0
    off, _ = _build(entity_dropout=0.5)              # off: nothing saved, old checkpoints load
    assert not any("costs" in k for k in off.state_dict())


class _Optimizer:
    def backward(self, loss):
        loss.backward()


def test_train_step_hands_each_examples_loss_to_the_learning_dropout():
    """The per-example losses the task hands over sum to fairseq's cross-entropy loss of the same
    forward, and reach the dropout's statistics."""
    model, d = _build(entity_dropout=0.5, entity_dropout_learn=True)
    assert learning_dropouts(model) == [model.encoder.entity_dropout]
    src = encode(d, STORIES * 3)
    target = torch.tensor([[d.index("garden"), d.eos()], [d.index("office"), d.eos()]] * 3)
    target[-1] = torch.tensor([d.eos(), d.pad()])      # a padded target: its pad step counts for nothing
    prev = torch.cat([torch.full((src.size(0), 1), d.eos(), dtype=torch.long), target[:, :1]], 1)   # teacher forcing
    sample = {"net_input": {"src_tokens": src, "src_lengths": torch.full((src.size(0),), src.size(1)),
                            "prev_output_tokens": prev},
              "target": target, "ntokens": int(target.ne(d.pad()).sum()), "nsentences": src.size(0), "id": torch.arange(6)}
    task = BabiQATask.__new__(BabiQATask)
    task.tgt_dict = d
    seen = []
    real_observe = model.encoder.entity_dropout.observe
    model.encoder.entity_dropout.observe = lambda loss: (seen.append(loss.clone()), real_observe(loss))
    criterion = CrossEntropyCriterion(task, sentence_avg=False)
    torch.manual_seed(1)
    loss, _, _ = task.train_step(sample, model, criterion, _Optimizer(), update_num=0)
    assert len(seen) == 1 and seen[0].shape == (6,)
    torch.testing.assert_close(seen[0].sum(), loss.detach().float(), rtol=1e-5, atol=1e-5)
    assert model.encoder.entity_dropout.costs.stats[[1, 3]].sum() > 0
    # the same forward: the drop masks of this step gave the loss (a second forward would redraw them)
    torch.manual_seed(1)
    model.train()
    out = model(**sample["net_input"])
    torch.testing.assert_close(example_losses(model, out, target, d.pad()), seen[0], rtol=1e-5, atol=1e-5)
