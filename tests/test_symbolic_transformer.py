"""--symbolic-embeddings / --symbolic-output on tp_transformer (and its transformer presets):
exact symbol-shift equivariance Φ(Γ(X)) = Γ(Φ(X)) with mutants as negative controls,
independence from the slot numbering, padding invariance, incremental decoding and beam
reordering, and the output mixture against a brute-force computation."""
import argparse

import pytest
import torch

from nesyseq import plugins  # noqa: F401  (registers the models)
import nesyseq.plugins.models.tp_transformer as tpt
from fairseq import models
from nesyseq.plugins.layers import symbolic
from nesyseq.plugins.layers.symbolic_transformer import SymbolicFeedForward
from nesyseq.plugins.models.tp_transformer import TPTransformerConfig, TPTransformerModel
from tests.decoding_helpers import incremental_outputs, reorder_mid_sequence
from tests.qa_helpers import NAMES, FakeTask, encode, make_dict
from tests.test_tp_transformer import projection_weights

STORIES = ["mary moved to the kitchen . john moved to the garden . daniel moved to the office . where is john ?",
           "sandra moved to the garden . mary moved to the office . where is mary ?"]
PERM = {"mary": "daniel", "john": "mary", "sandra": "john", "daniel": "sandra"}   # Γ on the names
# decoder inputs after </s>: a context name, a name absent from story 2, a non-name word
PREFIX = "john daniel garden"
BOTH = dict(symbolic_embeddings=True, symbolic_output=True)


def _permute_text(t):
    return " ".join(PERM.get(w, w) for w in t.split())


def build(arch="tp_transformer_tiny", seed=0, tie=True, perturb=True, **flags):
    """A small fp64 model in eval mode; ``perturb`` moves every parameter off its init,
    ``tie`` then gives the names equal per-word parameters."""
    torch.manual_seed(seed)
    d = make_dict()
    args = argparse.Namespace(arch=arch, encoder_embed_dim=16, encoder_ffn_embed_dim=32,
                              encoder_attention_heads=2, **flags)
    models.ARCH_CONFIG_REGISTRY[arch](args)
    fields = TPTransformerConfig.__dataclass_fields__
    cfg = TPTransformerConfig(**{k: v for k, v in vars(args).items() if k in fields})
    model = TPTransformerModel.build_model(cfg, FakeTask(d)).double().eval()
    if perturb:
        with torch.no_grad():  # move every parameter (λ, γ, β, gains included) off its init
            for p in model.parameters():
                p.add_(0.3 * torch.randn_like(p))
    if tie:
        tie_names(model, d)
    return model, d


def tie_names(model, d, embed_tokens=None):
    """The names share every per-word parameter: their E row and their α logit."""
    ids = [d.index(n) for n in NAMES]
    with torch.no_grad():
        E = (embed_tokens or model.encoder.embedding.embed_tokens).weight
        E[ids] = E[ids[0]].clone()
        if model.encoder.alpha is not None and model.encoder.alpha.learned:
            a = model.encoder.alpha.alpha_logit
            a[ids] = a[ids[0]].clone()


def _prev(d, n, prefix=PREFIX):
    words = prefix.split()
    return torch.tensor([[d.eos()] + [d.index(w) for w in words]] * n)


def probs(model, d, texts, prefix=PREFIX):
    """p(y_t | y_<t, X) for the decoder inputs </s> + prefix: (B, T, V) float64."""
    src = encode(d, texts)
    prev = _prev(d, len(texts), prefix)
    with torch.no_grad():
        out = model(src, src.ne(d.pad()).sum(1), prev)
        return model.get_normalized_probs(out, log_probs=False).double()


def equivariance_gap(model, d):
    p = probs(model, d, STORIES)
    p_perm = probs(model, d, [_permute_text(t) for t in STORIES], _permute_text(PREFIX))
    idx = torch.arange(len(d))
    for a, b in PERM.items():
        idx[d.index(b)] = d.index(a)          # Γ(p)[Γ(w)] = p[w]
    return (p_perm - p[..., idx]).abs().max().item()


