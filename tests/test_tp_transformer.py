"""TP-Transformer: TP-attention against independent references, incremental
decoding against the full forward pass, and the paper's parameter counts."""
import argparse
import math

import pytest
import torch
import torch.nn.functional as F

from nesyseq import plugins  # noqa: F401  (registers the models)
from fairseq import models
from fairseq.data import Dictionary
from nesyseq.plugins.layers.tp_attention import TPMultiheadAttention
from nesyseq.plugins.models.tp_transformer import TPTransformerConfig, TPTransformerModel
from tests.decoding_helpers import incremental_outputs, reorder_mid_sequence

torch.manual_seed(0)


def make_dict(n_symbols=68):
    d = Dictionary()
    for i in range(n_symbols):
        d.add_symbol(f"s{i}")
    return d


class _Task:
    def __init__(self, d):
        self.source_dictionary = self.target_dictionary = d


def build(arch, dictionary, **overrides):
    args = argparse.Namespace(arch=arch, **overrides)
    models.ARCH_CONFIG_REGISTRY[arch](args)
    cfg = TPTransformerConfig.from_namespace(args)
    return TPTransformerModel.build_model(cfg, _Task(dictionary))


def projection_weights(mod: TPMultiheadAttention):
    """-> (Wq, Wr, Wk, Wv), (bq, br, bk, bv): each (d, d) / (d,), from the fused projections."""
    d = mod.embed_dim
    if mod.self_attention:
        return mod.in_proj.weight.split(d, 0), mod.in_proj.bias.split(d, 0)
    (Wq, Wr), (Wk, Wv) = mod.q_proj.weight.split(d, 0), mod.kv_proj.weight.split(d, 0)
    (bq, br), (bk, bv) = mod.q_proj.bias.split(d, 0), mod.kv_proj.bias.split(d, 0)
    return (Wq, Wr, Wk, Wv), (bq, br, bk, bv)


def naive_tp_attention(mod: TPMultiheadAttention, z, memory=None, pad=None, causal=False, bias=None):
    """Eqs. 3-6 written out head by head with einsum, from the module's weights; ``bias``
    (B|1, H, T, S) is added to the scores (relative positions)."""
    d, H, dk = mod.embed_dim, mod.num_heads, mod.head_dim
    (Wq, Wr, Wk, Wv), (bq, br, bk, bv) = projection_weights(mod)
    if mod.self_attention:
        memory = z
    B, T, _ = z.shape
    S = memory.shape[1]
    out = torch.zeros(B, T, d, dtype=z.dtype)
    for h in range(H):
        sl = slice(h * dk, (h + 1) * dk)
        q = torch.einsum("btd,kd->btk", z, Wq[sl]) + bq[sl]  # eq. 3
        r = torch.einsum("btd,kd->btk", z, Wr[sl]) + br[sl]
        k = torch.einsum("bsd,kd->bsk", memory, Wk[sl]) + bk[sl]
        v = torch.einsum("bsd,kd->bsk", memory, Wv[sl]) + bv[sl]
        scores = torch.einsum("btk,bsk->bts", q, k) / math.sqrt(dk)  # eq. 5
        if bias is not None:
            scores = scores + bias[:, h]
        if pad is not None:
            scores = scores.masked_fill(pad[:, None, :], float("-inf"))
        if causal:
            scores = scores.masked_fill(torch.ones(T, S, dtype=torch.bool).triu(1), float("-inf"))
        alpha = scores.softmax(-1)
        vbar = torch.einsum("bts,bsk->btk", alpha, v)  # eq. 4
        Wo_h = mod.out_proj.weight[:, sl]  # W^(o)_h  (d, d_k)
        out += torch.einsum("btk,dk->btd", vbar * r, Wo_h)  # eq. 6
    return out + mod.out_proj.bias


@pytest.mark.parametrize("self_attention,causal", [(True, False), (True, True), (False, False)])
def test_tp_attention_matches_naive_equations(self_attention, causal):
    mod = TPMultiheadAttention(32, 4, self_attention=self_attention).double()
    with torch.no_grad():  # non-trivial biases so every term of eq. 3 is exercised
        for p in mod.parameters():
            if p.dim() == 1:
                p.normal_()
    z = torch.randn(3, 7, 32, dtype=torch.float64)
    mem = None if self_attention else torch.randn(3, 9, 32, dtype=torch.float64)
    S = 7 if self_attention else 9
    pad = torch.zeros(3, S, dtype=torch.bool)
    pad[1, -2:] = True  # right padding
    pad[2, :1] = True if not causal else False  # left padding (never fully masks a causal row)
    got = mod(z, memory=mem, key_padding_mask=pad, causal=causal)
    want = naive_tp_attention(mod, z, memory=mem, pad=pad, causal=causal)
    torch.testing.assert_close(got, want, rtol=1e-10, atol=1e-10)


