"""MemN2N recipe on memnet / smn: linear start (LS), random noise (RN), the lr schedule.

References are independent of the model code: a naive per-example, per-sentence memnet written
from eqs. 7-8 / 30-31 (softmax or, under LS, the raw scores), the exact distribution of the RN
temporal indices by enumeration, and the reference code's epoch loop for the schedule
(facebookarchive/MemNN MemN2N-babi-matlab/train.m:11-14, train_linear_start.m)."""
import itertools
import math
from collections import Counter

import torch

from nesyseq.plugins.models.qa_memn2n_schedule import memn2n_lr
from nesyseq.plugins.models.qa_memnet import MemNetConfig, MemNetModel, SymbolicMemNetModel
from tests.qa_helpers import FakeTask, encode, make_dict

STORIES = ["mary moved to the kitchen . john moved to the garden . daniel moved to the office . where is john ?",
           "sandra moved to the garden . mary moved to the office . where is mary ?"]


def _build(cls=MemNetModel, seed=0, **cfg):
    torch.manual_seed(seed)
    d = make_dict()
    model = cls.build_model(MemNetConfig(embed_dim=6, hops=2, max_story=10, max_words=8, **cfg), FakeTask(d))
    model = model.double().eval()
    with torch.no_grad():
        for p in model.parameters():
            p.add_(0.3 * torch.randn_like(p))
    return model, d


def _probs(model, d, texts=STORIES):
    src = encode(d, texts)
    prev = torch.full((src.size(0), 1), d.eos(), dtype=torch.long)
    out = model(src, torch.full((src.size(0),), src.size(1)), prev)
    return model.get_normalized_probs(out, log_probs=False)[:, 0].double()


def naive_memnet(model, d, text, linear, times=None):
    """p(answer) of one example, word by word and sentence by sentence (eqs. 7-8, 30-31).
    ``times[i]``: temporal row of sentence i (oldest first); default n-1-i (most recent = 0)."""
    enc = model.encoder
    words = text.split()
    sents, cur = [], []
    for w in words:
        if w == ".":
            sents.append(cur); cur = []
        elif w == "?":
            break
        else:
            cur.append(w)
    question = cur
    n = len(sents)
    times = list(range(n - 1, -1, -1)) if times is None else times
    A = [e.semantic.weight for e in enc.A]

    def bag(k, ws):
        return sum(A[k][d.index(w)] * enc.pos[j] for j, w in enumerate(ws))

    u = bag(0, question)
    for k in range(len(A) - 1):
        ms = [bag(k, s) + enc.TA[times[i]] for i, s in enumerate(sents)]
        cs = [bag(k + 1, s) + enc.TC[times[i]] for i, s in enumerate(sents)]
        scores = torch.stack([torch.dot(m, u) for m in ms])
        w = scores if linear else torch.softmax(scores, 0)
        u = u + sum(w[i] * cs[i] for i in range(n))
    return torch.softmax(A[-1] @ u, 0)


def test_linear_start_reads_memory_without_softmax():
    model, d = _build(linear_start_epochs=3)
    assert bool(model.encoder.linear_start_on)
    p = _probs(model, d)
    for b, text in enumerate(STORIES):
        ref = naive_memnet(model, d, text, linear=True)
        torch.testing.assert_close(p[b], ref, rtol=0, atol=1e-6)  # output softmax is fp32
        assert (naive_memnet(model, d, text, linear=False) - ref).abs().max() > 1e-3   # the two differ
    model.begin_epoch(4)                                        # LS over: the softmax is back
    p = _probs(model, d)
    for b, text in enumerate(STORIES):
        torch.testing.assert_close(p[b], naive_memnet(model, d, text, linear=False), rtol=0, atol=1e-6)  # output softmax is fp32


