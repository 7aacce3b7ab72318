"""Exact symbol-shift equivariance Φ(Γ(X)) = Γ(Φ(X)) of the symbolic QA models, with controls."""
import pytest
import torch

from nesyseq.plugins.layers import symbolic
from nesyseq.plugins.models.qa_memnet import MemNetConfig, MemNetModel, SymbolicMemNetModel
from tests.qa_helpers import NAMES, FakeTask, encode, make_dict, tie_names

STORIES = ["mary moved to the kitchen . john moved to the garden . daniel moved to the office . where is john ?",
           "sandra moved to the garden . mary moved to the office . where is mary ?"]
PERM = {"mary": "daniel", "john": "mary", "sandra": "john", "daniel": "sandra"}   # Γ on the names


def _permute_text(t):
    return " ".join(PERM.get(w, w) for w in t.split())


def _build(cls, seed=0):
    torch.manual_seed(seed)
    d = make_dict()
    cfg = MemNetConfig(embed_dim=8, hops=2, max_story=10, max_words=8)
    model = cls.build_model(cfg, FakeTask(d)).eval()
    with torch.no_grad():  # move every parameter off its init so nothing is trivially symmetric
        for p in model.parameters():
            p.add_(0.3 * torch.randn_like(p))
    g = torch.Generator().manual_seed(seed)
    tie_names(model.encoder.A, [d.index(n) for n in NAMES], g)
    return model, d


def _answer_probs(model, d, texts):
    src = encode(d, texts)
    prev = torch.full((src.size(0), 1), d.eos(), dtype=torch.long)
    out = model(src, torch.full((src.size(0),), src.size(1)), prev)
    return model.get_normalized_probs(out, log_probs=False)[:, 0].double()


def _equivariance_gap(model, d):
    p = _answer_probs(model, d, STORIES)
    p_perm = _answer_probs(model, d, [_permute_text(t) for t in STORIES])
    idx = torch.arange(len(d))
    for a, b in PERM.items():
        idx[d.index(b)] = d.index(a)          # Γ(p)[Γ(w)] = p[w]
    return (p_perm - p[:, idx]).abs().max().item()


@pytest.mark.parametrize("seed", [0, 1])
def test_smn_is_equivariant(seed):
    model, d = _build(SymbolicMemNetModel, seed)
    assert _equivariance_gap(model, d) < 1e-6


def test_baseline_cannot_tell_tied_names_apart_but_smn_can():
    for cls, tied_equal in ((MemNetModel, True), (SymbolicMemNetModel, False)):
        model, d = _build(cls)
        p = _answer_probs(model, d, STORIES)
        names = p[:, [d.index(n) for n in NAMES]]
        spread = (names.max(-1).values - names.min(-1).values).max().item()
        assert (spread < 1e-9) == tied_equal, (cls.__name__, spread)


def test_mutant_untied_alpha_breaks_equivariance():
    model, d = _build(SymbolicMemNetModel)
    with torch.no_grad():
        model.encoder.A[1].alpha_logit[d.index("john")] += 1.0
    assert _equivariance_gap(model, d) > 1e-4


def test_mutant_phi_by_vocabulary_id_with_slot_dependent_weights(monkeypatch):
    """A model whose symbolic part weights slots unequally (here: per-slot scale) is only
    equivariant when φ follows first appearance; numbering φ by vocabulary id breaks it."""
    model, d = _build(SymbolicMemNetModel)
    scale = torch.linspace(0.5, 2.0, 16)
    real_softmax = symbolic.masked_slot_softmax

    def slot_weighted(h_sym, mask):
        return real_softmax(h_sym * scale[: h_sym.size(-1)], mask)

    monkeypatch.setattr(symbolic, "masked_slot_softmax", slot_weighted)
    assert _equivariance_gap(model, d) < 1e-6          # first appearance: still equivariant
    real_cs = symbolic.context_symbols

    def by_vocab_id(ctx, ignore, pad, max_symbols=None):
        s = real_cs(ctx, ignore, pad, max_symbols)
        key = s.slot_vocab.masked_fill(~s.slot_mask, 10 ** 9)
        order = key.argsort(-1)
        return symbolic.ContextSymbols(s.slot_vocab.gather(1, order), s.slot_mask.gather(1, order))

    import nesyseq.plugins.models.qa_memnet as qm
    monkeypatch.setattr(qm, "context_symbols", by_vocab_id)
    assert _equivariance_gap(model, d) > 1e-4


