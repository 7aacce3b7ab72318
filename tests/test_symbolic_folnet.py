"""folnet_transformer --symbolic-embeddings / --symbolic-output: exact symbol-shift
equivariance, mutants, slot renumbering, padding, incremental decoding and beam reordering."""
import argparse

import pytest
import torch

import plugins  # noqa: F401
import plugins.models.folnet_transformer as ft
from fairseq import models
from plugins.layers import symbolic
from plugins.layers.symbolic_transformer import SymbolicFeedForward
from plugins.models.folnet_transformer import FolnetTransformerConfig, FolnetTransformerModel
from tests.qa_helpers import NAMES, FakeTask, encode, make_dict
from tests.test_symbolic_transformer import _reorder_slots as _reorder_slots_in
from tests.test_symbolic_transformer import (BOTH, PERM, PREFIX, STORIES, _dense_mutant, _permute_text,
                                             _prev)


def build(seed=0, tie=True, **flags):
    torch.manual_seed(seed)
    d = make_dict()
    args = argparse.Namespace(arch="folnet_transformer_tiny", share_all_embeddings=True, **flags)
    models.ARCH_CONFIG_REGISTRY["folnet_transformer_tiny"](args)
    fields = FolnetTransformerConfig.__dataclass_fields__
    cfg = FolnetTransformerConfig(**{k: v for k, v in vars(args).items() if k in fields})
    model = FolnetTransformerModel.build_model(cfg, FakeTask(d)).double().eval()
    with torch.no_grad():
        for p in model.parameters():
            p.add_(0.3 * torch.randn_like(p))
    if tie:
        ids = [d.index(n) for n in NAMES]
        with torch.no_grad():
            E = model.encoder.core.embed_tokens.weight
            E[ids] = E[ids[0]].clone()
            if model.encoder.alpha is not None and model.encoder.alpha.learned:
                a = model.encoder.alpha.alpha_logit
                a[ids] = a[ids[0]].clone()
    return model, d


def probs(model, d, texts, prefix=PREFIX):
    src = encode(d, texts)
    with torch.no_grad():
        out = model(src, src.ne(d.pad()).sum(1), _prev(d, len(texts), prefix))
        return model.get_normalized_probs(out, log_probs=False).double()


def gap(model, d):
    p = probs(model, d, STORIES)
    p_perm = probs(model, d, [_permute_text(t) for t in STORIES], _permute_text(PREFIX))
    idx = torch.arange(len(d))
    for a, b in PERM.items():
        idx[d.index(b)] = d.index(a)
    return (p_perm - p[..., idx]).abs().max().item()


def spread(model, d):
    p = probs(model, d, STORIES)[..., [d.index(n) for n in NAMES]]
    return (p.max(-1).values - p.min(-1).values).max().item()


@pytest.mark.parametrize("flags", [BOTH, dict(symbolic_embeddings=True), dict(symbolic_output=True)],
                         ids=["both", "embeddings", "output"])
def test_folnet_transformer_symbolic_is_equivariant(flags):
    model, d = build(**flags)
    assert gap(model, d) < 1e-9


def test_baseline_ties_names_and_symbolic_does_not():
    base, d = build()
    assert spread(base, d) < 1e-12 and gap(base, d) < 1e-9
    sym, d = build(**BOTH)
    assert spread(sym, d) > 1e-4


def test_mutants():
    model, d = build(**BOTH)
    with torch.no_grad():
        model.encoder.alpha.alpha_logit[d.index("john")] += 2.0
    assert gap(model, d) > 1e-6                       # one permuted name's α untied (exact: < 1e-9)


def _reorder_slots(monkeypatch, order_fn):
    _reorder_slots_in(monkeypatch, order_fn, module=ft)