def test_linear_start_smn_drops_the_softmax_too():
    model, d = _build(SymbolicMemNetModel, linear_start_epochs=1)
    p_ls = _probs(model, d)
    model.begin_epoch(2)
    assert (p_ls - _probs(model, d)).abs().max() > 1e-3
    model.begin_epoch(1)
    torch.testing.assert_close(_probs(model, d), p_ls, rtol=0, atol=0)


def test_linear_start_switch_by_epoch_and_state_dict():
    model, _ = _build(linear_start_epochs=2)
    assert [bool(model.encoder.linear_start_on) for e in (1, 2, 3, 7) if model.begin_epoch(e) is None] \
        == [True, True, False, False]
    state = model.state_dict()
    assert "encoder.linear_start_on" in state
    fresh, _ = _build(linear_start_epochs=2)                  # built in the LS phase
    assert bool(fresh.encoder.linear_start_on)
    fresh.load_state_dict(state)                              # resumed after it: off
    assert not bool(fresh.encoder.linear_start_on)
    off, _ = _build()                                         # LS disabled: never on
    off.begin_epoch(1)
    assert not bool(off.encoder.linear_start_on)
    old = {k: v for k, v in state.items() if k != "encoder.linear_start_on"}   # pre-LS checkpoint
    ls, _ = _build(linear_start_epochs=2)
    ls.upgrade_state_dict_named(old, "")
    ls.load_state_dict(old)
    assert not bool(ls.encoder.linear_start_on)


def test_babi_presets_turn_the_recipe_on():
    from fairseq import options
    from fairseq.dataclass.utils import convert_namespace_to_omegaconf

    def cfg(arch):
        parser = options.get_training_parser()
        args = options.parse_args_and_arch(parser, ["/tmp", "--task", "babi_qa", "--arch", arch])
        model_cfg = convert_namespace_to_omegaconf(args).model     # what build_model receives
        return model_cfg.linear_start_epochs, model_cfg.random_noise

    assert cfg("memnet_babi") == (20, 0.1)
    assert cfg("smn_babi") == (20, 0.1)
    assert cfg("memnet") == (0, 0.0)


def _exact_rn_distribution(n, rn):
    """P(temporal indices of the n sentences, most recent first) by enumeration."""
    kmax = math.ceil(rn * n)
    dist = Counter()
    for k in range(kmax + 1):
        subsets = list(itertools.combinations(range(n + k), n))
        for sub in subsets:
            dist[sub] += 1.0 / (kmax + 1) / len(subsets)
    return dist


