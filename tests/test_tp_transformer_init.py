"""TP-Transformer initialisation at the paper's size (tp_transformer_math, d=512).

Reference: the authors' code (models/tp-transformer.py:158,166,181-187): E ~ N(0, 1/d),
so E·sqrt(d) ~ N(0, 1); r = W^(p) e + b + 1 with W^(p) ~ N(0, 1/d). Each test is one
forward pass on a small batch."""
import argparse
import copy
import math

import pytest
import torch
import torch.nn.functional as F

from nesyseq import plugins  # noqa: F401  (registers the models)
from fairseq import models
from fairseq.data import Dictionary
from nesyseq.plugins.layers.tp_embedding import positions_from_padding
from nesyseq.plugins.models.tp_transformer import TPTransformerConfig, TPTransformerModel


def _dict(n=68):
    d = Dictionary()
    for i in range(n):
        d.add_symbol(f"s{i}")
    return d


class _Task:
    def __init__(self, d):
        self.source_dictionary = self.target_dictionary = d


@pytest.fixture(scope="module")
def math_model():
    torch.manual_seed(0)
    d = _dict()
    args = argparse.Namespace(arch="tp_transformer_math")
    models.ARCH_CONFIG_REGISTRY["tp_transformer_math"](args)
    fields = TPTransformerConfig.__dataclass_fields__
    cfg = TPTransformerConfig(**{k: v for k, v in vars(args).items() if k in fields})
    assert cfg.encoder_embed_dim == 512
    return TPTransformerModel.build_model(cfg, _Task(d)).eval(), d


def _batch(d, B=4, T=24, seed=1):
    g = torch.Generator().manual_seed(seed)
    lo = d.nspecial
    src = torch.randint(lo, len(d), (B, T), generator=g)
    tgt = torch.randint(lo, len(d), (B, T), generator=g)
    prev = torch.cat([torch.full((B, 1), d.eos()), tgt[:, :-1]], 1)
    return src, prev, tgt


def test_z0_std_at_paper_size(math_model):
    model, d = math_model
    src, _, _ = _batch(d)
    with torch.no_grad():
        z0 = model.encoder.embedding(src, positions_from_padding(src, d.pad()))
    assert 0.5 <= z0.std().item() <= 3.0, z0.std().item()


def test_initial_loss_near_uniform(math_model):
    model, d = math_model
    src, prev, tgt = _batch(d)
    with torch.no_grad():
        logits, _ = model(src, torch.full((src.size(0),), src.size(1)), prev)
    loss = F.cross_entropy(logits.reshape(-1, logits.size(-1)), tgt.reshape(-1)).item()
    assert loss < 2 * math.log(len(d)), (loss, math.log(len(d)))


def test_half_precision_forward_is_finite(math_model):
    model, d = math_model
    src, prev, _ = _batch(d, B=2, T=16)
    m16 = copy.deepcopy(model).half().eval()
    with torch.no_grad():
        z0 = m16.encoder.embedding(src, positions_from_padding(src, d.pad()))
        logits, _ = m16(src, torch.full((2,), 16), prev)
    assert z0.dtype == torch.float16
    assert torch.isfinite(z0).all() and torch.isfinite(logits).all()


@pytest.mark.parametrize("role_init", ["default", "xavier"])
def test_role_init_covers_every_attention_projection(role_init):
    """--role-init default = torch's nn.Linear init for W_q, W_k, W_v, W^(r), W_o and
    their biases (the authors' code never calls SelfAttention.reset_parameters);
    xavier = Xavier-uniform blocks and zero biases. Reference: a fresh nn.Linear(d, d)."""
    torch.manual_seed(0)
    d = 512
    ref = torch.nn.Linear(d, d)
    want_w = ref.weight.std().item() if role_init == "default" else math.sqrt(2.0 / (2 * d))
    want_b = ref.bias.abs().max().item() if role_init == "default" else 0.0
    args = argparse.Namespace(arch="tp_transformer_math", role_init=role_init)
    model = models.build_model(args, _Task(_dict()))
    blocks = []
    for layer in list(model.encoder.layers) + list(model.decoder.layers):
        for attn in (getattr(layer, n) for n in ("self_attn", "cross_attn") if hasattr(layer, n)):
            lins = ([attn.in_proj] if attn.self_attention else [attn.q_proj, attn.kv_proj])
            for lin in lins + [attn.out_proj]:
                blocks += list(zip(lin.weight.split(d), lin.bias.split(d)))
    assert len(blocks) == 6 * 5 + 6 * 10  # q r k v o per attention module
    for w, b in blocks:
        assert abs(w.std().item() / want_w - 1) < 0.02
        if role_init == "default":
            assert w.abs().max() <= 1 / math.sqrt(d) and b.abs().max() <= 1 / math.sqrt(d)
            assert b.abs().max().item() > 0.9 * want_b
        else:
            assert b.abs().max().item() == 0.0
