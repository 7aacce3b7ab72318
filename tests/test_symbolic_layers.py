"""φ, hybrid embedding, symbolic linear map and symbolic output (plugins/layers/symbolic.py)
against hand-built examples and brute-force references."""
import torch

from nesyseq.plugins.layers.symbolic import (HybridEmbedding, SymbolicLinear, context_symbols, lookup_phi,
                                     masked_slot_softmax, slot_layer_norm, symbolic_output_probs)

PAD, EOS = 1, 2


def _phi_brute(row, ignore):
    seen = {}
    for t in row:
        if t not in ignore and t not in seen:
            seen[t] = len(seen)
    return seen


def test_phi_first_appearance_hand_built():
    ctx = torch.tensor([[7, 5, 7, 9, 5, 2, 1, 1],
                        [4, 4, 4, 2, 1, 1, 1, 1]])
    s = context_symbols(ctx, ignore_ids=[PAD, EOS], pad=PAD)
    assert s.slot_vocab.tolist() == [[7, 5, 9], [4, PAD, PAD]]
    assert s.slot_mask.tolist() == [[True, True, True], [True, False, False]]
    assert lookup_phi(ctx, s).tolist() == [[0, 1, 0, 2, 1, -1, -1, -1], [0, 0, 0, -1, -1, -1, -1, -1]]
    # a decoder input is looked up through the same φ; non-context words get -1
    assert lookup_phi(torch.tensor([[9, 8], [4, 7]]), s).tolist() == [[2, -1], [0, -1]]


def test_phi_random_against_brute_force():
    g = torch.Generator().manual_seed(0)
    ctx = torch.randint(3, 12, (6, 20), generator=g)
    ctx[2, 10:] = PAD
    s = context_symbols(ctx, [PAD, EOS], PAD)
    for b in range(6):
        ref = _phi_brute(ctx[b].tolist(), {PAD, EOS})
        assert [s.slot_vocab[b, j].item() for j in range(len(ref))] == list(ref)
        assert s.slot_mask[b].sum().item() == len(ref)


def test_phi_cap():
    ctx = torch.tensor([[3, 4, 5, 6, 3]])
    s = context_symbols(ctx, [PAD], PAD, max_symbols=2)
    assert s.slot_vocab.tolist() == [[3, 4]]
    assert lookup_phi(ctx, s).tolist() == [[0, 1, -1, -1, 0]]
    assert context_symbols(ctx, [PAD], PAD).first(2).slot_vocab.tolist() == [[3, 4]]


def test_first_equals_the_capped_numbering():
    """ContextSymbols.first(cap) (stpr numbers the context once, uncapped, for entity dropout)
    gives what context_symbols(..., max_symbols=cap) gives, on random rows with padding."""
    g = torch.Generator().manual_seed(1)
    ctx = torch.randint(3, 12, (6, 20), generator=g)
    ctx[2, 10:] = PAD
    full = context_symbols(ctx, [PAD, EOS], PAD)
    for cap in (None, 1, 3, 5, 9, 50):
        ref = context_symbols(ctx, [PAD, EOS], PAD, max_symbols=cap)
        got = full.first(cap)
        assert torch.equal(got.slot_vocab, ref.slot_vocab) and torch.equal(got.slot_mask, ref.slot_mask), cap


def test_beam_reorder():
    s = context_symbols(torch.tensor([[3, 4], [5, 5]]), [PAD], PAD)
    r = s.index_select(torch.tensor([1, 1, 0]))
    assert r.slot_vocab.tolist() == [[5, PAD], [5, PAD], [3, 4]]


def _pipeline(ctx, torch_seed=0):
    """embedding -> symbolic linear -> slot LN -> symbolic output, for one batch."""
    torch.manual_seed(torch_seed)
    emb = HybridEmbedding(20, 6, padding_idx=PAD)
    with torch.no_grad():
        emb.alpha_logit.normal_()
    lin = SymbolicLinear(6, 20)
    with torch.no_grad():
        lin.lam.fill_(0.7), lin.gamma.fill_(0.3)
    s = context_symbols(ctx, [PAD, EOS], PAD)
    h_sem, h_sym = emb(ctx, lookup_phi(ctx, s), s.m)
    logits, h_sym = lin(h_sem, h_sym, s.slot_mask)
    h_sym = slot_layer_norm(h_sym + 0.1, s.slot_mask)
    return symbolic_output_probs(logits, h_sym, s, torch.tensor(0.4)), s