def name_spread(model, d):
    p = probs(model, d, STORIES)[..., [d.index(n) for n in NAMES]]
    return (p.max(-1).values - p.min(-1).values).max().item()


FLAGS = [BOTH, dict(symbolic_embeddings=True), dict(symbolic_output=True)]


@pytest.mark.parametrize("flags", FLAGS, ids=["both", "embeddings", "output"])
@pytest.mark.parametrize("seed", [0, 1])
def test_tp_transformer_symbolic_is_equivariant(seed, flags):
    model, d = build(seed=seed, **flags)
    assert equivariance_gap(model, d) < 1e-9


@pytest.mark.parametrize("arch", ["transformer_math_tiny", "transformer_tp_wmt_en_de"])
def test_transformer_presets_symbolic_are_equivariant(arch):
    model, d = build(arch, encoder_layers=1, decoder_layers=1, dropout=0.0, **BOTH)
    assert not model.encoder.layers[0].self_attn.role_binding      # r ≡ 1: the plain transformer
    assert equivariance_gap(model, d) < 1e-9
    assert name_spread(model, d) > 1e-4


def test_symbolic_score_init_sets_lambda_q_of_every_attention():
    """--symbolic-score-init is the init of λ_q in every symbolic attention (encoder self,
    decoder self and cross); the rest of the init is unchanged, and the default is 1."""
    def lam_q(**flags):
        model, _ = build(tie=False, perturb=False, **BOTH, **flags)
        mods = [m for m in model.modules() if hasattr(m, "sym_lam_q")]
        assert len(mods) == 3 * len(model.encoder.layers)      # 2 + 2 layers: 2 + 2 × 2
        return torch.cat([m.sym_lam_q for m in mods]), torch.cat([m.sym_lam_o for m in mods])

    default_q, default_o = lam_q()
    zero_q, zero_o = lam_q(symbolic_score_init=0.0)
    quarter_q, _ = lam_q(symbolic_score_init=0.25)
    assert (default_q == 1).all() and (zero_q == 0).all() and (quarter_q == 0.25).all()
    assert torch.equal(default_o, zero_o)


def test_baseline_ties_names_exactly_symbolic_does_not():
    base, d = build()
    assert name_spread(base, d) < 1e-12
    assert equivariance_gap(base, d) < 1e-9          # trivially: no negative control
    sym, d = build(**BOTH)
    assert name_spread(sym, d) > 1e-4
    # --symbolic-embeddings alone: the output is semantic, tied names' rows are equal
    emb_only, d = build(symbolic_embeddings=True)
    assert name_spread(emb_only, d) < 1e-12


def test_mutant_untied_alpha_breaks_equivariance():
    model, d = build(**BOTH)
    with torch.no_grad():
        model.encoder.alpha.alpha_logit[d.index("john")] += 1.0
    assert equivariance_gap(model, d) > 1e-4


def _reorder_slots(monkeypatch, order_fn, module=tpt):
    """Renumber the context slots by ``order_fn`` in ``module``'s ``context_symbols``."""
    real_cs = symbolic.context_symbols

    def patched(ctx, ignore, pad, max_symbols=None):
        s = real_cs(ctx, ignore, pad, max_symbols)
        order = order_fn(s)
        return symbolic.ContextSymbols(s.slot_vocab.gather(1, order), s.slot_mask.gather(1, order))

    monkeypatch.setattr(module, "context_symbols", patched)


def _shuffled(monkeypatch, seed=3, module=tpt):
    g = torch.Generator().manual_seed(seed)
    _reorder_slots(monkeypatch, lambda s: torch.stack([torch.randperm(s.m, generator=g)
                                                       for _ in range(s.slot_vocab.size(0))]), module)


def _by_vocab_id(monkeypatch, module=tpt):
    _reorder_slots(monkeypatch, lambda s: s.slot_vocab.masked_fill(~s.slot_mask, 10 ** 9).argsort(-1), module)


