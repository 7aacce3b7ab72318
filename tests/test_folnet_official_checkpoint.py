"""``nesyseq convert folnet`` against the authors' own model.

The fixture (tests/fixtures/folnet_official, made by
tests/reference/make_folnet_official_fixture.py from the official folnet.py)
holds a random tiny official FOLNet (2 layers, jmc.atp), its .cfg, its
vocabulary and its outputs on a fixed two-segment batch.  Here the checkpoint
is converted with our command, loaded the way fairseq loads a checkpoint
(``--user-dir``, ``load_model_ensemble_and_task``), and must reproduce every
official output to 1e-5 in eval mode: unary and binary atoms, the pooled
[CLS], the MLM logits (columns re-indexed by the dictionary), and the SOP
logits.  Then every error path: one line naming the file and the key.
"""
import json
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
import torch

from folnet_helpers import single_thread  # noqa: F401

from nesyseq.converters.folnet_official import ConversionError, convert

FIX = Path(__file__).resolve().parent / "fixtures" / "folnet_official"
TOL = 1e-5


@pytest.fixture(scope="module")
def converted(tmp_path_factory):
    out = tmp_path_factory.mktemp("conv")
    convert(FIX / "tiny.pt", FIX / "tiny.cfg", FIX / "vocab.txt", out)
    return out


def load(out, heads=()):
    """fairseq's loader; with ``heads``, the way a task that registers heads loads it
    (build, register, then the strict ``load_state_dict`` of Trainer.load_checkpoint)."""
    from fairseq import checkpoint_utils
    models, cfg, task = checkpoint_utils.load_model_ensemble_and_task(
        [str(out / "model.pt")], arg_overrides={"data": str(out)})
    model = models[0]
    if heads:
        state = checkpoint_utils.load_checkpoint_to_cpu(str(out / "model.pt"), {"data": str(out)})
        model = task.build_model(cfg.model)
        for name, n in heads:
            model.register_classification_head(name, num_classes=n)
        model.load_state_dict(state["model"], strict=True, model_cfg=cfg.model)
    return model.eval(), task


def fairseq_ids(task, bert_ids):
    """BERT vocabulary ids -> the converted dictionary's ids (through the token strings)."""
    vocab = (FIX / "vocab.txt").read_text().split("\n")
    special = {"[CLS]": "<s>", "[PAD]": "<pad>", "[SEP]": "</s>", "[UNK]": "<unk>", "[MASK]": "<mask>"}
    d = task.source_dictionary
    table = torch.tensor([d.index(special.get(w, w)) for w in vocab[:-1]])
    assert (table != d.unk()).sum() == len(vocab) - 2  # only [UNK] itself maps to <unk>
    return table[bert_ids]


def test_converted_model_reproduces_official_outputs(converted):
    ref = torch.load(FIX / "outputs.pt", weights_only=True)
    model, task = load(converted, heads=[("sentence_order_head", 2)])
    tokens = fairseq_ids(task, ref["tok_seq"])
    with torch.no_grad():
        unary, extra = model(tokens, features_only=True)
        pooled = model.encoder.pooled(unary)
        mlm = model.encoder.output_layer(unary)
        sop = model.classification_heads["sentence_order_head"](unary)
    torch.testing.assert_close(unary, ref["unary"], rtol=0, atol=TOL)
    torch.testing.assert_close(extra["binary_atoms"], ref["binary"], rtol=0, atol=TOL)
    torch.testing.assert_close(pooled, ref["pooled"], rtol=0, atol=TOL)
    # MLM logits: our column k is the official column of dictionary entry k
    d = task.source_dictionary
    vocab = (FIX / "vocab.txt").read_text().split("\n")[:-1]
    special = {"<s>": "[CLS]", "<pad>": "[PAD]", "</s>": "[SEP]", "<unk>": "[UNK]", "<mask>": "[MASK]"}
    cols = []
    for k in range(len(d)):
        w = special.get(d[k], d[k])
        cols.append(vocab.index(w) if w in vocab else len(vocab) + int(w[len("madeupword"):]))
    assert sorted(cols) == list(range(ref["mlm"].shape[-1]))  # every official row, once
    torch.testing.assert_close(mlm, ref["mlm"][..., cols], rtol=0, atol=TOL)
    torch.testing.assert_close(sop, ref["sop"], rtol=0, atol=TOL)
    # the segments our model derived from the separators are the official token types
    assert torch.equal(model.encoder.core.last_token_types, ref["token_type_ids"])
    # the outputs are not degenerate: the two sequences and the positions differ
    assert (ref["unary"][0] - ref["unary"][1]).abs().max() > 0.1
    assert ref["mlm"].std() > 0.1