def test_roles_fixed_to_one_is_standard_attention():
    """r ≡ 1 (role weights 0, bias 1) must equal torch's nn.MultiheadAttention."""
    d, H = 32, 4
    tp = TPMultiheadAttention(d, H, role_binding=True).double()
    ref = torch.nn.MultiheadAttention(d, H, batch_first=True).double()
    with torch.no_grad():
        Wq, Wr, Wk, Wv = tp.in_proj.weight.split(d, 0)
        bq, br, bk, bv = tp.in_proj.bias.split(d, 0)
        bq.normal_(), bk.normal_(), bv.normal_()
        Wr.zero_(), br.fill_(1.0)
        ref.in_proj_weight.copy_(torch.cat([Wq, Wk, Wv]))
        ref.in_proj_bias.copy_(torch.cat([bq, bk, bv]))
        ref.out_proj.weight.copy_(tp.out_proj.weight)
        ref.out_proj.bias.copy_(tp.out_proj.bias)
    z = torch.randn(2, 6, d, dtype=torch.float64)
    pad = torch.tensor([[False] * 6, [True, True] + [False] * 4])
    got = tp(z, key_padding_mask=pad)
    want, _ = ref(z, z, z, key_padding_mask=pad, need_weights=False)
    torch.testing.assert_close(got, want)

    # ... and role_binding=False with the same q, k, v, o weights is the same function.
    plain = TPMultiheadAttention(d, H, role_binding=False).double()
    with torch.no_grad():
        plain.in_proj.weight.copy_(torch.cat([Wq, Wk, Wv]))
        plain.in_proj.bias.copy_(torch.cat([bq, bk, bv]))
        plain.out_proj.load_state_dict(tp.out_proj.state_dict())
    torch.testing.assert_close(plain(z, key_padding_mask=pad), want)


def test_role_binding_changes_the_output():
    """Guard against a silently disabled binding: random roles must matter."""
    tp = TPMultiheadAttention(16, 2).double()
    z = torch.randn(1, 5, 16, dtype=torch.float64)
    out1 = tp(z)
    (_, Wr, _, _), (_, br, _, _) = projection_weights(tp)
    torch.testing.assert_close(tp.roles(z), z @ Wr.T + br, rtol=1e-12, atol=1e-12)   # eq. 3, the roles it binds
    with torch.no_grad():
        Wr.mul_(2.0)
    assert not torch.allclose(out1, tp(z))


def test_embedding_role_and_init():
    from nesyseq.plugins.layers.tp_embedding import TPEmbedding, sinusoidal_table
    torch.manual_seed(1)
    emb = TPEmbedding(50, 64, padding_idx=1, max_positions=40)
    W = emb.role.weight
    # authors' code (models/tp-transformer.py:181-187): W^(p) ~ N(0, 1/d), E ~ N(0, 1/d)
    assert abs(W.mean().item()) < 0.01 and abs(W.std().item() * 8.0 - 1.0) < 0.05
    assert abs(emb.embed_tokens.weight[2:].std().item() * 8.0 - 1.0) < 0.05
    tokens = torch.tensor([[5, 6, 7]])
    pos = torch.arange(3)[None]
    e = emb.embed_tokens.weight[tokens] * 8.0 + sinusoidal_table(40, 64)[pos]
    want = e * (e @ W.T + emb.role.bias + 1.0)  # z0 = e ⊙ (W^(p) e + b^(p) + 1)
    torch.testing.assert_close(emb(tokens, pos), want)
    # sinusoid: p[t, 2i] = sin(t / 10000^(2i/d))
    assert math.isclose(sinusoidal_table(10, 8)[3, 2].item(), math.sin(3 / 10000 ** (2 / 8)), rel_tol=1e-6)


def test_parameter_counts_match_paper():
    """Paper Table 1: 49.2M (TP-Transformer) vs 44.2M (Transformer), ~72 symbols."""
    d = make_dict(72 - 4)  # + bos, pad, eos, unk
    tp = sum(p.numel() for p in build("tp_transformer_math", d).parameters())
    base = sum(p.numel() for p in build("transformer_math", d).parameters())
    assert round(tp / 1e6, 1) == 49.2 and round(base / 1e6, 1) == 44.2
    # The difference is exactly one role projection per TP-attention (6 enc + 12 dec)
    # plus W^(p), b^(p):
    assert tp - base == (18 + 1) * (512 * 512 + 512)


@pytest.mark.parametrize("tp_arch,wide_arch,layers,d", [("tp_transformer_math", "transformer_math_wide", 6, 512),
                                                        ("tp_transformer_tiny", "transformer_math_tiny_wide", 2, 64)])
def test_wide_baselines_match_the_tp_parameter_count(tp_arch, wide_arch, layers, d):
    """The wide baselines spend TP-T's extra parameters on FF width: same d, heads and depth, the
    count within 2% of TP-T's (counted from the formula, not from the model)."""
    dic = make_dict(72 - 4)
    tp = build(tp_arch, dic)
    wide = build(wide_arch, dic)
    n_tp, n_wide = (sum(p.numel() for p in m.parameters()) for m in (tp, wide))
    assert abs(n_wide - n_tp) / n_tp < 0.02, (n_tp, n_wide)
    ff, base_ff = (m.encoder.layers[0].ff.fc1.out_features for m in (wide, tp))
    # by the formula: TP-T's extra = (3L + 1)(d^2 + d); the widening adds 2L(2d + 1) per FF unit
    extra_tp = (3 * layers + 1) * (d * d + d)
    assert n_wide - (n_tp - extra_tp) == 2 * layers * (2 * d + 1) * (ff - base_ff)
    assert not wide.encoder.layers[0].self_attn.role_binding