def test_any_bijection_phi_leaves_p_unchanged(monkeypatch):
    model, d = _build(SymbolicMemNetModel)
    p = _answer_probs(model, d, STORIES)
    real_cs = symbolic.context_symbols
    g = torch.Generator().manual_seed(3)

    def shuffled(ctx, ignore, pad, max_symbols=None):
        s = real_cs(ctx, ignore, pad, max_symbols)
        order = torch.stack([torch.randperm(s.m, generator=g) for _ in range(ctx.size(0))])
        return symbolic.ContextSymbols(s.slot_vocab.gather(1, order), s.slot_mask.gather(1, order))

    import nesyseq.plugins.models.qa_memnet as qm
    monkeypatch.setattr(qm, "context_symbols", shuffled)
    torch.testing.assert_close(_answer_probs(model, d, STORIES), p, rtol=0, atol=1e-7)


def test_padding_invariance_smn():
    model, d = _build(SymbolicMemNetModel)
    alone = _answer_probs(model, d, STORIES[1:])
    batched = _answer_probs(model, d, STORIES)[1:]
    torch.testing.assert_close(batched, alone, rtol=0, atol=1e-7)


def _build_tpr(cls, seed=0, **cfg):
    from nesyseq.plugins.models.qa_tpr import TPRConfig

    torch.manual_seed(seed)
    d = make_dict()
    model = cls.build_model(TPRConfig(embed_dim=6, hidden_dim=7, entity_dim=5, role_dim=4, max_words=8, **cfg),
                            FakeTask(d)).eval()
    with torch.no_grad():
        for p in model.parameters():
            p.add_(0.3 * torch.randn_like(p))
    ids = [d.index(n) for n in NAMES]
    tie_names([model.encoder.A], ids, torch.Generator().manual_seed(seed))
    with torch.no_grad():  # the output matrix B (Z) is per-word too
        model.encoder.Z.weight[ids] = model.encoder.Z.weight[ids[0]].clone()
    return model, d


def test_stpr_is_equivariant_and_baseline_ties():
    from nesyseq.plugins.models.qa_tpr import SymbolicTPRModel, TPRRNNModel

    model, d = _build_tpr(SymbolicTPRModel)
    assert _equivariance_gap(model, d) < 1e-6
    p = _answer_probs(model, d, STORIES)[:, [d.index(n) for n in NAMES]]
    assert (p.max(-1).values - p.min(-1).values).max() > 1e-6
    base, d = _build_tpr(TPRRNNModel)
    p = _answer_probs(base, d, STORIES)[:, [d.index(n) for n in NAMES]]
    assert (p.max(-1).values - p.min(-1).values).max() < 1e-9
    torch.testing.assert_close(_answer_probs(model, d, STORIES)[1:], _answer_probs(model, d, STORIES[1:]),
                               rtol=0, atol=1e-6)


def test_stpr_symbolic_positions_keep_equivariance():
    """--symbolic-positions (ours) weighs symbols by position in the sentence, never by word."""
    from nesyseq.plugins.models.qa_tpr import SymbolicTPRModel

    model, d = _build_tpr(SymbolicTPRModel, symbolic_positions=True)
    assert (model.encoder.sym_pos - 1.0).abs().min() > 1e-3           # off its init, per position
    assert _equivariance_gap(model, d) < 1e-6
    p = _answer_probs(model, d, STORIES)[:, [d.index(n) for n in NAMES]]
    assert (p.max(-1).values - p.min(-1).values).max() > 1e-6


def _shuffled_phi(monkeypatch, module, seed=3):
    real_cs = symbolic.context_symbols
    g = torch.Generator().manual_seed(seed)

    def shuffled(ctx, ignore, pad, max_symbols=None):
        s = real_cs(ctx, ignore, pad, max_symbols)
        order = torch.stack([torch.randperm(s.m, generator=g) for _ in range(ctx.size(0))])
        return symbolic.ContextSymbols(s.slot_vocab.gather(1, order), s.slot_mask.gather(1, order))

    monkeypatch.setattr(module, "context_symbols", shuffled)


def _by_vocab_id(monkeypatch, module):
    real_cs = symbolic.context_symbols

    def by_vocab_id(ctx, ignore, pad, max_symbols=None):
        s = real_cs(ctx, ignore, pad, max_symbols)
        order = s.slot_vocab.masked_fill(~s.slot_mask, 10 ** 9).argsort(-1)
        return symbolic.ContextSymbols(s.slot_vocab.gather(1, order), s.slot_mask.gather(1, order))

    monkeypatch.setattr(module, "context_symbols", by_vocab_id)


