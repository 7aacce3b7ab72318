"""`nesyseq convert warm-start` (converters/warm_start.py): a checkpoint carried to another
dictionary computes the same logits for every word both dictionaries have (a brute-force check
on the symbolic tp_transformer, words in a new order, new words added), new words get fresh
rows, and a grown encoder's new layers are copies of the top one."""
import argparse
import os

import pytest
import torch
from fairseq.data import Dictionary

from nesyseq import plugins  # noqa: F401  (registers the models)
from fairseq import models
from nesyseq.cli.main import main as nesyseq
from nesyseq.common.errors import UserError
from nesyseq.plugins.models.folnet_transformer import FolnetTransformerModel
from nesyseq.plugins.models.tp_transformer import TPTransformerModel
from nesyseq.converters.warm_start import warm_start
from tests.qa_helpers import WORDS, FakeTask, encode

# task 1's words: the QA helpers' 14 and three more rooms (|V| = 21, a size no other tensor of
# these models has: with 18, FOLNet's relative-distance table has as many rows)
T1_WORDS = WORDS + ["bathroom", "hallway", "bedroom"]
NEW = ["apple", "football", "got", "dropped"]
STORIES = ["mary moved to the kitchen . john moved to the garden . where is john ?",
           "sandra moved to the office . daniel moved to the garden . mary moved to the office . where is mary ?"]


def make_dict():
    d = Dictionary()
    for w in T1_WORDS:
        d.add_symbol(w)
    return d


def to_dict():
    """Task 2's dictionary: task 1's words in another order, new words among them."""
    d = Dictionary()
    order = list(reversed(T1_WORDS[7:])) + NEW[:2] + T1_WORDS[:7] + NEW[2:]
    for w in order:
        d.add_symbol(w)
    return d


def save_dict(d, folder):
    os.makedirs(folder, exist_ok=True)
    for side in ("src", "tgt"):
        d.save(os.path.join(folder, f"dict.{side}.txt"))
    return folder


# (architecture, model class, options): tied, untied (output_projection) and FOLNet's
MODELS = {
    "tp_tied": ("tp_transformer_tiny", TPTransformerModel, dict(encoder_relative_buckets=8)),
    "tp_untied": ("tp_transformer_tiny", TPTransformerModel, dict(encoder_relative_buckets=8, untie_embeddings=True)),
    "folnet_shared": ("folnet_transformer_tiny", FolnetTransformerModel, dict(share_all_embeddings=True)),
    "folnet": ("folnet_transformer_tiny", FolnetTransformerModel, {}),
}


def build(d, kind="tp_tied", encoder_layers=2, seed=0, perturb=True):
    arch, cls, extra = MODELS[kind]
    torch.manual_seed(seed)
    args = argparse.Namespace(arch=arch, encoder_layers=encoder_layers, decoder_layers=1, dropout=0.0,
                              symbolic_embeddings=True, symbolic_output=True, **extra)
    if cls is TPTransformerModel:
        args.encoder_embed_dim, args.encoder_ffn_embed_dim, args.encoder_attention_heads = 16, 32, 2
    models.ARCH_CONFIG_REGISTRY[arch](args)
    config = models.MODEL_DATACLASS_REGISTRY[models.ARCH_MODEL_NAME_REGISTRY[arch]]
    cfg = config.from_namespace(args)
    model = cls.build_model(cfg, FakeTask(d)).double().eval()
    if perturb:   # every parameter off its init (the α logits, the relative bias, the specials' rows)
        with torch.no_grad():
            for p in model.parameters():
                p.add_(0.3 * torch.randn_like(p))
    return model


def save_checkpoint(model, kind, path, cfg_form="dict"):
    """A fairseq-style checkpoint: cfg.model as fairseq writes it (a dict with _name), or the
    legacy args Namespace."""
    arch = MODELS[kind][0]
    state = {"model": model.state_dict(), "optimizer_history": [{"a": 1, "num_updates": 9}, {"num_updates": 99}],
             "last_optimizer_state": {"state": 1}, "extra_state": {"best": 0.1, "train_iterator": {"epoch": 7}}}
    if cfg_form == "dict":
        state["cfg"] = {"model": {"_name": arch, "encoder_layers": 2}}
    else:
        state["args"] = argparse.Namespace(arch=arch, encoder_layers=2)
    torch.save(state, path)
    return path