def _dense_mutant(model, seed=7):
    """Replace every symbolic FF's (λI + γ11ᵀ) by a dense m×m matrix."""
    dense = torch.randn(32, 32, generator=torch.Generator().manual_seed(seed), dtype=torch.float64) / 4
    for mod in model.modules():
        if isinstance(mod, SymbolicFeedForward):
            def fwd(s, slot_mask, _dense=dense):
                m = s.size(-1)
                return torch.relu(s @ _dense[:m, :m]) * symbolic._expand_mask(slot_mask, s)
            mod.forward = fwd


def test_slot_numbering_does_not_matter(monkeypatch):
    """Any bijection φ (random, or by vocabulary id) gives the same p; the vocabulary-id φ
    keeps the model equivariant."""
    model, d = build(**BOTH)
    p = probs(model, d, STORIES)
    with monkeypatch.context() as mp:
        _shuffled(mp)
        torch.testing.assert_close(probs(model, d, STORIES), p, rtol=0, atol=1e-12)
    with monkeypatch.context() as mp:
        _by_vocab_id(mp)
        torch.testing.assert_close(probs(model, d, STORIES), p, rtol=0, atol=1e-12)
        assert equivariance_gap(model, d) < 1e-9


def test_mutant_dense_symbolic_layer(monkeypatch):
    """A dense m×m symbolic map makes p depend on the slot numbering, and with φ numbered by
    vocabulary id the model is no longer equivariant (first appearance still is)."""
    model, d = build(**BOTH)
    _dense_mutant(model)
    p = probs(model, d, STORIES)
    assert equivariance_gap(model, d) < 1e-9          # first-appearance φ: names keep their slots
    with monkeypatch.context() as mp:
        _shuffled(mp)
        assert (probs(model, d, STORIES) - p).abs().max() > 1e-4
    with monkeypatch.context() as mp:
        _by_vocab_id(mp)
        assert equivariance_gap(model, d) > 1e-4


def test_padding_invariance():
    """An example alone or batched with a longer one with more symbols (larger T and m)."""
    model, d = build(**BOTH)
    alone = probs(model, d, STORIES[1:])
    batched = probs(model, d, STORIES)[1:]
    torch.testing.assert_close(batched, alone, rtol=0, atol=1e-12)
    src = encode(d, STORIES)
    with torch.no_grad():
        enc = model.encoder(src)
    assert enc["slot_mask"][0].sum(1).tolist() == [11, 9]   # m per example (no '.', '?', </s>)


def test_output_mixture_against_brute_force():
    """p = β softmax(E^T z) + (1−β) B_φ softmax(s), recomputed by hand from the decoder's
    features: sums to 1, a word outside the context only gets the semantic part."""
    model, d = build(**BOTH)
    src = encode(d, STORIES)
    prev = _prev(d, 2)
    with torch.no_grad():
        enc = model.encoder(src)
        z, extra = model.decoder(prev, encoder_out=enc, features_only=True)
        s = extra["symbolic_state"][0]
        p = model.get_normalized_probs(model.decoder(prev, encoder_out=enc), log_probs=False).double()
        lp = model.get_normalized_probs(model.decoder(prev, encoder_out=enc), log_probs=True).double()
    torch.testing.assert_close(p.sum(-1), torch.ones(2, prev.size(1), dtype=torch.float64))
    torch.testing.assert_close(lp.exp(), p, rtol=1e-6, atol=1e-12)
    beta = torch.sigmoid(model.decoder.beta_logit).item()
    E = model.decoder.embedding.weight
    for b, text in enumerate(STORIES):
        ctx = []
        for w in text.split():
            if w not in (".", "?") and w not in ctx:
                ctx.append(w)
        for t in range(prev.size(1)):
            p_sem = torch.softmax(E @ z[b, t], -1)
            p_slot = torch.softmax(s[b, t, : len(ctx)], -1)
            for v in range(len(d)):
                ref = beta * p_sem[v].item()
                w = d[v]
                if w in ctx:
                    ref += (1 - beta) * p_slot[ctx.index(w)].item()
                assert abs(p[b, t, v].item() - ref) < 1e-10, (b, t, w)
    assert (s[1, :, 10:] == 0).all()                  # padded slots of the shorter context stay 0