def test_classification_head_reads_the_official_pooler(converted):
    """sentence_prediction: a head registered after loading reads tanh(dense(x[:, 0]))."""
    ref = torch.load(FIX / "outputs.pt", weights_only=True)
    model, task = load(converted)
    model.register_classification_head("sentence_classification_head", num_classes=3)
    head = model.classification_heads["sentence_classification_head"].eval()
    with torch.no_grad():
        logits, _ = model(fairseq_ids(task, ref["tok_seq"]), classification_head_name="sentence_classification_head")
    want = ref["pooled"] @ head.out_proj.weight.T + head.out_proj.bias
    torch.testing.assert_close(logits, want, rtol=0, atol=TOL)


@pytest.mark.slow  # a `nesyseq convert folnet` process
def test_cli_writes_checkpoint_and_dict(tmp_path):
    out = tmp_path / "cli"
    proc = subprocess.run([sys.executable, "-m", "nesyseq.cli.main", "convert", "folnet",
                           "--checkpoint", str(FIX / "tiny.pt"), "--config", str(FIX / "tiny.cfg"),
                           "--vocab", str(FIX / "vocab.txt"), "--out", str(out)],
                          capture_output=True, text=True, env={**__import__("os").environ, "OMP_NUM_THREADS": "1"})
    assert proc.returncode == 0, proc.stderr[-2000:]
    assert (out / "model.pt").is_file() and (out / "dict.txt").is_file()
    assert "--folnet-segments bert" in (out / "fairseq_args.txt").read_text()
    lines = (out / "dict.txt").read_text().splitlines()
    assert len(lines) + 4 + 1 == 48  # + <s> <pad> </s> <unk>, + <mask>: the official 48 rows


def _edit_cfg(tmp_path, **changes):
    cfg = json.loads((FIX / "tiny.cfg").read_text())
    for k, v in changes.items():
        if v is None:
            cfg.pop(k)
        else:
            cfg[k] = v
    p = tmp_path / "edited.cfg"
    p.write_text(json.dumps(cfg))
    return p


def _one_line_error(tmp_path, ckpt=FIX / "tiny.pt", cfg=FIX / "tiny.cfg", vocab=FIX / "vocab.txt"):
    with pytest.raises(ConversionError) as e:
        convert(ckpt, cfg, vocab, tmp_path / "out")
    msg = str(e.value)
    assert "\n" not in msg
    return msg


def test_error_wrong_vocab_size(tmp_path):
    vocab = tmp_path / "vocab.txt"
    vocab.write_text((FIX / "vocab.txt").read_text() + "".join(f"extra{i}\n" for i in range(6)))  # 49 tokens: 56 rows
    msg = _one_line_error(tmp_path, vocab=vocab)
    assert str(vocab) in msg and "'vocab_size'" in msg and "49 tokens" in msg


def test_error_vocab_size_disagrees_with_weights(tmp_path):
    cfg = _edit_cfg(tmp_path, vocab_size=56)
    vocab = tmp_path / "vocab.txt"
    vocab.write_text((FIX / "vocab.txt").read_text() + "".join(f"extra{i}\n" for i in range(6)))
    msg = _one_line_error(tmp_path, cfg=cfg, vocab=vocab)
    assert str(FIX / "tiny.pt") in msg and "'folnet.encoder.word_embd.weight'" in msg and "(56, 16)" in msg


def test_error_missing_key(tmp_path):
    state = torch.load(FIX / "tiny.pt", weights_only=True)
    key = "folnet.reasoner.layers.1.deducers.0.operators.1.2.premise.bias"  # cjoin's premise bias, layer 1
    del state[key]
    ckpt = tmp_path / "cut.pt"
    torch.save(state, ckpt)
    msg = _one_line_error(tmp_path, ckpt=ckpt)
    assert str(ckpt) in msg and f"missing key '{key}'" in msg


def test_error_unused_key(tmp_path):
    state = torch.load(FIX / "tiny.pt", weights_only=True)
    state["folnet.encoder.abs_pos_embd.weight"] = torch.zeros(512, 16)
    ckpt = tmp_path / "extra.pt"
    torch.save(state, ckpt)
    msg = _one_line_error(tmp_path, ckpt=ckpt)
    assert str(ckpt) in msg and "'folnet.encoder.abs_pos_embd.weight'" in msg