@pytest.fixture
def carried(tmp_path):
    d1, d2 = make_dict(), to_dict()
    b1, b2 = save_dict(d1, tmp_path / "task1"), save_dict(d2, tmp_path / "task2")
    m1 = build(d1)
    return d1, d2, b1, b2, m1, save_checkpoint(m1, "tp_tied", tmp_path / "t1.pt")


def outputs(model, d, texts, answer="john"):
    """Decoder features z (B, 2, d), its symbolic state s (B, 2, m) and the semantic logits
    E^T z (B, 2, |V|).  (The returned mixture p = β softmax(E^T z) + (1-β) B_φ softmax(s) is
    normalised over the whole vocabulary, so new words change it; its parts must not change.)"""
    src = encode(d, texts)
    prev = torch.tensor([[d.eos(), d.index(answer)]] * len(texts))
    with torch.no_grad():
        z, extra = model(src, src.ne(d.pad()).sum(1), prev, features_only=True)
        return z, extra["symbolic_state"][0], model.decoder.output_layer(z)


@pytest.mark.parametrize("kind", sorted(MODELS))
def test_carried_model_gives_the_same_outputs_for_every_shared_word(kind, tmp_path):
    d1, d2 = make_dict(), to_dict()
    b1, b2 = save_dict(d1, tmp_path / "task1"), save_dict(d2, tmp_path / "task2")
    m1 = build(d1, kind)
    ckpt = save_checkpoint(m1, kind, tmp_path / "t1.pt")
    report = warm_start(str(ckpt), str(b1), str(b2), str(tmp_path / "t2.pt"))
    assert report["words_kept"] == len(T1_WORDS) and sorted(report["words_new"]) == sorted(NEW)
    vocab = [k for k, v in m1.state_dict().items() if v.shape[:1] == (len(d1),)]
    assert sorted(report["tensors"]) == sorted(vocab)          # every vocabulary tensor, nothing else
    state = torch.load(tmp_path / "t2.pt", weights_only=True)
    m2 = build(d2, kind, perturb=False)
    m2.load_state_dict(state["model"], strict=True)
    (z1, s1, l1), (z2, s2, l2) = outputs(m1, d1, STORIES), outputs(m2, d2, STORIES)
    torch.testing.assert_close(z2, z1, rtol=1e-9, atol=1e-9)
    torch.testing.assert_close(s2, s1, rtol=1e-9, atol=1e-9)
    shared = [d1.bos(), d1.pad(), d1.eos(), d1.unk()] + [d1.index(w) for w in T1_WORDS]
    shared2 = [d2.bos(), d2.pad(), d2.eos(), d2.unk()] + [d2.index(w) for w in T1_WORDS]
    torch.testing.assert_close(l2[..., shared2], l1[..., shared], rtol=1e-9, atol=1e-9)
    assert torch.equal(m2.decoder.beta_logit, m1.decoder.beta_logit)
    # a fresh training state: fairseq's --restore-file would otherwise resume task 1's counters
    assert state["last_optimizer_state"] is None and state["optimizer_history"] == [{"num_updates": 0}]
    # and the record of the dictionary its ids index now: task 2's (nesyseq/common/dictionaries.py)
    from nesyseq.common.dictionaries import fingerprint

    record = {"source": fingerprint(d2.symbols), "target": fingerprint(d2.symbols)}
    assert state["extra_state"] == {"train_iterator": {"epoch": 1, "iterations_in_epoch": 0, "version": 2},
                                    "dictionaries": record}


def test_new_words_get_fresh_rows_and_tied_weights_stay_tied(carried, tmp_path):
    d1, d2, b1, b2, m1, ckpt = carried
    warm_start(str(ckpt), str(b1), str(b2), str(tmp_path / "t2.pt"), seed=3)
    sd = torch.load(tmp_path / "t2.pt", weights_only=True)["model"]
    E1 = m1.state_dict()["encoder.embedding.embed_tokens.weight"]
    # tp_transformer ties its embeddings: one tensor under the encoder's and the decoder's key
    assert sd["encoder.embedding.embed_tokens.weight"].data_ptr() == sd["decoder.embedding.embed_tokens.weight"].data_ptr()
    for side in ("encoder", "decoder"):
        E = sd[f"{side}.embedding.embed_tokens.weight"]
        a = sd[f"{side}.alpha.alpha_logit"]
        assert E.shape[0] == len(d2) and a.shape[0] == len(d2)
        new = [d2.index(w) for w in NEW]
        assert torch.equal(a[new], torch.zeros(len(new), dtype=a.dtype))        # α = 1/2, the init
        # fresh rows: not a copy of any trained row, on the trained rows' scale
        for j in new:
            assert not any(torch.allclose(E[j], E1[i]) for i in range(len(d1)))
        std = float(E1[d1.nspecial:].std())
        assert 0.3 * std < float(E[new].std()) < 3 * std