def test_slot_numbering_and_dense_mutant(monkeypatch):
    model, d = build(**BOTH)
    p = probs(model, d, STORIES)
    g = torch.Generator().manual_seed(3)
    shuffle = lambda s: torch.stack([torch.randperm(s.m, generator=g) for _ in range(s.slot_vocab.size(0))])  # noqa
    by_id = lambda s: s.slot_vocab.masked_fill(~s.slot_mask, 10 ** 9).argsort(-1)  # noqa: E731
    with monkeypatch.context() as mp:
        _reorder_slots(mp, shuffle)
        torch.testing.assert_close(probs(model, d, STORIES), p, rtol=0, atol=1e-12)
    with monkeypatch.context() as mp:
        _reorder_slots(mp, by_id)
        assert gap(model, d) < 1e-9
    _dense_mutant(model)
    p = probs(model, d, STORIES)
    with monkeypatch.context() as mp:
        _reorder_slots(mp, shuffle)
        assert (probs(model, d, STORIES) - p).abs().max() > 1e-4
    with monkeypatch.context() as mp:
        _reorder_slots(mp, by_id)
        assert gap(model, d) > 1e-4


def test_padding_incremental_and_beam():
    model, d = build(**BOTH)
    torch.testing.assert_close(probs(model, d, STORIES)[1:], probs(model, d, STORIES[1:]), rtol=0, atol=1e-12)
    src = encode(d, STORIES)
    prev = _prev(d, 2)
    T = prev.size(1)
    with torch.no_grad():
        enc = model.encoder(src)
        full, _ = model.decoder(prev, encoder_out=enc)
        inc, steps = {}, []
        for t in range(T):
            steps.append(model.decoder(prev[:, : t + 1], encoder_out=enc, incremental_state=inc)[0])
        torch.testing.assert_close(torch.cat(steps, 1), full, rtol=0, atol=1e-12)
        order = torch.tensor([1, 1, 0])
        inc = {}
        for t in range(2):
            model.decoder(prev[:, : t + 1], encoder_out=enc, incremental_state=inc)
        model.decoder.reorder_incremental_state_scripting(inc, order)
        enc2 = model.encoder.reorder_encoder_out(enc, order)
        out, _ = model.decoder(prev[order][:, :3], encoder_out=enc2, incremental_state=inc)
        torch.testing.assert_close(out[:, -1], full[order, 2], rtol=0, atol=1e-12)
    assert torch.testing.assert_close(probs(model, d, STORIES).sum(-1), torch.ones(2, T, dtype=torch.float64)) is None


def test_symbolic_state_moves_through_join():
    """The symbolic score term changes the output (its scalars are not dead weights)."""
    model, d = build(**BOTH)
    p = probs(model, d, STORIES)
    with torch.no_grad():
        for layer in model.decoder.stack.layers:
            layer.sym.lam_q.zero_(), layer.sym.gamma_q.zero_()
    assert (probs(model, d, STORIES) - p).abs().max() > 1e-4


def test_decoder_input_is_looked_up_through_the_source_phi():
    """'john' (in story 1's context) and 'sandra' (a tied name absent from it) differ only
    through φ as decoder inputs; two absent tied names give the same output."""
    model, d = build(**BOTH)
    p_john, p_sandra = probs(model, d, STORIES[:1], "john")[0, 1], probs(model, d, STORIES[:1], "sandra")[0, 1]
    assert (p_john - p_sandra).abs().max() > 1e-4
    torch.testing.assert_close(probs(model, d, STORIES[1:], "john")[0, 1],
                               probs(model, d, STORIES[1:], "daniel")[0, 1], rtol=0, atol=1e-12)


def test_unseen_words_get_zero_rows():
    model, d = build(**BOTH)
    w = d.index("office")
    model.set_unseen([w])
    src = encode(d, STORIES)
    with torch.no_grad():
        emb = model.encoder.core.embed_tokens
        assert emb(torch.tensor([[w]])).abs().sum() == 0 and emb(torch.tensor([[d.index("mary")]])).abs().sum() > 0
        z, _ = model.decoder(_prev(d, 2), encoder_out=model.encoder(src), features_only=True)
        assert (model.decoder.output_layer(z)[..., w] == 0).all()
        assert (model.decoder.output_layer(z)[..., d.index("kitchen")] != 0).all()
    assert gap(model, d) < 1e-9