@pytest.mark.parametrize("change, key", [
    ({"mixer_ops": {"0": None, "1": ["join", "mu", "cjoin"], "2": ["assoc", "trans", "self"]}}, "mixer_ops"),
    ({"mixer_ops": {"0": ["glob"], "1": ["join"], "2": ["assoc"]}}, "mixer_ops"),
    ({"boolean_type": "reglu"}, "boolean_type"),
    ({"absolute_position": True}, "absolute_position"),
    ({"type_vocab_size": 3}, "type_vocab_size"),
    ({"num_heads": 3}, "predicate_dims"),
    ({"num_layers": None}, "num_layers"),
])
def test_error_config_we_cannot_express(tmp_path, change, key):
    cfg = _edit_cfg(tmp_path, **change)
    msg = _one_line_error(tmp_path, cfg=cfg)
    assert str(cfg) in msg and f"'{key}'" in msg


def test_error_not_a_weights_only_file(tmp_path):
    bad = tmp_path / "pickle.pt"
    torch.save({"x": torch.zeros(1), "fn": shutil.copy}, bad)  # a global the safe loader refuses
    msg = _one_line_error(tmp_path, ckpt=bad)
    assert str(bad) in msg and "weights_only=True" in msg


@pytest.mark.slow  # a `nesyseq convert folnet` process
def test_cli_error_is_one_line(tmp_path):
    cfg = _edit_cfg(tmp_path, boolean_type="reglu")
    proc = subprocess.run([sys.executable, "-m", "nesyseq.cli.main", "convert", "folnet",
                           "--checkpoint", str(FIX / "tiny.pt"), "--config", str(cfg),
                           "--vocab", str(FIX / "vocab.txt"), "--out", str(tmp_path / "o")],
                          capture_output=True, text=True)
    assert proc.returncode == 2 and "Traceback" not in proc.stderr
    errors = [line for line in proc.stderr.splitlines() if line.startswith("nesyseq: error:")]
    assert len(errors) == 1 and str(cfg) in errors[0] and "'boolean_type'" in errors[0]


@pytest.mark.parametrize("arch,size", [("folnet_base", "base"), ("folnet_large", "large")])
def test_whole_module_parameter_count_equals_official(arch, size):
    """Our ``folnet_base`` / ``folnet_large`` against the official modules at the released sizes.

    The counts come from the authors' classes (``FOLNet``, ``PreTrainHeads``) built on
    the meta device by the fixture script (official_counts.json), at vocabulary 30528
    with 2 token types.  The official ``FOLNet`` is the encoder, the reasoner and the
    pooler; the MLM head's own parameters are its dense layer and output bias (the
    decoder is tied to the word embedding).
    """
    from fairseq.data import Dictionary
    from folnet_helpers import build

    want = json.loads((FIX / "official_counts.json").read_text())[size]
    d = Dictionary()
    for i in range(want["vocab_size"] - len(d)):
        d.add_symbol(f"w{i}")
    assert len(d) == want["vocab_size"]
    with torch.device("meta"):
        model, _ = build(arch, d)
    enc = model.encoder

    def count(m):
        return sum(p.numel() for p in m.parameters())

    head = count(enc.lm_head.dense) + enc.lm_head.bias.numel()
    assert count(enc.core.stack) == want["reasoner"]
    assert count(model) - head == want["folnet"]
    assert head == want["mlm_head"]


def _preprocess(destdir, pref, srcdict=None):
    from fairseq import options
    from fairseq_cli import preprocess
    argv = ["--only-source", "--trainpref", str(pref), "--validpref", str(pref), "--destdir", str(destdir),
            "--workers", "1"] + (["--srcdict", str(srcdict)] if srcdict else [])
    preprocess.main(options.get_preprocessing_parser().parse_args(argv))


def _pair_data(converted, tmp_path):
    """The fixture batch as raw sentence pairs, tokenized and binarized for sentence_prediction."""
    from nesyseq.common.wordpiece import WordPiece
    tok = WordPiece(FIX / "vocab.txt")
    pairs = [("The cat sat", "on the mat and it ran"), ("We LOOKED at the blue sky", "Xyz sang")]
    data = tmp_path / "data"
    for i, part in enumerate(("input0", "input1")):
        raw = tmp_path / f"{part}.txt"
        raw.write_text("".join(" ".join(tok.tokenize(p[i])) + "\n" for p in pairs))
        _preprocess(data / part, raw, srcdict=converted / "dict.txt")
    (tmp_path / "label.txt").write_text("0\n1\n")
    _preprocess(data / "label", tmp_path / "label.txt")
    return data


