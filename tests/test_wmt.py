"""``nesyseq prepare wmt`` / ``evaluate wmt`` and the WMT presets (issue 10)."""
import argparse
import gzip
import json
import os
import random
import subprocess
import sys
from pathlib import Path

import pytest

from nesyseq.data_prep import wmt_prepare
from nesyseq.data_prep.wmt_prepare import length_ratio, prepare_wmt
from nesyseq.common.errors import UserError
from nesyseq.cli.main import main as nesyseq_main

ROOT = Path(__file__).resolve().parents[1]

EN_DE = {"the": "die", "cat": "Katze", "dog": "Hund", "sees": "sieht", "eats": "isst",
         "small": "kleine", "big": "große", "house": "Haus", "green": "grüne", "street": "Straße",
         "and": "und", "today": "heute", "my": "meine", "friend": "Freundin", "likes": "mag",
         "water": "Wasser", "bread": "Brot", "quickly": "schnell", "not": "nicht", "white": "weiße"}


def make_corpus(d: Path, prefix: str, n: int, seed: int, gz: bool = False) -> str:
    """Word-for-word 'translation' of random sentences: learnable by a tiny model."""
    rng = random.Random(seed)
    words = sorted(EN_DE)
    en, de = [], []
    for _ in range(n):
        s = [rng.choice(words) for _ in range(rng.randint(3, 7))]
        en.append(" ".join(s).capitalize() + ".")
        de.append(" ".join(EN_DE[w] for w in s).capitalize() + ".")
    for lang, lines in (("en", en), ("de", de)):
        text = "".join(x + "\n" for x in lines).encode()
        path = d / (f"{prefix}.{lang}" + (".gz" if gz else ""))
        path.write_bytes(gzip.compress(text) if gz else text)
    return str(d / prefix)


def write_pair(d: Path, prefix: str, en, de):
    (d / f"{prefix}.en").write_text("".join(x + "\n" for x in en), encoding="utf-8")
    (d / f"{prefix}.de").write_text("".join(x + "\n" for x in de), encoding="utf-8")
    return str(d / prefix)


@pytest.fixture(scope="module")
def corpus(tmp_path_factory):
    d = tmp_path_factory.mktemp("wmt_raw")
    train = [make_corpus(d, "europarl", 400, 1), make_corpus(d, "nc", 300, 2, gz=True)]
    return d, train, make_corpus(d, "valid", 40, 3), make_corpus(d, "test", 40, 4)


@pytest.fixture(scope="module")
def prepared(corpus, tmp_path_factory):
    d, train, valid, test = corpus
    out = tmp_path_factory.mktemp("wmt") / "data"
    rec = prepare_wmt("en", "de", train, valid, test, str(out), bpe_size=120, workers=2,
                      progress=False)
    return out, rec


@pytest.mark.slow  # the shared prepare_wmt run (SentencePiece training)
def test_prepare_layout_counts_and_gz(prepared):
    out, rec = prepared
    assert rec["counts"]["train"]["read"] == 700  # plain + gzipped prefix concatenated
    assert rec["counts"]["train"]["kept"] == 700
    for name in ("dict.en.txt", "dict.de.txt", "spm.model", "train.en-de.en.bin",
                 "valid.en-de.de.idx", "test.en-de.en.bin", "ref/test.de", "prepare.json"):
        assert (out / name).is_file(), name
    assert (out / "dict.en.txt").read_bytes() == (out / "dict.de.txt").read_bytes()  # joined
    assert json.loads((out / "prepare.json").read_text())["counts"] == rec["counts"]
    assert not list(out.parent.glob("*.tmp-*"))


@pytest.mark.slow  # the shared prepare_wmt run (SentencePiece training)
def test_sentencepiece_round_trip(prepared, corpus):
    import sentencepiece as spm
    out, _ = prepared
    sp = spm.SentencePieceProcessor(model_file=str(out / "spm.model"))
    lines = (out / "raw" / "train.de").read_text(encoding="utf-8").splitlines()
    lines += ["Die große grüne Straße „heute“ — ß, ä, ö, ü!"]
    for line in lines:
        assert sp.decode(sp.encode(line, out_type=str)) == line