@pytest.mark.parametrize("kind,cfg_form", [("tp_tied", "dict"), ("tp_tied", "args"), ("folnet_shared", "dict")])
def test_grown_encoder_copies_its_top_layer(kind, cfg_form, tmp_path):
    d1, d2 = make_dict(), to_dict()
    b1, b2 = save_dict(d1, tmp_path / "task1"), save_dict(d2, tmp_path / "task2")
    m1 = build(d1, kind)
    ckpt = save_checkpoint(m1, kind, tmp_path / "t1.pt", cfg_form)
    report = warm_start(str(ckpt), str(b1), str(b2), str(tmp_path / "t2.pt"), encoder_layers=3)
    assert report["encoder_layers"] == (2, 3)
    state = torch.load(tmp_path / "t2.pt", weights_only=True)
    recorded = state["cfg"]["model"]["encoder_layers"] if cfg_form == "dict" else state["args"].encoder_layers
    assert recorded == 3
    m3 = build(d2, kind, encoder_layers=3, perturb=False)
    m3.load_state_dict(state["model"], strict=True)
    layers1, layers3 = (m.encoder.layers if kind.startswith("tp") else m.encoder.core.stack.layers for m in (m1, m3))
    top, new = layers1[1].state_dict(), layers3[2].state_dict()
    assert top.keys() == new.keys() and all(torch.equal(top[k], new[k]) for k in top)
    assert not all(torch.equal(layers1[0].state_dict()[k], new[k]) for k in top)


def test_relative_table_zero_resets_the_table_and_nothing_else(carried, tmp_path):
    """--relative-table zero: the carried model is task 1's with its relative-position bias at its
    init (all zeros): the same outputs as task 1's model with that table zeroed by hand."""
    d1, d2, b1, b2, m1, ckpt = carried
    key = "encoder.relative_bias.table.weight"
    assert m1.state_dict()[key].abs().min() > 0                      # perturbed off its init
    keep = warm_start(str(ckpt), str(b1), str(b2), str(tmp_path / "keep.pt"))
    zero = warm_start(str(ckpt), str(b1), str(b2), str(tmp_path / "zero.pt"), relative_table="zero")
    assert "relative_table_zeroed" not in keep and zero["relative_table_zeroed"] == [key]
    sk, sz = (torch.load(tmp_path / f, weights_only=True)["model"] for f in ("keep.pt", "zero.pt"))
    assert sk.keys() == sz.keys() and torch.equal(sk[key], m1.state_dict()[key])
    assert torch.equal(sz[key], torch.zeros_like(sk[key]))
    assert all(torch.equal(sk[k], sz[k]) for k in sk if k != key)
    m2 = build(d2, perturb=False)
    m2.load_state_dict(sz, strict=True)
    with torch.no_grad():
        m1.encoder.relative_bias.table.weight.zero_()
    (z1, s1, _), (z2, s2, _) = outputs(m1, d1, STORIES), outputs(m2, d2, STORIES)
    torch.testing.assert_close(z2, z1, rtol=1e-9, atol=1e-9)
    torch.testing.assert_close(s2, s1, rtol=1e-9, atol=1e-9)