def test_raw_text_pipeline_sentence_prediction(converted, tmp_path):
    """Raw sentence pairs -> our WordPiece -> fairseq-preprocess with the converted dict.txt ->
    fairseq's sentence_prediction task (no --separator-token: <s> A </s> B </s>) -> the
    converted checkpoint loaded as Trainer.load_checkpoint does: the batch is the official
    fixture batch and the features and pooled [CLS] are the official ones."""
    from fairseq import checkpoint_utils, options, tasks
    from fairseq.dataclass.utils import convert_namespace_to_omegaconf
    from nesyseq.common.fairseq_cli import USER_DIR

    ref = torch.load(FIX / "outputs.pt", weights_only=True)
    data = _pair_data(converted, tmp_path)

    words = (converted / "fairseq_args.txt").read_text().split()
    args = options.parse_args_and_arch(options.get_training_parser(), input_args=[
        str(data), "--user-dir", str(USER_DIR), "--task", "sentence_prediction", "--criterion",
        "sentence_prediction", "--num-classes", "2", "--init-token", "0", "--max-positions", "64", "--cpu"] + words)
    cfg = convert_namespace_to_omegaconf(args)
    task = tasks.setup_task(cfg.task)
    task.load_dataset("valid")
    ds = task.dataset("valid")
    batch = ds.collater([ds[0], ds[1]])
    src = batch["net_input"]["src_tokens"]
    assert torch.equal(src, fairseq_ids(task, ref["tok_seq"]))  # the tokens the official model saw

    model = task.build_model(cfg.model)  # registers sentence_classification_head
    state = checkpoint_utils.load_checkpoint_to_cpu(str(converted / "model.pt"))
    model.load_state_dict(state["model"], strict=True, model_cfg=cfg.model)
    model.eval()
    with torch.no_grad():
        unary, extra = model(**batch["net_input"], features_only=True)
        logits, _ = model(**batch["net_input"], features_only=True,
                          classification_head_name="sentence_classification_head")
    torch.testing.assert_close(unary, ref["unary"], rtol=0, atol=TOL)
    torch.testing.assert_close(extra["binary_atoms"], ref["binary"], rtol=0, atol=TOL)
    torch.testing.assert_close(model.encoder.pooled(unary), ref["pooled"], rtol=0, atol=TOL)
    head = model.classification_heads["sentence_classification_head"]
    torch.testing.assert_close(logits, ref["pooled"] @ head.out_proj.weight.T + head.out_proj.bias, rtol=0, atol=TOL)


@pytest.mark.slow
def test_fairseq_train_fine_tunes_and_pretrains_from_converted(converted, tmp_path):
    """The documented commands: fairseq-train --restore-file on the converted checkpoint,
    sentence_prediction (fine-tuning) and masked_lm (continued pretraining), one update each."""
    import os
    from nesyseq.common.fairseq_cli import USER_DIR, fairseq_bin
    data = _pair_data(converted, tmp_path)
    words = (converted / "fairseq_args.txt").read_text().split()
    env = {**os.environ, "OMP_NUM_THREADS": "1"}
    common = ["--user-dir", str(USER_DIR), "--restore-file", str(converted / "model.pt"), "--reset-optimizer",
              "--reset-dataloader", "--reset-meters", "--optimizer", "adam", "--lr", "1e-5", "--batch-size", "2",
              "--max-update", "1", "--cpu", "--no-save", "--num-workers", "0", "--disable-validation"] + words
    ft = subprocess.run([fairseq_bin("fairseq-train"), str(data), "--task", "sentence_prediction", "--criterion",
                         "sentence_prediction", "--num-classes", "2", "--init-token", "0", "--max-positions", "64"]
                        + common, capture_output=True, text=True, env=env, timeout=600)
    assert ft.returncode == 0, ft.stdout[-3000:] + ft.stderr[-3000:]
    assert f"Loaded checkpoint {converted / 'model.pt'}" in ft.stdout + ft.stderr
    mlm = subprocess.run([fairseq_bin("fairseq-train"), str(data / "input0"), "--task", "masked_lm", "--criterion",
                          "masked_lm", "--tokens-per-sample", "16", "--sample-break-mode", "eos"]
                         + common, capture_output=True, text=True, env=env, timeout=600)
    assert mlm.returncode == 0, mlm.stdout[-3000:] + mlm.stderr[-3000:]
    assert f"Loaded checkpoint {converted / 'model.pt'}" in mlm.stdout + mlm.stderr


