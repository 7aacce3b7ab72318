"""tpr_rnn / stpr against a naive dense TPR-RNN written from the paper's equations.

The model keeps F as rank-one terms (``_FactoredTPR``); the reference here builds the dense
third-order tensor F[b, e, r, f] sentence by sentence with eqs. 34-39 and reads it out with
eqs. 11-13, so a wrong read (swapped e/r vector), a dropped update term or a lost ``keep`` mask
shows up as a mismatch.
"""
import pytest
import torch

from nesyseq.plugins.models.qa_common import split_story
from nesyseq.plugins.models.qa_tpr import SymbolicTPRModel, TPRConfig, TPRRNNModel
from tests.qa_helpers import FakeTask, encode, make_dict


class DenseTPR:
    """F held densely, F ← F + Σ_k e_k ⊗ r_k ⊗ f_k: the formula as written, the reference (and
    benchmarks/bench_qa_tpr.py's baseline) for the model's ``_FactoredTPR``, same ``read`` / ``write``."""

    def __init__(self):
        self.F = None

    def read(self, a, b):
        if self.F is None:
            return torch.zeros_like(a)
        return torch.einsum("be,br,berf->bf", a, b, self.F)

    def write(self, es, rs, fs):
        dF = sum(torch.einsum("be,br,bf->berf", e, r, f) for e, r, f in zip(es, rs, fs))
        self.F = dF if self.F is None else self.F + dF

STORIES = ["mary moved to the kitchen . john moved to the garden . daniel moved to the office . where is john ?",
           "sandra moved to the garden . mary moved to the office . where is mary ?",
           "john moved to the kitchen . where is john ?"]


def _build(cls, seed=0):
    torch.manual_seed(seed)
    d = make_dict()
    model = cls.build_model(TPRConfig(embed_dim=6, hidden_dim=7, entity_dim=5, role_dim=4, max_words=8),
                            FakeTask(d)).double().eval()
    with torch.no_grad():
        for p in model.parameters():
            p.add_(0.3 * torch.randn_like(p))
    return model, d


def _naive_tpr_rnn(enc, src):
    """Dense F, eqs. 34-39 then the question read-out and p = softmax(Z h)."""
    story, question = split_story(src, enc.sent_end, enc.q_end, enc.pad, enc.eos)
    B, S, _ = story.shape
    none = torch.full_like(story, -1)
    s, _ = enc._embed(story, none, 0)
    e1, e2 = (f(s)[0] for f in enc.story_e)
    r1, r2, r3 = (f(s)[0] for f in enc.story_r)
    E, R = e1.size(-1), r1.size(-1)
    F = torch.zeros(B, E, R, E, dtype=s.dtype)
    for t in range(S):
        for b in range(B):
            if not story[b, t].ne(enc.pad).any():
                continue
            Fb = F[b].clone()
            w = torch.einsum("e,r,erf->f", e1[b, t], r1[b, t], Fb)
            m = torch.einsum("e,r,erf->f", e1[b, t], r2[b, t], Fb)
            bk = torch.einsum("e,r,erf->f", e2[b, t], r3[b, t], Fb)
            F[b] = (Fb + torch.einsum("e,r,f->erf", e1[b, t], r1[b, t], e2[b, t] - w)
                    + torch.einsum("e,r,f->erf", e1[b, t], r2[b, t], w - m)
                    + torch.einsum("e,r,f->erf", e2[b, t], r3[b, t], e1[b, t] - bk))
    q, _ = enc._embed(question.unsqueeze(1), torch.full_like(question, -1).unsqueeze(1), 0)
    q = q.squeeze(1)
    i, h = enc.q_e(q)[0], 0
    for k in range(3):
        i = enc.ln[k](torch.einsum("be,br,berf->bf", i, enc.q_r[k](q)[0], F))
        h = h + i
    return torch.softmax(enc.Z(h), -1)


def _probs(model, src):
    prev = torch.full((src.size(0), 1), 2, dtype=torch.long)
    out = model(src, torch.full((src.size(0),), src.size(1)), prev)
    return model.get_normalized_probs(out, log_probs=False)[:, 0]


def test_tpr_rnn_equals_dense_equations():
    model, d = _build(TPRRNNModel)
    src = encode(d, STORIES)
    got = _probs(model, src)
    ref = _naive_tpr_rnn(model.encoder, src)          # the model's softmax runs in fp32 (float output)
    torch.testing.assert_close(got, ref.float(), rtol=0, atol=1e-7)
    assert (ref.max(-1).values - ref.min(-1).values).min() > 1e-3     # not a flat distribution


