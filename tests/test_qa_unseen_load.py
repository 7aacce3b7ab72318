"""Words unseen in training read as zero rows *after* a checkpoint is loaded.

fairseq builds the model first (``task.build_model``, where ``babi_qa`` calls ``set_unseen``) and
loads the checkpoint's weights afterwards (fairseq/checkpoint_utils.py, load_model_ensemble_and_task:
``task.build_model`` then ``model.load_state_dict``).  So ``set_unseen`` must not edit weights in
place: a loaded state would put the trained rows back.  Before 540a219 (2026-11-25) stpr and
tpr_rnn zeroed their output rows Z in place, and every zero-shot figure read through fairseq
used the trained Z rows.

Reference: the loaded weights with the unseen words' rows of every (V, ·) matrix (semantic
embeddings, output rows) set to zero by hand, no ``set_unseen``; the paper's protocol written out."""
import pytest
import torch

from nesyseq.plugins.models.qa_memnet import MemNetConfig, MemNetModel, SymbolicMemNetModel
from nesyseq.plugins.models.qa_tpr import SymbolicTPRModel, TPRConfig, TPRRNNModel
from tests.qa_helpers import FakeTask, encode, make_dict

STORIES = ["mary moved to the kitchen . john moved to the garden . where is mary ?",
           "sandra moved to the office . mary moved to the kitchen . where is sandra ?"]
UNSEEN = ["kitchen", "sandra"]          # one answer word, one matched word


def _build(cls, seed):
    torch.manual_seed(seed)
    d = make_dict()
    if cls in (MemNetModel, SymbolicMemNetModel):
        cfg = MemNetConfig(embed_dim=6, hops=2, max_story=10, max_words=8)
    else:
        cfg = TPRConfig(embed_dim=6, hidden_dim=7, entity_dim=5, role_dim=4, max_words=8)
    model = cls.build_model(cfg, FakeTask(d)).double()
    with torch.no_grad():                         # "trained": every parameter off its init
        for p in model.parameters():
            p.add_(0.3 * torch.randn_like(p))
    return model.eval(), d


def _probs(model, d):
    src = encode(d, STORIES)
    prev = torch.full((src.size(0), 1), d.eos(), dtype=torch.long)
    with torch.no_grad():
        out = model(src, torch.full((src.size(0),), src.size(1)), prev)
        return model.get_normalized_probs(out, log_probs=False)[:, 0]


@pytest.mark.parametrize("cls", [TPRRNNModel, SymbolicTPRModel, MemNetModel, SymbolicMemNetModel])
def test_unseen_rows_are_zero_after_fairseq_loads_the_checkpoint(cls):
    trained, d = _build(cls, seed=0)
    ids = [d.index(w) for w in UNSEEN]
    state = trained.state_dict()

    loaded, _ = _build(cls, seed=1)               # fairseq's order: build, set_unseen, then load
    loaded.set_unseen(ids)
    loaded.load_state_dict(state)

    by_hand, _ = _build(cls, seed=2)
    by_hand.load_state_dict(state)
    V = len(d)
    zeroed = []
    with torch.no_grad():
        for n, p in by_hand.named_parameters():
            if p.dim() == 2 and p.size(0) == V:
                p[ids] = 0.0
                zeroed.append(n)
    assert any("Z" in n or "A" in n for n in zeroed), zeroed

    got, ref, plain = _probs(loaded, d), _probs(by_hand, d), _probs(trained, d)
    torch.testing.assert_close(got, ref, rtol=0, atol=1e-12)
    assert (plain - ref).abs().max() > 1e-3       # the unseen rows matter to the answer


@pytest.mark.parametrize("arch,dc", [("stpr_babi", TPRConfig), ("tpr_rnn_babi", TPRConfig), ("stpr_small", TPRConfig),
                                     ("memnet_babi", MemNetConfig), ("smn_babi", MemNetConfig)])
def test_a_checkpoint_config_from_before_an_option_builds_and_trains(arch, dc):
    """A saved config lacks the options added after it was written (e.g. the stpr runs of
    2026-11-25 have --entity-dropout but not --entity-dropout-init-alpha).  fairseq merges the
    dataclass defaults only for a model name, not an arch preset, so the presets fill them."""
    import dataclasses

    from fairseq.models import build_model
    from omegaconf import OmegaConf

    new = {"entity_dropout_init_alpha", "entity_dropout_words", "beta_init", "freeze_beta", "linear_start_epochs",
           "random_noise", "entity_dropout_type", "entity_dropout_groups"}
    old = {f.name: (f.default_factory() if f.default_factory is not dataclasses.MISSING else f.default)
           for f in dataclasses.fields(dc) if f.name not in new | {"_name"}}
    if dc is TPRConfig:
        old["entity_dropout"] = 0.5                  # on, so training reads --entity-dropout-init-alpha
    cfg = OmegaConf.create({"_name": arch, **old})
    OmegaConf.set_struct(cfg, True)
    d = make_dict()
    torch.manual_seed(0)
    model = build_model(cfg, FakeTask(d), from_checkpoint=True).train()
    src = encode(d, STORIES)
    out = model(src, torch.full((src.size(0),), src.size(1)), torch.full((src.size(0), 1), d.eos()))
    assert torch.isfinite(out[0]).all()
    for name in new & {f.name for f in dataclasses.fields(dc)}:
        assert name in cfg