def _sop_corpus(converted, tmp_path):
    """Two WordPiece-tokenized documents (one sentence per line, blank line between),
    binarized --only-source with the converted dict.txt, for --task mlm_sop."""
    from nesyseq.common.wordpiece import WordPiece
    tok = WordPiece(FIX / "vocab.txt")
    docs = [["The cat sat on the mat", "and it ran", "We LOOKED at the blue sky"],
            ["Xyz sang", "the cat sat", "on the blue mat and it ran"]]
    raw = tmp_path / "corpus.txt"
    raw.write_text("".join("".join(" ".join(tok.tokenize(x)) + "\n" for x in d) + "\n" for d in docs))
    _preprocess(tmp_path / "sop", raw, srcdict=converted / "dict.txt")
    return tmp_path / "sop"


@pytest.mark.slow
def test_continued_mlm_sop_pretraining_from_converted(converted, tmp_path):
    """--task mlm_sop --sop-layout bert continues the official pretraining from a converted
    checkpoint: the official SOP head (seq_relationship) and pooler are loaded, not re-initialised
    (after one update at lr 1e-9 they still equal the converted weights), and --sop-layout roberta
    with the converted model's --folnet-segments bert is a one-line error."""
    import os
    from nesyseq.common.fairseq_cli import USER_DIR, fairseq_bin
    data = _sop_corpus(converted, tmp_path)
    words = (converted / "fairseq_args.txt").read_text().split()
    assert "--folnet-segments" in words and words[words.index("--folnet-segments") + 1] == "bert"
    env = {**os.environ, "OMP_NUM_THREADS": "1"}
    base = [fairseq_bin("fairseq-train"), str(data), "--user-dir", str(USER_DIR), "--task", "mlm_sop",
            "--criterion", "mlm_sop", "--tokens-per-sample", "24", "--max-predictions-per-seq", "3",
            "--restore-file", str(converted / "model.pt"), "--reset-optimizer", "--reset-dataloader",
            "--reset-meters", "--optimizer", "adam", "--lr", "1e-9", "--batch-size", "2", "--max-update", "1",
            "--cpu", "--num-workers", "0", "--disable-validation", "--save-dir", str(tmp_path / "ck"),
            "--no-epoch-checkpoints"] + words
    bad = subprocess.run(base + ["--sop-layout", "roberta"], capture_output=True, text=True, env=env, timeout=600)
    assert bad.returncode != 0 and "pass --sop-layout bert" in bad.stderr, bad.stderr[-2000:]
    run = subprocess.run(base + ["--sop-layout", "bert"], capture_output=True, text=True, env=env, timeout=600)
    assert run.returncode == 0, run.stdout[-3000:] + run.stderr[-3000:]
    out = run.stdout + run.stderr
    assert f"Loaded checkpoint {converted / 'model.pt'}" in out and "sop_accuracy" in out
    before = torch.load(converted / "model.pt", weights_only=True)["model"]
    after = torch.load(tmp_path / "ck" / "checkpoint_last.pt", weights_only=True)["model"]
    heads = [k for k in before if k.startswith("classification_heads.sentence_order_head.")]
    pooler = [k for k in before if ".pooler." in k]
    assert heads and pooler
    for k in heads + pooler:
        torch.testing.assert_close(after[k].float(), before[k].float(), rtol=0, atol=1e-6)


def test_ddp_prefix_and_fp16_weights(tmp_path):
    """A state dict saved from DistributedDataParallel ('module.' prefix) in fp16 converts
    to the same model as its fp32 original rounded to fp16 (weights upcast to fp32)."""
    state = torch.load(FIX / "tiny.pt", weights_only=True)
    ckpt = tmp_path / "ddp16.pt"
    torch.save({"module." + k: v.half() for k, v in state.items()}, ckpt)
    convert(ckpt, FIX / "tiny.cfg", FIX / "vocab.txt", tmp_path / "a")
    ref = tmp_path / "ref.pt"
    torch.save({k: v.half().float() for k, v in state.items()}, ref)
    convert(ref, FIX / "tiny.cfg", FIX / "vocab.txt", tmp_path / "b")
    a = torch.load(tmp_path / "a" / "model.pt", weights_only=True)["model"]
    b = torch.load(tmp_path / "b" / "model.pt", weights_only=True)["model"]
    assert a.keys() == b.keys() and all(a[k].dtype == torch.float32 and torch.equal(a[k], b[k]) for k in a)