@pytest.mark.parametrize("cls", [TPRRNNModel, SymbolicTPRModel])
def test_factored_memory_equals_dense_with_gradients(cls, monkeypatch):
    import nesyseq.plugins.models.qa_tpr as qt

    model, d = _build(cls)
    src = encode(d, STORIES)

    def run():
        model.zero_grad()
        p = _probs(model, src)
        (p * torch.arange(p.size(-1), dtype=p.dtype)).sum().backward()
        return p.detach(), [x.grad.clone() for x in model.parameters() if x.grad is not None]

    p, g = run()
    monkeypatch.setattr(qt, "_FactoredTPR", DenseTPR)
    p_ref, g_ref = run()
    torch.testing.assert_close(p, p_ref, rtol=0, atol=1e-7)
    assert len(g) == len(g_ref)
    for a, b in zip(g, g_ref):
        torch.testing.assert_close(a, b, rtol=1e-7, atol=1e-10)


def _max_write_gain(model, src, monkeypatch):
    """max over sentences and writes of |e|²|r|²: the TPR update F += e⊗r⊗(v − F·e·r) moves the
    read F·e·r by that factor times (v − F·e·r), so above 2 it overshoots and F diverges."""
    import nesyseq.plugins.models.qa_tpr as qt
    gains = []

    class Recording(qt._FactoredTPR):
        def write(self, es, rs, fs):
            gains.extend(float((e.pow(2).sum(-1) * r.pow(2).sum(-1)).max()) for e, r in zip(es, rs))
            super().write(es, rs, fs)

    monkeypatch.setattr(qt, "_FactoredTPR", Recording)
    _probs(model, src)
    return max(gains)


def test_stpr_default_init_starts_in_the_stable_regime(monkeypatch):
    """stpr_babi at its default init (symbolic λ = 0.1) writes with gain far below 2; with λ = 1
    the symbolic parts alone push it above 2 on bAbI-length sentences (NaN within 50 updates
    in training, docs/qa.md)."""
    d = make_dict()
    long = ["mary moved to the kitchen . john moved to the garden . sandra moved to the office . "
            "daniel moved to the kitchen . where is john ?"]
    src = encode(d, long)
    gains = {}
    for lam in (0.1, 1.0):
        torch.manual_seed(0)
        model = SymbolicTPRModel.build_model(TPRConfig(sym_lambda_init=lam), FakeTask(d)).eval()
        with torch.no_grad():     # trained α: the symbols are in use (sigmoid(2) = 0.88)
            model.encoder.A.alpha_logit.fill_(2.0)
        gains[lam] = _max_write_gain(model, src, monkeypatch)
    assert gains[0.1] < 1.0 < 2.0 < gains[1.0], gains


def test_evaluate_beta_diagnostic_fixes_the_mixture():
    """evaluate qa's --beta diagnostic: β = 0 leaves only the symbolic part (no mass outside the
    context), β = 1 only the semantic softmax; bad values and models without β are errors."""
    from nesyseq.evaluations.qa_eval import _fix_beta
    from nesyseq.common.errors import UserError
    from nesyseq.plugins.models.qa_memnet import MemNetConfig, MemNetModel

    model, d = _build(SymbolicTPRModel)
    src = encode(d, STORIES)
    outside = [i for i in range(len(d)) if i not in set(src[0].tolist())]
    _fix_beta(model, "0", "ck.pt")
    p0 = _probs(model, src)
    assert p0[0, outside].sum() < 1e-9 and torch.allclose(p0.sum(-1), torch.ones(3, dtype=p0.dtype))
    _fix_beta(model, "1", "ck.pt")
    p1 = _probs(model, src)
    assert p1[0, outside].sum() > 1e-3
    _fix_beta(model, "0.25", "ck.pt")
    torch.testing.assert_close(_probs(model, src), 0.25 * p1 + 0.75 * p0, rtol=0, atol=1e-6)
    for bad in ("2", "x"):
        with pytest.raises(UserError, match="beta"):
            _fix_beta(model, bad, "ck.pt")
    memnet = MemNetModel.build_model(MemNetConfig(embed_dim=8, hops=1, max_story=10, max_words=8), FakeTask(d))
    with pytest.raises(UserError, match="no symbolic output mixture"):
        _fix_beta(memnet, "0", "ck.pt")
