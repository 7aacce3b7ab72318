"""folnet_transformer --symbolic-embeddings / --symbolic-output: exact symbol-shift
equivariance, mutants, slot renumbering, padding, incremental decoding and beam reordering."""
import argparse

import pytest
import torch

from nesyseq import plugins  # noqa: F401
import nesyseq.plugins.models.folnet_transformer as ft
from fairseq import models
from nesyseq.plugins.models.folnet_transformer import FolnetTransformerConfig, FolnetTransformerModel
from tests.decoding_helpers import incremental_outputs, reorder_mid_sequence
from tests.qa_helpers import FakeTask, encode, make_dict
from tests.test_symbolic_transformer import BOTH, STORIES, _by_vocab_id, _dense_mutant, _prev, _shuffled
from tests.test_symbolic_transformer import equivariance_gap as gap
from tests.test_symbolic_transformer import name_spread as spread
from tests.test_symbolic_transformer import probs, tie_names


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
        tie_names(model, d, model.encoder.core.embed_tokens)
    return model, d


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


def test_slot_numbering_and_dense_mutant(monkeypatch):
    model, d = build(**BOTH)
    p = probs(model, d, STORIES)
    with monkeypatch.context() as mp:
        _shuffled(mp, module=ft)
        torch.testing.assert_close(probs(model, d, STORIES), p, rtol=0, atol=1e-12)
    with monkeypatch.context() as mp:
        _by_vocab_id(mp, module=ft)
        assert gap(model, d) < 1e-9
    _dense_mutant(model)
    p = probs(model, d, STORIES)
    with monkeypatch.context() as mp:
        _shuffled(mp, module=ft)
        assert (probs(model, d, STORIES) - p).abs().max() > 1e-4
    with monkeypatch.context() as mp:
        _by_vocab_id(mp, module=ft)
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
        torch.testing.assert_close(incremental_outputs(model, prev, enc), full, rtol=0, atol=1e-12)
        out, _, _ = reorder_mid_sequence(model, prev, enc, torch.tensor([1, 1, 0]), steps=2)
        torch.testing.assert_close(out, full[[1, 1, 0], 2], rtol=0, atol=1e-12)
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