def _encode(model, src):
    return model.encoder(src, src_lengths=src.ne(1).sum(1))


@pytest.mark.parametrize("arch", ["tp_transformer_tiny", "transformer_math_tiny"])
def test_incremental_decoding_equals_full_forward(arch):
    d = make_dict(20)
    model = build(arch, d).double().eval()
    B, S, T = 3, 9, 6
    src = torch.randint(4, len(d), (B, S))
    src[1, :3] = d.pad()  # left-padded source, as fairseq's translation task makes it
    prev = torch.randint(4, len(d), (B, T))
    prev[:, 0] = d.eos()
    with torch.no_grad():
        enc = _encode(model, src)
        full, _ = model.decoder(prev, encoder_out=enc)
        torch.testing.assert_close(incremental_outputs(model, prev, enc), full, rtol=1e-9, atol=1e-9)

        # each step processes exactly one new token: every query-side projection and FF of
        # the decoder sees one time step, the encoder keys/values are projected once, and
        # the self-attention cache grows by one key per step
        seen = []
        hooks = [mod.register_forward_hook(
                     lambda m, inp, out, name=name: seen.append((name, inp[0].shape[1])))
                 for name, mod in model.decoder.named_modules()
                 if isinstance(mod, torch.nn.Linear)]
        inc_state = {}
        try:
            for t in range(T):
                seen.clear()
                model.decoder(prev[:, : t + 1], encoder_out=enc, incremental_state=inc_state)
                per_step = [n for n, width in seen if "kv_proj" not in n]
                assert per_step and all(w == 1 for n, w in seen if "kv_proj" not in n), seen
                kv_calls = [w for n, w in seen if "kv_proj" in n]
                assert kv_calls == ([S] * len(model.decoder.layers) if t == 0 else []), (t, kv_calls)
                cache = model.decoder.layers[0].self_attn._get_input_buffer(inc_state)
                assert cache["prev_key"].shape[2] == t + 1
        finally:
            for h in hooks:
                h.remove()

        # beam-style reordering of the cache mid-sequence
        out, full2, _ = reorder_mid_sequence(model, prev, enc, torch.tensor([2, 0, 0]), steps=3)
        torch.testing.assert_close(out, full2, rtol=1e-9, atol=1e-9)


def test_encoder_padding_invariance():
    d = make_dict(20)
    model = build("tp_transformer_tiny", d).double().eval()
    src = torch.randint(4, len(d), (1, 7))
    padded = torch.cat([torch.full((1, 5), d.pad()), src], 1)  # left padding
    with torch.no_grad():
        a = _encode(model, src)["encoder_out"][0]
        b = _encode(model, padded)["encoder_out"][0][:, 5:]
    torch.testing.assert_close(a, b)


def test_normalized_probs_are_fp32_log_probs():
    d = make_dict(10)
    model = build("tp_transformer_tiny", d).half().eval()
    src = torch.randint(4, len(d), (2, 5))
    prev = torch.randint(4, len(d), (2, 3))
    with torch.no_grad():
        out = model.decoder(prev, encoder_out=_encode(model, src))
        lp = model.get_normalized_probs(out, log_probs=True)
    assert lp.dtype == torch.float32
    torch.testing.assert_close(lp.exp().sum(-1), torch.ones(2, 3))


class _HostSyncCounter:
    """Counts tensor -> Python conversions (bool(), .item(), int(), float(), .tolist()),
    the operations that make a GPU stream wait for the host."""
    NAMES = ("__bool__", "item", "__int__", "__float__", "__index__", "tolist")

    def __enter__(self):
        self.calls = []
        self.saved = {n: getattr(torch.Tensor, n) for n in self.NAMES}
        for n, fn in self.saved.items():
            def wrapper(t, *a, _fn=fn, _n=n, **k):
                self.calls.append(_n)
                return _fn(t, *a, **k)
            setattr(torch.Tensor, n, wrapper)
        return self

    def __exit__(self, *exc):
        for n, fn in self.saved.items():
            setattr(torch.Tensor, n, fn)


@pytest.mark.parametrize("left_pad", [True, False])
def test_incremental_decoding_steps_do_not_sync_with_the_host(left_pad):
    """No per-step host synchronisation in decoding: the padding decision is made once in
    the encoder, positions are bounded by the sequence length (a shape, not a value)."""
    d = make_dict(20)
    model = build("tp_transformer_tiny", d).eval()
    src = torch.randint(4, len(d), (2, 7))
    if left_pad:
        src[1, :3] = d.pad()
    prev = torch.randint(4, len(d), (2, 5))
    prev[:, 0] = d.eos()
    with torch.no_grad():
        enc = _encode(model, src)
        with _HostSyncCounter() as counter:
            incremental_outputs(model, prev, enc)
    assert counter.calls == []