def test_stpr_bijection_invariance_and_dense_mutant(monkeypatch):
    """STPR's p does not depend on the slot numbering; a dense m×m symbolic layer in place of
    (λI + γ11ᵀ) makes it depend on it, and then φ by vocabulary id breaks equivariance."""
    import nesyseq.plugins.models.qa_tpr as qt
    from nesyseq.plugins.models.qa_tpr import SymbolicTPRModel

    model, d = _build_tpr(SymbolicTPRModel)
    p = _answer_probs(model, d, STORIES)
    with monkeypatch.context() as mp:
        _shuffled_phi(mp, qt)
        torch.testing.assert_close(_answer_probs(model, d, STORIES), p, rtol=0, atol=1e-6)
    with monkeypatch.context() as mp:
        _by_vocab_id(mp, qt)
        assert _equivariance_gap(model, d) < 1e-6        # equivariant model: any φ works
    dense = torch.randn(16, 16, generator=torch.Generator().manual_seed(7))
    for mod in model.modules():
        if isinstance(mod, symbolic.SymbolicLinear):
            def fwd(h_sem, h_sym, slot_mask, _lin=mod.linear):
                m = h_sym.size(-1)
                return _lin(h_sem), (h_sym @ dense[:m, :m]) * symbolic._expand_mask(slot_mask, h_sym)
            mod.forward = fwd
    p = _answer_probs(model, d, STORIES)
    with monkeypatch.context() as mp:
        _shuffled_phi(mp, qt)
        assert (_answer_probs(model, d, STORIES) - p).abs().max() > 1e-4
    with monkeypatch.context() as mp:
        _by_vocab_id(mp, qt)
        assert _equivariance_gap(model, d) > 1e-4


def test_stpr_mutant_untied_alpha():
    from nesyseq.plugins.models.qa_tpr import SymbolicTPRModel

    model, d = _build_tpr(SymbolicTPRModel)
    with torch.no_grad():
        model.encoder.A.alpha_logit[d.index("sandra")] += 1.0
    assert _equivariance_gap(model, d) > 1e-4


# A partner per padded dimension: a longer sentence (W), a longer question (Wq), more sentences
# (S) and more symbols (m, alone: 12 against 9) than STORIES[1], so batching pads STORIES[1]
# along each of them.
PARTNERS = {
    "W": "sandra moved to to the garden . where is mary ?",
    "Wq": "sandra moved to the garden . where is is the mary ?",
    "S": "mary moved to the office . john moved to the kitchen . daniel moved to the garden . where is john ?",
    "m": "daniel moved john kitchen office . sandra mary to the garden . where is daniel ?",  # 12 symbols
}


@pytest.mark.parametrize("dim", sorted(PARTNERS))
@pytest.mark.parametrize("name,kw", [("memnet", {}), ("smn", {}), ("tpr_rnn", {}), ("stpr", {}),
                                     ("stpr", {"symbolic_positions": True}),
                                     ("stpr", {"symbolic_positions_per_role": True})])
def test_answer_does_not_depend_on_the_batch_padding(name, kw, dim):
    """p of one story alone equals p of it batched beside a partner that pads it along ``dim``.
    Every parameter is moved off its init (the padding row of A too, as a trained model whose
    padding row was never zeroed has it: stpr before 2026-11-27), so the model must not read a
    padding token at all (a nonzero padding row once made W matter, docs/qa.md).  In fp64 the
    two are equal to 1e-12; in fp32 the difference is rounding, up to 1e-5 with shared γ_j."""
    from nesyseq.plugins.models.qa_tpr import SymbolicTPRModel, TPRRNNModel

    cls = {"memnet": MemNetModel, "smn": SymbolicMemNetModel, "tpr_rnn": TPRRNNModel, "stpr": SymbolicTPRModel}[name]
    model, d = _build_tpr(cls, **kw) if name in ("tpr_rnn", "stpr") else _build(cls)
    pad_rows = [model.encoder.A.semantic.weight[d.pad()]] if hasattr(model.encoder.A, "semantic") else \
        [a.semantic.weight[d.pad()] for a in model.encoder.A]
    assert all(r.abs().min() > 1e-4 for r in pad_rows)                # the padding row is not zero
    model = model.double()        # fp64: fp32 rounding alone moves stpr's p by up to 1e-5 here
    alone = _answer_probs(model, d, STORIES[1:])
    batched = _answer_probs(model, d, [STORIES[1], PARTNERS[dim]])[:1]
    torch.testing.assert_close(batched, alone, rtol=0, atol=1e-12)