def test_incremental_decoding_and_beam_reorder_equal_full_forward():
    model, d = build(**BOTH)
    src = encode(d, STORIES)
    prev = torch.tensor([[d.eos()] + [d.index(w) for w in "john daniel garden to".split()],
                         [d.eos()] + [d.index(w) for w in "mary office sandra is".split()]])
    with torch.no_grad():
        enc = model.encoder(src)
        full, _ = model.decoder(prev, encoder_out=enc)
        torch.testing.assert_close(incremental_outputs(model, prev, enc), full, rtol=0, atol=1e-12)
        # beam search: reorder cache and encoder output mid-sequence (example 1 twice, then 0)
        order = torch.tensor([1, 1, 0])
        out, full2, enc2 = reorder_mid_sequence(model, prev, enc, order, steps=3)
        assert enc2["slot_vocab"][0].tolist() == enc["slot_vocab"][0][order].tolist()
        torch.testing.assert_close(out, full2, rtol=0, atol=1e-12)
        # and against the un-reordered full forward of the source rows
        torch.testing.assert_close(out, full[order, 3], rtol=0, atol=1e-12)


def test_unseen_words_zero_rows_and_alpha_option():
    model, d = build(**BOTH, zero_unseen_alpha=True)
    w = d.index("office")
    model.set_unseen([w])
    src = encode(d, STORIES)
    with torch.no_grad():
        enc = model.encoder(src)
        z, _ = model.decoder(_prev(d, 2), encoder_out=enc, features_only=True)
        assert (model.decoder.output_layer(z)[..., w] == 0).all()
        assert (model.encoder.alpha(src, torch.zeros_like(src), 1)[src.eq(w)] == 0).all()
        emb, tok, pos = model.encoder.embedding, torch.tensor([[w]]), torch.tensor([[3]])
        e = emb(tok, pos)
        emb.zero_unseen = False                        # reference: the same lookup with E[w] = 0
        emb.embed_tokens.weight[w] = 0.0
        torch.testing.assert_close(e, emb(tok, pos), rtol=0, atol=0)
        emb.zero_unseen = True
    assert equivariance_gap(model, d) < 1e-9


def test_fp16_half_model_returns_fp32_probabilities():
    model, d = build(**BOTH)
    model = model.float()
    src = encode(d, STORIES)
    with torch.no_grad():
        out = model(src, src.ne(d.pad()).sum(1), _prev(d, 2))
        lp = model.get_normalized_probs(out, log_probs=True)
    assert lp.dtype == torch.float32
    torch.testing.assert_close(lp.exp().sum(-1), torch.ones(2, 4))


def naive_symbolic_attention(mod, z, s, slot_mask, memory=None, memory_s=None, key_pad=None, causal=False,
                             bias=None):
    """The attention of plugins/layers/symbolic_transformer.py written out head by head."""
    d, H, dk = mod.embed_dim, mod.num_heads, mod.head_dim
    (Wq, Wr, Wk, Wv), (bq, br, bk, bv) = projection_weights(mod)
    if mod.self_attention:
        memory, memory_s = z, s
    B, T, _ = z.shape
    S = memory.size(1)
    real = slot_mask.double()[:, None, :]                                   # (B, 1, m)
    s, memory_s = s * real, memory_s * real
    bound = torch.zeros(B, T, d, dtype=z.dtype)
    out_sym = torch.zeros_like(s)
    for h in range(H):
        sl = slice(h * dk, (h + 1) * dk)
        q, r = z @ Wq[sl].T + bq[sl], z @ Wr[sl].T + br[sl]
        k, v = memory @ Wk[sl].T + bk[sl], memory @ Wv[sl].T + bv[sl]
        q_sym = (mod.sym_lam_q[h] * s + mod.sym_gamma_q[h] * s.sum(-1, keepdim=True)) * real
        score = (torch.einsum("btk,bsk->bts", q, k) + torch.einsum("btm,bsm->bts", q_sym, memory_s)) / dk ** 0.5
        if bias is not None:
            score = score + bias[:, h]
        if key_pad is not None:
            score = score.masked_fill(key_pad[:, None, :], float("-inf"))
        if causal:
            score = score.masked_fill(torch.ones(T, S, dtype=torch.bool).triu(1), float("-inf"))
        a = torch.softmax(score, -1)
        bound[..., sl] = torch.einsum("bts,bsk->btk", a, v) * r
        vs = torch.einsum("bts,bsm->btm", a, memory_s)
        out_sym += (mod.sym_lam_o[h] * vs + mod.sym_gamma_o[h] * vs.sum(-1, keepdim=True)) * real
    return mod.out_proj(bound), out_sym