def test_random_noise_temporal_indices_match_enumeration():
    model, _ = _build(random_noise=0.5)
    model.train()
    torch.manual_seed(0)
    real = torch.tensor([[False, True, True, True], [False, False, False, True]])   # n = 3 and n = 1
    draws = 20000
    counts = [Counter(), Counter()]
    for _ in range(draws // 100):
        T = torch.cat([model.encoder.temporal_index(real) for _ in range(100)])
        for b, n in ((0, 3), (1, 1)):
            rows = T[b::2, -n:].flip(-1)                         # most recent first
            for row in rows.tolist():
                counts[b][tuple(row)] += 1
    for b, n in ((0, 3), (1, 1)):
        exact = _exact_rn_distribution(n, 0.5)
        assert set(counts[b]) <= set(exact), (n, set(counts[b]) - set(exact))
        for key, p in exact.items():
            assert abs(counts[b][key] / draws - p) < 0.015, (n, key, counts[b][key] / draws, p)


def test_random_noise_only_in_training():
    model, d = _build(random_noise=0.5)
    plain, _ = _build()
    real = torch.ones(3, 6, dtype=torch.bool)
    assert torch.equal(model.encoder.temporal_index(real), torch.arange(5, -1, -1).expand(3, 6))
    torch.testing.assert_close(_probs(model, d), _probs(plain, d), rtol=0, atol=0)   # eval: no noise
    model.train()
    torch.manual_seed(1)
    assert any(not torch.equal(model.encoder.temporal_index(real), torch.arange(5, -1, -1).expand(3, 6))
               for _ in range(10))


def test_random_noise_forward_uses_the_drawn_indices(monkeypatch):
    model, d = _build(random_noise=0.5)
    model.train()
    enc = model.encoder
    drawn = []
    real_ti = type(enc).temporal_index

    def record(self, real):
        T = real_ti(self, real)
        drawn.append(T)
        return T

    monkeypatch.setattr(type(enc), "temporal_index", record)
    torch.manual_seed(3)
    for _ in range(5):
        p = _probs(model, d)
        T = drawn[-1]
        for b, text in enumerate(STORIES):
            n = text.count(" . ")
            times = T[b, -n:].tolist()                          # oldest first
            torch.testing.assert_close(p[b], naive_memnet(model, d, text, False, times), rtol=0, atol=1e-6)  # output softmax is fp32


def _reference_schedule(ls_epochs, ls_lr, nepochs, decay, init_lr):
    """The reference's loops: LS phase (decay step ls_epochs + 1 never fires), then a restart."""
    lrs = []
    phases = ([(ls_epochs, ls_epochs + 1, ls_lr)] if ls_epochs else []) + [(nepochs, decay, init_lr)]
    for n_ep, step, lr in phases:
        for ep in range(1, n_ep + 1):
            if ep % step == 0:
                lr *= 0.5
            lrs.append(lr)
    return lrs


def test_schedule_matches_the_reference_loop():
    ref = _reference_schedule(20, 0.005, 100, 25, 0.005)
    got = [memn2n_lr(0.005, e, 25, 0.5, 20) for e in range(1, 121)]
    assert got == ref
    ref = _reference_schedule(0, None, 100, 25, 0.01)
    assert [memn2n_lr(0.01, e, 25, 0.5, 0) for e in range(1, 101)] == ref
    assert got[:20] == [0.005] * 20 and got[44] == 0.0025 and got[119] == 0.005 / 16


def test_schedule_sets_the_optimizer_lr():
    from argparse import Namespace

    from fairseq.optim.sgd import SGD

    from nesyseq.plugins.models.qa_memn2n_schedule import MemN2NStepConfig, MemN2NStepSchedule

    p = torch.nn.Parameter(torch.zeros(2))
    opt = SGD(Namespace(lr=[0.16], momentum=0.0, weight_decay=0.0), [p])
    sched = MemN2NStepSchedule(MemN2NStepConfig(lr=[0.16], constant_epochs=20), opt)
    for epoch in (1, 20, 21, 45, 70, 120):
        sched.step_begin_epoch(epoch)
        sched.step_update(epoch * 100)
        assert opt.get_lr() == memn2n_lr(0.16, epoch, 25, 0.5, 20)


def test_task_epoch_hook_runs_for_every_qa_model():
    """fairseq-train calls ``task.begin_epoch`` before every epoch, epoch 1 included.  The babi_qa
    task forwards it to the model; models whose encoder has no epoch schedule (tpr_rnn, stpr) must
    pass through, and memnet/smn must switch linear start off after its epochs."""
    from fairseq.models import ARCH_MODEL_REGISTRY
    from nesyseq.plugins.models.qa_tpr import TPRConfig
    from nesyseq.plugins.tasks.babi_qa import BabiQAConfig, BabiQATask

    d = make_dict()
    task = BabiQATask(BabiQAConfig(data=""), d, d)
    for arch in ("memnet", "smn", "tpr_rnn", "stpr"):
        cls = ARCH_MODEL_REGISTRY[arch]
        cfg = (MemNetConfig(embed_dim=6, hops=1, max_story=10, max_words=8, linear_start_epochs=2)
               if arch in ("memnet", "smn") else TPRConfig(embed_dim=6, hidden_dim=4))
        model = cls.build_model(cfg, FakeTask(d))
        for epoch in (1, 2, 3):
            task.begin_epoch(epoch, model)
            if arch in ("memnet", "smn"):
                assert bool(model.encoder.linear_start_on) == (epoch <= 2), (arch, epoch)
