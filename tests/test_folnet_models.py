"""FOLNet models: padding invariance, causality, prefix LM, incremental decoding."""
import pytest
import torch

from fairseq.sequence_generator import SequenceGenerator

from folnet_helpers import build, random_tokens, single_thread  # noqa: F401
from nesyseq.plugins.tasks.prefix_lm import PrefixLMGenerationModel

OPS_EACH = ["c.", "j.", "m.", ".a", ".p", ".t", "jmc.atp"]
EXTRA_PAD = 40


def pad_right(tokens, n, pad):
    return torch.cat([tokens, tokens.new_full((tokens.size(0), n), pad)], dim=1)


def pad_left(tokens, n, pad):
    return torch.cat([tokens.new_full((tokens.size(0), n), pad), tokens], dim=1)


# ---------------------------------------------------------------- padding invariance
def test_encoder_padding_invariance():
    model, d = build("folnet_tiny")
    g = torch.Generator().manual_seed(0)
    x = random_tokens(d, 2, 6, g)
    x[:, 0] = d.bos()
    x[1, 4:] = d.pad()  # the second sample is shorter
    ref, _ = model(x, features_only=True)
    out, _ = model(pad_right(x, EXTRA_PAD, d.pad()), features_only=True)
    real = x.ne(d.pad())
    torch.testing.assert_close(out[:, :6][real], ref[real], rtol=1e-9, atol=1e-9)


@pytest.mark.parametrize("side", ["right", "left"])
def test_lm_padding_invariance(side):
    model, d = build("folnet_lm_tiny")
    g = torch.Generator().manual_seed(1)
    x = random_tokens(d, 2, 6, g)
    ref, _ = model(x)
    if side == "right":
        out, _ = model(pad_right(x, EXTRA_PAD, d.pad()))
        out = out[:, :6]
    else:
        out, _ = model(pad_left(x, EXTRA_PAD, d.pad()))
        out = out[:, EXTRA_PAD:]
    torch.testing.assert_close(out, ref, rtol=1e-9, atol=1e-9)


def _src_tgt(d, g):
    src = random_tokens(d, 2, 5, g)
    src[1, :2] = d.pad()  # left-padded source (fairseq's translation default)
    prev = random_tokens(d, 2, 4, g)
    prev[:, 0] = d.eos()
    prev[1, 3:] = d.pad()  # right-padded target
    return src, prev


def test_encdec_padding_invariance():
    model, d = build("folnet_transformer_tiny")
    src, prev = _src_tgt(d, torch.Generator().manual_seed(2))
    ref, _ = model(src, None, prev)
    out, _ = model(pad_left(src, EXTRA_PAD, d.pad()), None, pad_right(prev, EXTRA_PAD, d.pad()))
    real = prev.ne(d.pad())
    torch.testing.assert_close(out[:, :4][real], ref[real], rtol=1e-9, atol=1e-9)


def test_prefix_lm_padding_invariance():
    model, d = build("folnet_lm_tiny")
    src, prev = _src_tgt(d, torch.Generator().manual_seed(3))
    ref, _ = model(src, None, prev)
    out, _ = model(pad_left(src, EXTRA_PAD, d.pad()), None, pad_right(prev, EXTRA_PAD, d.pad()))
    real = prev.ne(d.pad())
    torch.testing.assert_close(out[:, :4][real], ref[real], rtol=1e-9, atol=1e-9)


# ---------------------------------------------------------------- causality
def _perturb_after(tokens, t, d, seed):
    g = torch.Generator().manual_seed(seed)
    y = tokens.clone()
    y[:, t + 1:] = random_tokens(d, tokens.size(0), tokens.size(1) - t - 1, g)
    return y


@pytest.mark.parametrize("ops", OPS_EACH)
def test_lm_causality(ops):
    model, d = build("folnet_lm_tiny", folnet_ops=ops)
    g = torch.Generator().manual_seed(4)
    x = random_tokens(d, 2, 7, g)
    t = 3
    y = _perturb_after(x, t, d, 5)
    ox, ex = model(x)
    oy, ey = model(y)
    torch.testing.assert_close(ox[:, : t + 1], oy[:, : t + 1], rtol=1e-10, atol=1e-10)
    torch.testing.assert_close(ex["binary_atoms"][:, : t + 1], ey["binary_atoms"][:, : t + 1], rtol=1e-10, atol=1e-10)
    assert not torch.allclose(ox[:, t + 1:], oy[:, t + 1:])  # the test can see a change
    # binary atoms are causal: u(x_t, x_tau) = 0 for tau > t
    B2 = ex["binary_atoms"]
    upper = torch.ones(7, 7, dtype=torch.bool).triu(1)
    assert (B2[:, upper] == 0).all()


