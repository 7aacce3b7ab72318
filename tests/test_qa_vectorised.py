"""The vectorised ``split_story`` (issue 23 part 5) against the row-by-row reference it replaced:
the tensors themselves on random sources, and whole memnet / smn / tpr_rnn / stpr forward passes
and gradients with either version."""
import pytest
import torch

import nesyseq.plugins.models.qa_memnet as qm
import nesyseq.plugins.models.qa_tpr as qt
from nesyseq.plugins.models.qa_memnet import MemNetConfig, MemNetModel, SymbolicMemNetModel, split_story
from tests.qa_helpers import FakeTask, encode, make_dict

PAD, EOS, DOT, QM = 1, 2, 3, 4


def naive_split_story(src, sent_end, q_end, pad, eos):
    """Row by row, token by token (the pre-vectorisation code)."""
    stories, questions = [], []
    for row in src.tolist():
        sents, cur = [], []
        for t in row:
            if t in (pad, eos):
                continue
            if t == sent_end:
                sents.append(cur)
                cur = []
            elif t == q_end:
                break
            else:
                cur.append(t)
        stories.append(sents)
        questions.append(cur)
    B = len(stories)
    S = max(1, max(len(s) for s in stories))
    W = max([1] + [len(x) for s in stories for x in s])
    Wq = max(1, max(len(q) for q in questions))
    story = torch.full((B, S, W), pad, dtype=torch.long)
    question = torch.full((B, Wq), pad, dtype=torch.long)
    for b, sents in enumerate(stories):
        for i, sent in enumerate(sents):
            if sent:
                story[b, S - len(sents) + i, : len(sent)] = torch.tensor(sent)
        if questions[b]:
            question[b, : len(questions[b])] = torch.tensor(questions[b])
    return story.to(src.device), question.to(src.device)    # as the old code did (433dd5a), for GPU timings


def _random_source(g, B, T):
    """Words 5..14, separators, empty sentences, eos/pad inside and at the end, junk after '?',
    rows without '?' or without any sentence."""
    probs = torch.tensor([0.0, 0.05, 0.03, 0.2, 0.05] + [0.067] * 10)
    src = torch.multinomial(probs, B * T, replacement=True, generator=g).view(B, T)
    src[0] = PAD
    if B > 1:
        src[1, : T // 2] = 7
        src[1, T // 2] = QM
    return src


@pytest.mark.parametrize("seed", range(20))
def test_split_story_equals_row_by_row_reference(seed):
    g = torch.Generator().manual_seed(seed)
    src = _random_source(g, B=1 + seed % 7, T=1 + 3 * seed)
    got = split_story(src, DOT, QM, PAD, EOS)
    ref = naive_split_story(src, DOT, QM, PAD, EOS)
    assert torch.equal(got[0], ref[0]) and torch.equal(got[1], ref[1])


def test_split_story_on_real_stories():
    d = make_dict()
    src = encode(d, ["mary moved to the kitchen . john moved to the garden . where is john ?",
                     "sandra moved to the garden . where is sandra ?"])
    got = split_story(src, d.index("."), d.index("?"), d.pad(), d.eos())
    ref = naive_split_story(src, d.index("."), d.index("?"), d.pad(), d.eos())
    assert torch.equal(got[0], ref[0]) and torch.equal(got[1], ref[1])
    assert got[0][1, 0].eq(d.pad()).all()                                # right-aligned: row 1 starts padded


def _models():
    from nesyseq.plugins.models.qa_tpr import SymbolicTPRModel, TPRConfig, TPRRNNModel

    d = make_dict()
    mem = dict(embed_dim=6, hops=2, max_story=10, max_words=8)
    tpr = dict(embed_dim=6, hidden_dim=7, entity_dim=5, role_dim=4, max_words=8)
    return d, [(MemNetModel, MemNetConfig(**mem)), (SymbolicMemNetModel, MemNetConfig(**mem)),
               (TPRRNNModel, TPRConfig(**tpr)), (SymbolicTPRModel, TPRConfig(**tpr))]


def _forward_backward(model, src):
    model.zero_grad()
    prev = torch.full((src.size(0), 1), 2, dtype=torch.long)
    out = model(src, torch.full((src.size(0),), src.size(1)), prev)
    lp = model.get_normalized_probs(out, log_probs=True)[:, 0]
    lp[:, 5:].sum().backward()
    return lp.detach(), {n: p.grad.clone() for n, p in model.named_parameters() if p.grad is not None}


def test_models_forward_and_gradients_unchanged(monkeypatch):
    d, specs = _models()
    src = encode(d, ["mary moved to the kitchen . john moved to the garden . daniel moved to the office . where is john ?",
                     "sandra moved to the garden . mary moved to the office . where is mary ?",
                     "john moved to the office . where is john ?"])
    for cls, cfg in specs:
        torch.manual_seed(0)
        model = cls.build_model(cfg, FakeTask(d)).double().eval()
        with torch.no_grad():
            for p in model.parameters():
                p.add_(0.3 * torch.randn_like(p))
        new = _forward_backward(model, src)
        with monkeypatch.context() as m:
            m.setattr(qm, "split_story", naive_split_story)
            m.setattr(qt, "split_story", naive_split_story)
            old = _forward_backward(model, src)
        torch.testing.assert_close(new[0], old[0], rtol=0, atol=1e-6, msg=cls.__name__)
        assert new[1].keys() == old[1].keys() and len(new[1]) > 3
        for name in new[1]:
            torch.testing.assert_close(new[1][name], old[1][name], rtol=0, atol=1e-6, msg=f"{cls.__name__} {name}")