def test_padding_invariance():
    """The same example alone, or batched with a longer one with more symbols, gives the same p."""
    a = torch.tensor([[3, 4, 3, 5]])
    long = torch.tensor([[6, 7, 8, 9, 10, 11, 12, 13]])
    p_alone, _ = _pipeline(a)
    batch = torch.cat([torch.cat([a, torch.full((1, 4), PAD)], 1), long])
    p_batch, s = _pipeline(batch)
    assert s.m == 8
    torch.testing.assert_close(p_batch[0, :4], p_alone[0], rtol=0, atol=1e-6)


def test_symbolic_output_against_brute_force():
    g = torch.Generator().manual_seed(1)
    ctx = torch.tensor([[5, 6, 5, 9, PAD], [8, 8, 3, 4, 7]])
    s = context_symbols(ctx, [PAD, EOS], PAD)
    V = 12
    sem = torch.randn(2, 3, V, generator=g)
    h_sym = torch.randn(2, 3, s.m, generator=g)
    beta_logit = torch.tensor(0.3)
    p = symbolic_output_probs(sem, h_sym, s, beta_logit)
    torch.testing.assert_close(p.sum(-1), torch.ones(2, 3))
    beta = torch.sigmoid(beta_logit).item()
    for b in range(2):
        words = list(_phi_brute(ctx[b].tolist(), {PAD, EOS}))
        for t in range(3):
            ps = torch.softmax(sem[b, t], -1)
            z = [torch.exp(h_sym[b, t, j]).item() for j in range(len(words))]
            for v in range(V):
                ref = beta * ps[v].item()
                if v in words:
                    ref += (1 - beta) * z[words.index(v)] / sum(z)
                assert abs(p[b, t, v].item() - ref) < 1e-6, (b, t, v)


def test_unseen_words_get_zero_logit_and_symbolic_mass():
    ctx = torch.tensor([[5, 6]])
    s = context_symbols(ctx, [PAD], PAD)
    sem = torch.full((1, 1, 8), 3.0)
    unseen = torch.zeros(8, dtype=torch.bool)
    unseen[6] = True
    p = symbolic_output_probs(sem, torch.zeros(1, 1, 2), s, torch.tensor(0.0), unseen=unseen)
    e3 = torch.exp(torch.tensor(3.0))
    ref6 = 0.5 * 1 / (7 * e3 + 1) + 0.5 * 0.5
    assert abs(p[0, 0, 6].item() - ref6) < 1e-6


def test_symbolic_linear_and_softmax_cover_real_slots_only():
    lin = SymbolicLinear(2, 2)
    with torch.no_grad():
        lin.lam.fill_(2.0), lin.gamma.fill_(1.0)
    mask = torch.tensor([[True, True, False]])
    _, out = lin(torch.zeros(1, 1, 2), torch.tensor([[[1.0, 2.0, 50.0]]]), mask)
    assert out.tolist() == [[[2 + 3.0, 4 + 3.0, 0.0]]]
    sm = masked_slot_softmax(torch.tensor([[[0.0, 0.0, 9.0]]]), mask)
    assert sm.tolist() == [[[0.5, 0.5, 0.0]]]
    ln = slot_layer_norm(torch.tensor([[[1.0, 3.0, 99.0]]]), mask)
    torch.testing.assert_close(ln, torch.tensor([[[-1.0, 1.0, 0.0]]]), atol=1e-4, rtol=0)


def test_hybrid_embedding_alpha_and_unseen():
    emb = HybridEmbedding(10, 3, padding_idx=PAD)
    tok = torch.tensor([[4, 5, 4]])
    s = context_symbols(tok, [PAD], PAD)
    h_sem, h_sym = emb(tok, lookup_phi(tok, s), s.m)
    assert h_sym.tolist() == [[[0.5, 0], [0, 0.5], [0.5, 0]]]         # α = sigmoid(0)
    torch.testing.assert_close(h_sem, emb.semantic.weight[tok])
    emb.set_unseen([5], zero_alpha=True)
    h_sem, h_sym = emb(tok, lookup_phi(tok, s), s.m)
    assert h_sem[0, 1].abs().sum() == 0 and h_sym[0, 1].abs().sum() == 0 and h_sem[0, 0].abs().sum() > 0