@pytest.mark.parametrize("ops", OPS_EACH)
def test_encdec_decoder_causality(ops):
    model, d = build("folnet_transformer_tiny", folnet_ops=ops)
    g = torch.Generator().manual_seed(6)
    src = random_tokens(d, 2, 5, g)
    prev = random_tokens(d, 2, 6, g)
    t = 2
    prev2 = _perturb_after(prev, t, d, 7)
    ox, ex = model(src, None, prev)
    oy, ey = model(src, None, prev2)
    torch.testing.assert_close(ox[:, : t + 1], oy[:, : t + 1], rtol=1e-10, atol=1e-10)
    torch.testing.assert_close(ex["binary_atoms"][:, : t + 1], ey["binary_atoms"][:, : t + 1], rtol=1e-10, atol=1e-10)
    assert not torch.allclose(ox[:, t + 1:], oy[:, t + 1:])


# ---------------------------------------------------------------- prefix LM
@pytest.mark.parametrize("ops", ["j.", "c.", ".a", "jmc.atp"])
def test_prefix_lm_later_prefix_token_changes_earlier_outputs(ops):
    # (mu and trans alone read only binary atoms, which start token-independent, so
    # nothing can flow between tokens with them alone; they are covered below)
    model, d = build("folnet_lm_tiny", folnet_ops=ops)
    g = torch.Generator().manual_seed(8)
    src = random_tokens(d, 2, 5, g)
    prev = random_tokens(d, 2, 4, g)
    _, base = model(src, None, prev)
    src2 = src.clone()
    src2[:, 4] = (src[:, 4] - d.nspecial + 1) % (len(d) - d.nspecial) + d.nspecial
    _, e2 = model(src2, None, prev)
    if "j" in ops or "c" in ops:
        assert not torch.allclose(base["prefix_features"][:, 0], e2["prefix_features"][:, 0])
    if "a" in ops:  # binary atom u(x_0, x_4) of the prefix
        assert not torch.allclose(base["binary_atoms"][:, 0, 4], e2["binary_atoms"][:, 0, 4])


@pytest.mark.parametrize("ops", OPS_EACH)
def test_prefix_lm_target_does_not_change_prefix_and_is_causal(ops):
    model, d = build("folnet_lm_tiny", folnet_ops=ops)
    g = torch.Generator().manual_seed(8)
    src = random_tokens(d, 2, 5, g)
    prev = random_tokens(d, 2, 4, g)
    o1, base = model(src, None, prev)
    prev2 = random_tokens(d, 2, 4, torch.Generator().manual_seed(9))
    _, e3 = model(src, None, prev2)
    torch.testing.assert_close(base["prefix_features"], e3["prefix_features"], rtol=1e-10, atol=1e-10)
    torch.testing.assert_close(base["binary_atoms"][:, :5], e3["binary_atoms"][:, :5], rtol=1e-10, atol=1e-10)
    prev3 = _perturb_after(prev, 1, d, 10)
    o3, e4 = model(src, None, prev3)
    torch.testing.assert_close(o1[:, :2], o3[:, :2], rtol=1e-10, atol=1e-10)
    torch.testing.assert_close(base["binary_atoms"][:, :7], e4["binary_atoms"][:, :7], rtol=1e-10, atol=1e-10)


# ---------------------------------------------------------------- incremental decoding
def _incremental(decoder, prev, encoder_out=None, src_prefix=None, reorder_at=None, perm=None, reorder_enc=None):
    state = {}
    outs = []
    for i in range(prev.size(1)):
        o, _ = decoder(prev[:, : i + 1], encoder_out=encoder_out, incremental_state=state, src_prefix=src_prefix)
        outs.append(o[:, -1:])
        if i == reorder_at:
            decoder.reorder_incremental_state_scripting(state, perm)
            prev = prev[perm]
            outs = [x[perm] for x in outs]
            if encoder_out is not None:
                encoder_out = reorder_enc(encoder_out, perm)
    return torch.cat(outs, dim=1), prev


@pytest.mark.parametrize("ops", ["jmc.atp", "c.t"])
def test_lm_incremental_equals_full(ops):
    model, d = build("folnet_lm_tiny", folnet_ops=ops)
    x = random_tokens(d, 3, 6, torch.Generator().manual_seed(11))
    perm = torch.tensor([2, 0, 0])
    inc, x_final = _incremental(model.decoder, x, reorder_at=2, perm=perm)
    full, _ = model(x_final)
    torch.testing.assert_close(inc, full, rtol=1e-9, atol=1e-9)


def test_prefix_lm_incremental_equals_full():
    model, d = build("folnet_lm_tiny")
    src, _ = _src_tgt(d, torch.Generator().manual_seed(12))
    prev = random_tokens(d, 2, 5, torch.Generator().manual_seed(13))
    prev[:, 0] = d.eos()
    inc, _ = _incremental(model.decoder, prev, src_prefix=src)
    full, _ = model(src, None, prev)
    torch.testing.assert_close(inc, full, rtol=1e-9, atol=1e-9)


def test_encdec_incremental_equals_full():
    model, d = build("folnet_transformer_tiny")
    src, _ = _src_tgt(d, torch.Generator().manual_seed(14))
    prev = random_tokens(d, 2, 5, torch.Generator().manual_seed(15))
    enc = model.encoder(src)
    perm = torch.tensor([1, 1])
    inc, prev_final = _incremental(model.decoder, prev, encoder_out=enc, reorder_at=1, perm=perm,
                                   reorder_enc=model.encoder.reorder_encoder_out)
    full, _ = model(src[perm], None, prev_final)
    torch.testing.assert_close(inc, full, rtol=1e-9, atol=1e-9)