@pytest.mark.slow  # the shared prepare_wmt run (SentencePiece training)
def test_workers_do_not_change_output(prepared, corpus, tmp_path):
    """1 worker and 2 workers give byte-identical binaries (determinism, order kept)."""
    out2, _ = prepared
    d, train, valid, test = corpus
    out1 = tmp_path / "one"
    prepare_wmt("en", "de", train, valid, test, str(out1), bpe_size=120, workers=1, progress=False)
    # spm.model records num_threads in its trainer spec; the pieces must agree
    for name in ("dict.en.txt", "spm.vocab", "train.en-de.en.bin", "train.en-de.de.bin",
                 "test.en-de.de.bin"):
        assert (out1 / name).read_bytes() == (out2 / name).read_bytes(), name


def test_cleaning_counts(tmp_path):
    en = ["a b c", "", "one two three four five six seven eight", "a b c", "x y", "Hello   world"]
    de = ["d e f", "leer", "eins", "d e f", "", "Hallo  Welt"]
    train = write_pair(tmp_path, "train", en * 3, de * 3)
    dev = write_pair(tmp_path, "dev", ["a b"], ["c d"])
    rec = prepare_wmt("en", "de", [train], dev, dev, str(tmp_path / "o"), bpe_size=40,
                      max_ratio=3.0, dedup=True, progress=False)
    c = rec["counts"]["train"]
    assert c == {"read": 18, "dropped_empty": 6, "dropped_ratio": 3, "dropped_duplicate": 7,
                 "kept": 2}
    assert (tmp_path / "o" / "raw" / "train.en").read_text() == "a b c\nHello world\n"
    assert length_ratio("a b c d", "a b") == 2.0


def test_moses_punctuation_normalisation():
    norm = wmt_prepare.Normalizer("de", moses=True)
    assert norm("„Hallo“  ,  Welt…") == norm(norm("„Hallo“  ,  Welt…"))
    assert norm("a  «b»") != wmt_prepare.Normalizer("de", moses=False)("a  «b»")


def _err(capsys, argv):
    rc = nesyseq_main(argv)
    err = capsys.readouterr().err.strip()
    assert rc == 2 and len(err.splitlines()) == 1, err
    return err


def test_bad_inputs_name_the_file_and_write_nothing(tmp_path, capsys):
    good = write_pair(tmp_path, "good", ["a b", "c d"], ["e f", "g h"])
    out = tmp_path / "out"
    base = ["prepare", "wmt", "--valid", good, "--test", good, "--out", str(out),
            "--bpe-size", "20", "--no-progress"]

    bad = write_pair(tmp_path, "mismatch", ["a", "b", "c"], ["d", "e"])
    err = _err(capsys, base + ["--train", good, bad])
    assert "mismatch.de" in err and "2 lines" in err and "3" in err

    err = _err(capsys, base + ["--train", str(tmp_path / "missing")])
    assert "missing.en" in err

    (tmp_path / "latin.en").write_bytes(b"ok\n")
    (tmp_path / "latin.de").write_bytes(b"gr\xfc\xdf\n")
    err = _err(capsys, base + ["--train", str(tmp_path / "latin")])
    assert "latin.de:1" in err and "UTF-8" in err

    (tmp_path / "trunc.en.gz").write_bytes(gzip.compress(b"a\nb\n")[:-6])
    (tmp_path / "trunc.de").write_text("a\nb\n")
    err = _err(capsys, base + ["--train", str(tmp_path / "trunc")])
    assert "trunc.en.gz" in err

    empty = write_pair(tmp_path, "empty", [], [])
    err = _err(capsys, ["prepare", "wmt", "--train", good, "--valid", empty, "--test", good,
                        "--out", str(out), "--bpe-size", "20", "--no-progress"])
    assert "empty.en" in err and "valid split is empty" in err

    assert not out.exists()
    assert not list(tmp_path.glob("out.tmp-*"))


def test_wmt_presets_match_fairseq_sizes():
    from nesyseq import plugins  # noqa: F401  registers the architectures
    from fairseq.models import ARCH_CONFIG_REGISTRY, ARCH_MODEL_REGISTRY
    from nesyseq.plugins.models.config_defaults import arch_config
    fair = argparse.Namespace()
    ARCH_CONFIG_REGISTRY["transformer_wmt_en_de"](fair)
    tp = arch_config("tp_transformer_wmt_en_de")
    assert ARCH_MODEL_REGISTRY["tp_transformer_wmt_en_de"].__name__ == "TPTransformerModel"
    for k in ("encoder_embed_dim", "encoder_ffn_embed_dim", "encoder_attention_heads",
              "encoder_layers", "decoder_layers", "dropout"):
        assert getattr(tp, k) == getattr(fair, k), k
    assert tp.no_role_binding is False
    fol = arch_config("folnet_transformer_wmt_en_de")
    assert (fol.folnet_unary_dim, fol.folnet_heads, fol.folnet_ffn_unary) == (
        fair.encoder_embed_dim, fair.encoder_attention_heads, fair.encoder_ffn_embed_dim)
    assert (fol.encoder_layers, fol.decoder_layers, fol.dropout) == (6, 6, 0.1)
    assert fol.share_all_embeddings is True