def test_relative_table_zero_near_zeroes_the_short_offsets_only(carried, tmp_path):
    """--relative-table zero-near: the bias the carried model adds is 0 for every offset
    |i − t| < buckets/4 and task 1's for every longer one (read through RelativePositionBias's
    forward, not through the table's row layout)."""
    from nesyseq.plugins.layers.relative_position import RelativePositionBias
    d1, d2, b1, b2, m1, ckpt = carried
    key = "encoder.relative_bias.table.weight"
    r = warm_start(str(ckpt), str(b1), str(b2), str(tmp_path / "near.pt"), relative_table="zero-near")
    assert r["relative_table_zeroed"] == [key] and r["relative_table_rows"] == "zero-near"
    sn = torch.load(tmp_path / "near.pt", weights_only=True)["model"]
    sk = torch.load(ckpt, weights_only=True)["model"]
    assert all(torch.equal(sk[k], sn[k]) for k in sn if k != key and sk[k].shape == sn[k].shape
               and not k.endswith(("embed_tokens.weight", "alpha_logit", "output_projection.weight")))
    old = m1.encoder.relative_bias
    near = RelativePositionBias(old.num_buckets, old.max_distance, sn[key].shape[1]).to(sn[key].dtype)
    near.table.weight.data.copy_(sn[key])
    T = 3 * old.max_distance
    with torch.no_grad():
        b_old, b_near = old(T)[0], near(T)[0]                  # (H, T, T)
    pos = torch.arange(T)
    short = ((pos[None, :] - pos[:, None]).abs() < old.num_buckets // 4).expand_as(b_old)
    assert short.any() and (~short).any()
    assert not b_near[short].any()
    torch.testing.assert_close(b_near[~short], b_old[~short], rtol=0, atol=0)
    assert b_old[short].abs().min() > 0                         # so the zeros above are the option's


def test_bad_input_is_named(carried, tmp_path):
    d1, d2, b1, b2, m1, ckpt = carried
    with pytest.raises(UserError, match=r"dict\.src\.txt has"):   # trained on task 1, not task 2
        warm_start(str(ckpt), str(b2), str(b1), str(tmp_path / "x.pt"))
    with pytest.raises(UserError, match="only adds layers"):
        warm_start(str(ckpt), str(b1), str(b2), str(tmp_path / "x.pt"), encoder_layers=1)
    with pytest.raises(UserError, match="--from-data .*no dict.src.txt"):
        warm_start(str(ckpt), str(tmp_path), str(b2), str(tmp_path / "x.pt"))
    bare = tmp_path / "bare.pt"
    torch.save({"model": {"encoder.layers.0.ff.fc1.weight": torch.zeros(len(d1), 2)},
                "cfg": {"model": {"_name": "tp_transformer_tiny"}}}, bare)
    with pytest.raises(UserError, match="no vocabulary tensor"):
        warm_start(str(bare), str(b1), str(b2), str(tmp_path / "x.pt"))
    with pytest.raises(UserError, match="same file as --checkpoint"):
        warm_start(str(ckpt), str(b1), str(b2), str(ckpt))
    (tmp_path / "junk.pt").write_bytes(b"not a checkpoint")
    with pytest.raises(UserError, match="--checkpoint .*junk.pt: cannot be read"):
        warm_start(str(tmp_path / "junk.pt"), str(b1), str(b2), str(tmp_path / "x.pt"))
    for cfg, what in (({"model": {"_name": "memnet_babi"}}, "is not one warm-start knows"),
                      ({}, "cannot tell its architecture")):
        other = tmp_path / "other.pt"
        torch.save({"model": m1.state_dict(), "cfg": cfg}, other)
        with pytest.raises(UserError, match=what):
            warm_start(str(other), str(b1), str(b2), str(tmp_path / "x.pt"))
    with pytest.raises(UserError, match="--relative-table sideways: one of keep, zero, zero-near"):
        warm_start(str(ckpt), str(b1), str(b2), str(tmp_path / "x.pt"), relative_table="sideways")
    folnet = save_checkpoint(build(d1, "folnet"), "folnet", tmp_path / "folnet.pt")
    with pytest.raises(UserError, match="--relative-table zero: --checkpoint .*folnet.pt has no relative-position table"):
        warm_start(str(folnet), str(b1), str(b2), str(tmp_path / "x.pt"), relative_table="zero")
    (b2 / "dict.tgt.txt").write_text("other 1\n")
    with pytest.raises(UserError, match="--to-data .*differ"):
        warm_start(str(ckpt), str(b1), str(b2), str(tmp_path / "x.pt"))
    assert not (tmp_path / "x.pt").exists()


def test_command_line(carried, tmp_path, capsys):
    d1, d2, b1, b2, m1, ckpt = carried
    out = tmp_path / "t2.pt"
    assert nesyseq(["convert", "warm-start", "--checkpoint", str(ckpt), "--from-data", str(b1),
                    "--to-data", str(b2), "--out", str(out), "--encoder-layers", "3",
                    "--relative-table", "zero"]) in (0, None)
    text = capsys.readouterr().out
    assert f"{len(T1_WORDS)} words kept, {len(NEW)} new" in text and "encoder layers: 2 -> 3" in text
    assert "relative-position table zeroed: encoder.relative_bias.table.weight" in text
    assert not torch.load(out, weights_only=True)["model"]["encoder.relative_bias.table.weight"].any()
    assert out.exists()