def _check_generator_scores(model, gen_model, d, src, beam):
    gen = SequenceGenerator([gen_model], d, beam_size=beam, max_len_a=0, max_len_b=6, min_len=2)
    sample = {"net_input": {"src_tokens": src, "src_lengths": src.ne(d.pad()).sum(1)}}
    hypos = gen.generate([gen_model], sample)
    checked = 0
    for b, hs in enumerate(hypos):
        assert len(hs) == beam
        for h in hs:
            tgt = h["tokens"][None]
            prev = torch.cat([tgt.new_full((1, 1), d.eos()), tgt[:, :-1]], dim=1)
            logits, _ = model(src[b: b + 1], None, prev)
            lp = torch.log_softmax(logits.double(), -1).gather(-1, tgt[..., None])[0, :, 0]
            torch.testing.assert_close(h["positional_scores"].double(), lp, rtol=1e-5, atol=1e-5)
            checked += 1
    assert checked == src.size(0) * beam


@pytest.mark.parametrize("beam", [1, 4])
def test_encdec_generator_equals_full(beam):
    model, d = build("folnet_transformer_tiny")
    src, _ = _src_tgt(d, torch.Generator().manual_seed(16))
    _check_generator_scores(model, model, d, src, beam)


@pytest.mark.parametrize("beam", [1, 4])
def test_prefix_lm_generator_equals_full(beam):
    model, d = build("folnet_lm_tiny")
    src, _ = _src_tgt(d, torch.Generator().manual_seed(17))
    _check_generator_scores(model, PrefixLMGenerationModel(model), d, src, beam)


def test_bad_ops_is_one_line_value_error():
    with pytest.raises(ValueError, match=r"--folnet-ops='jmq\.atp'.*valid"):
        build("folnet_lm_tiny", folnet_ops="jmq.atp")


# ---------------------------------------------------------------- activation checkpointing, heads
def test_checkpoint_activations_same_gradients():
    grads = []
    for ckpt in (False, True):
        torch.manual_seed(0)
        model, d = build("folnet_lm_tiny", checkpoint_activations=ckpt, dropout=0.0)
        model.train()
        x = random_tokens(d, 2, 6, torch.Generator().manual_seed(18))
        out, _ = model(x)
        out.logsumexp(-1).sum().backward()
        grads.append({n: p.grad.clone() for n, p in model.named_parameters() if p.grad is not None})
    assert grads[0].keys() == grads[1].keys() and len(grads[0]) > 10
    for n in grads[0]:
        torch.testing.assert_close(grads[0][n], grads[1][n], rtol=1e-9, atol=1e-12)


def test_classification_head_roberta_interface():
    model, d = build("folnet_tiny")
    model.register_classification_head("sentence_classification_head", num_classes=3)
    model.double()
    x = random_tokens(d, 2, 6, torch.Generator().manual_seed(19))
    x[:, 0] = d.bos()
    logits, extra = model(x, features_only=True, classification_head_name="sentence_classification_head")
    assert logits.shape == (2, 3)
    masked = torch.zeros_like(x, dtype=torch.bool)
    masked[:, 2] = True
    mlm, _ = model(x, masked_tokens=masked)
    assert mlm.shape == (2, len(d))


def test_checkpoint_activations_saves_less():
    saved = {}
    for ckpt in (False, True):
        torch.manual_seed(0)
        model, d = build("folnet_lm_tiny", checkpoint_activations=ckpt, dropout=0.0)
        model.train()
        seen = {}

        def pack(t):
            seen[t.untyped_storage().data_ptr()] = t.untyped_storage().nbytes()
            return t

        x = random_tokens(d, 2, 16, torch.Generator().manual_seed(20))
        with torch.autograd.graph.saved_tensors_hooks(pack, lambda t: t):
            out, _ = model(x)
        out.logsumexp(-1).sum().backward()
        saved[ckpt] = sum(seen.values())
    assert saved[True] < 0.5 * saved[False]


def test_pretrained_encoder_loads_into_model_with_new_head():
    """masked_lm checkpoint -> sentence_prediction fine-tuning (the new head keeps its init)."""
    pre, d = build("folnet_tiny")
    ft, _ = build("folnet_tiny", dictionary=d)
    ft.register_classification_head("sentence_classification_head", num_classes=2)
    ft.double()
    head_before = {k: v.clone() for k, v in ft.classification_heads.state_dict().items()}
    ft.load_state_dict(pre.state_dict(), strict=True)
    for k, v in ft.classification_heads.state_dict().items():
        torch.testing.assert_close(v, head_before[k])
    for (k, a), (_, b) in zip(pre.encoder.state_dict().items(), ft.encoder.state_dict().items()):
        torch.testing.assert_close(a, b)