@pytest.mark.slow
def test_prepare_train_evaluate_end_to_end(prepared, tmp_path, capsys):
    """prepare -> fairseq-train (tiny TP-Transformer, 40 updates) -> evaluate wmt; the
    printed BLEU equals sacrebleu.corpus_bleu on the written hypothesis/reference files."""
    import sacrebleu
    from nesyseq.common.fairseq_cli import USER_DIR, fairseq_bin, small_cpu_env
    data, _ = prepared
    save = tmp_path / "ckpt"
    cmd = [fairseq_bin("fairseq-train"), str(data), "--user-dir", str(USER_DIR),
           "--task", "translation", "-s", "en", "-t", "de", "--arch", "tp_transformer_tiny",
           "--criterion", "label_smoothed_cross_entropy", "--label-smoothing", "0.1",
           "--optimizer", "adam", "--lr", "3e-3", "--lr-scheduler", "inverse_sqrt",
           "--warmup-updates", "10", "--max-tokens", "2000", "--max-update", "40",
           "--save-dir", str(save), "--no-epoch-checkpoints", "--cpu", "--num-workers", "0",
           "--no-progress-bar", "--seed", "1"]
    env = small_cpu_env(True)
    env["PYTHONPATH"] = str(ROOT) + os.pathsep + env.get("PYTHONPATH", "")
    proc = subprocess.run(cmd, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, env=env)
    assert proc.returncode == 0, proc.stdout[-2000:]
    out = tmp_path / "eval"
    rc = nesyseq_main(["evaluate", "wmt", "--checkpoint", str(save / "checkpoint_last.pt"),
                       "--data", str(data), "--out", str(out), "--beam", "2"])
    printed = capsys.readouterr().out
    assert rc == 0
    hyps = (out / "hyp.test.de").read_text(encoding="utf-8").splitlines()
    refs = (data / "ref" / "test.de").read_text(encoding="utf-8").splitlines()
    assert len(hyps) == len(refs) == 40
    direct = sacrebleu.corpus_bleu(hyps, [refs])
    assert f"BLEU = {direct.score:.2f}" in printed
    assert "nrefs:1|case:mixed|eff:no|tok:13a|smooth:exp|version:" in printed
    res = json.loads((out / "results.json").read_text())
    assert res["bleu"] == pytest.approx(direct.score)
    assert res["chrf"] == pytest.approx(sacrebleu.corpus_chrf(hyps, [refs]).score)
    head, row = (out / "results.csv").read_text().splitlines()     # what `nesyseq collect` reads
    assert head == "subset,beam,lenpen,bleu,chrf" and row.split(",")[:2] == ["test", "2"]
    assert float(row.split(",")[3]) == pytest.approx(direct.score, abs=1e-4)
    assert all("▁" not in h for h in hyps)  # SentencePiece removed


@pytest.mark.slow  # three fairseq-hydra-train processes
def test_hydra_experiment_yaml_composes_each_model(tmp_path):
    """configs/experiments/wmt_en_de.yaml with each WMT model group resolves (hydra --cfg job)."""
    from nesyseq.common.fairseq_cli import fairseq_bin, small_cpu_env
    env = small_cpu_env(True)
    env["PYTHONPATH"] = str(ROOT) + os.pathsep + env.get("PYTHONPATH", "")
    for model, name in (("tp_transformer_wmt_en_de", "tp_transformer"),
                        ("folnet_transformer_wmt_en_de", "folnet_transformer"),
                        ("transformer_wmt_en_de", "transformer_wmt_en_de")):
        out = subprocess.run([fairseq_bin("fairseq-hydra-train"), "--config-name", "experiments/wmt_en_de",
                              f"model={model}", "task.data=/data", "checkpoint.save_dir=/ckpt",
                              "--cfg", "job"], cwd=tmp_path, env=env, text=True,
                             stdout=subprocess.PIPE, stderr=subprocess.STDOUT).stdout
        assert f"_name: {name}\n" in out, out[-1500:]
        assert "label_smoothing: 0.1" in out and "_name: inverse_sqrt" in out