@pytest.mark.parametrize("cross", [False, True])
def test_symbolic_attention_against_naive_reference(cross):
    model, _ = build(**BOTH)
    layer = model.decoder.layers[0]
    mod = layer.cross_attn if cross else layer.self_attn
    g = torch.Generator().manual_seed(5)
    B, T, S, m, d = 2, 4, 6, 5, mod.embed_dim
    z = torch.randn(B, T, d, generator=g, dtype=torch.float64)
    s = torch.randn(B, T, m, generator=g, dtype=torch.float64)
    mem = torch.randn(B, S, d, generator=g, dtype=torch.float64)
    mem_s = torch.randn(B, S, m, generator=g, dtype=torch.float64)
    slot_mask = torch.tensor([[True] * 5, [True] * 3 + [False] * 2])
    key_pad = torch.tensor([[False] * S, [False] * 4 + [True] * 2]) if cross else None
    with torch.no_grad():
        if cross:
            got = mod(z, s, slot_mask, memory=mem, memory_sym=mem_s, key_padding_mask=key_pad)
            ref = naive_symbolic_attention(mod, z, s, slot_mask, mem, mem_s, key_pad)
        else:
            got = mod(z, s, slot_mask, causal=True)
            ref = naive_symbolic_attention(mod, z, s, slot_mask, causal=True)
    for a, b in zip(got, ref):
        torch.testing.assert_close(a, b, rtol=1e-10, atol=1e-10)
    assert (got[1][1, :, 3:] == 0).all()


def test_decoder_input_is_looked_up_through_the_source_phi():
    """After </s>, 'john' (in story 1's context) and 'sandra' (a tied name absent from it)
    differ only through φ: their outputs must differ; two absent tied names must not."""
    model, d = build(**BOTH)
    p_john = probs(model, d, STORIES[:1], "john")[0, 1]
    p_sandra = probs(model, d, STORIES[:1], "sandra")[0, 1]
    assert (p_john - p_sandra).abs().max() > 1e-4
    p_john2 = probs(model, d, STORIES[1:], "john")[0, 1]
    p_daniel2 = probs(model, d, STORIES[1:], "daniel")[0, 1]
    torch.testing.assert_close(p_john2, p_daniel2, rtol=0, atol=1e-12)


def test_symbolic_decoding_steps_do_not_sync_with_the_host():
    """φ is built once in the encoder; each decoding step (lookup, attention, mixture) stays on
    the device."""
    from tests.test_tp_transformer import _HostSyncCounter

    model, d = build(**BOTH)
    src = encode(d, STORIES)
    prev = _prev(d, 2)
    with torch.no_grad():
        enc = model.encoder(src)
        inc = {}
        with _HostSyncCounter() as counter:
            for t in range(prev.size(1)):
                out = model.decoder(prev[:, : t + 1], encoder_out=enc, incremental_state=inc)
                model.get_normalized_probs(out, log_probs=True)
    assert counter.calls == []
