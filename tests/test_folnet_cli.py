"""End-to-end smoke tests: every FOLNet variant through the stock fairseq CLIs."""
import csv
import os
import random
import re
import subprocess
import sys
from pathlib import Path

import pytest

from folnet_helpers import single_thread  # noqa: F401  (for the in-process rescoring)

REPO = Path(__file__).resolve().parents[1]
USER_DIR = REPO / "user_dir"
BIN = Path(sys.executable).parent
TRAIN_COMMON = ["--optimizer", "adam", "--lr", "1e-3", "--max-update", "4", "--num-workers", "0",
                "--no-progress-bar", "--log-interval", "1", "--no-epoch-checkpoints", "--seed", "1",
                "--required-batch-size-multiple", "1"]


def run(cmd, cwd):
    env = dict(os.environ, OMP_NUM_THREADS="1", MKL_NUM_THREADS="1")
    env.pop("TORCH_FORCE_NO_WEIGHTS_ONLY_LOAD", None)
    p = subprocess.run([str(c) for c in cmd], cwd=cwd, env=env, capture_output=True, text=True, timeout=600)
    assert p.returncode == 0, f"{cmd[0]} failed:\n{p.stdout[-3000:]}\n{p.stderr[-5000:]}"
    return p.stdout + p.stderr


def write_lines(path, lines):
    path.write_text("\n".join(lines) + "\n")


def text_corpus(n, seed):
    rng = random.Random(seed)
    words = ["the", "cat", "dog", "sat", "on", "a", "mat", "and", "ran", "far", "big", "red"]
    return [" ".join(rng.choice(words) for _ in range(rng.randint(4, 12))) for _ in range(n)]


@pytest.fixture(scope="module")
def mono_data(tmp_path_factory):
    """One binarized monolingual corpus for the masked-LM and LM runs (read-only to them)."""
    tmp = tmp_path_factory.mktemp("mono")
    write_lines(tmp / "train.txt", text_corpus(300, 1))
    write_lines(tmp / "valid.txt", text_corpus(30, 2))
    run([BIN / "fairseq-preprocess", "--only-source", "--trainpref", tmp / "train.txt",
         "--validpref", tmp / "valid.txt", "--destdir", tmp / "bin", "--workers", "1"], tmp)
    return tmp / "bin"


def last_checkpoint(save):
    ck = save / "checkpoint_last.pt"
    assert ck.exists()
    return ck


@pytest.mark.slow
def test_folnet_masked_lm(mono_data, tmp_path):
    data = mono_data
    out = run([BIN / "fairseq-train", data, "--user-dir", USER_DIR, "--task", "masked_lm", "--arch", "folnet_tiny",
               "--criterion", "masked_lm", "--tokens-per-sample", "32", "--sample-break-mode", "complete",
               "--batch-size", "8", "--save-dir", tmp_path / "ck", *TRAIN_COMMON], tmp_path)
    assert "FolnetModel" in out
    last_checkpoint(tmp_path / "ck")


@pytest.mark.slow
def test_folnet_lm_language_modeling(mono_data, tmp_path):
    data = mono_data
    save = tmp_path / "ck"
    run([BIN / "fairseq-train", data, "--user-dir", USER_DIR, "--task", "language_modeling",
         "--arch", "folnet_lm_tiny", "--folnet-ops", "jmc.atp", "--folnet-trans-impl", "torch",
         "--checkpoint-activations", "--tokens-per-sample", "32",
         "--sample-break-mode", "none", "--batch-size", "8", "--save-dir", save, *TRAIN_COMMON], tmp_path)
    out = run([BIN / "fairseq-eval-lm", data, "--user-dir", USER_DIR, "--path", last_checkpoint(save),
               "--tokens-per-sample", "32", "--batch-size", "8", "--num-workers", "0", "--gen-subset", "valid"], tmp_path)
    stock = re.search(r"Loss \(base 2\): ([0-9.]+), Perplexity: ([0-9.]+)", out)
    assert stock, out[-2000:]
    # `nesyseq evaluate lm` (the folnet_lm experiment's evaluate stage): the same loss as the stock
    # tool's log line, in a CSV that `nesyseq collect` reads
    out2 = run([sys.executable, "-m", "nesyseq.cli.main", "evaluate", "lm", data, "--path", last_checkpoint(save),
                "--tokens-per-sample", "32", "--gen-subset", "valid", "--cpu", "--out", tmp_path / "res",
                "--fairseq-args", "--batch-size 8"], REPO)
    assert "perplexity" in out2
    rows = list(csv.DictReader(open(tmp_path / "res" / "results.csv")))
    assert len(rows) == 1 and rows[0]["subset"] == "valid"
    assert abs(float(rows[0]["loss_base2"]) - float(stock.group(1))) < 6e-5
    assert abs(float(rows[0]["perplexity"]) - float(stock.group(2))) < 6e-3
    assert float(rows[0]["loss_base2"]) > 1.0                     # a 4-update model is far from perfect
    # a bad operator spec is a one-line error naming the option and the valid letters
    p = subprocess.run([str(c) for c in [BIN / "fairseq-train", data, "--user-dir", USER_DIR, "--task",
                                         "language_modeling", "--arch", "folnet_lm_tiny", "--folnet-ops", "jmx.atp",
                                         "--tokens-per-sample", "32", "--batch-size", "8", "--save-dir", tmp_path / "bad"]],
                       cwd=tmp_path, capture_output=True, text=True, timeout=600)
    assert p.returncode != 0
    last = p.stderr.strip().splitlines()[-1]
    assert last.startswith("ValueError: --folnet-ops='jmx.atp'") and "{b,c,j,m}" in last and "{a,p,t}" in last


def pairs_preprocess(tmp, src_lines, tgt_lines, n_valid):
    for split, sl in (("train", slice(n_valid, None)), ("valid", slice(0, n_valid)), ("test", slice(0, n_valid))):
        write_lines(tmp / f"{split}.src", src_lines[sl])
        write_lines(tmp / f"{split}.tgt", tgt_lines[sl])
    run([BIN / "fairseq-preprocess", "--source-lang", "src", "--target-lang", "tgt", "--joined-dictionary",
         "--trainpref", tmp / "train", "--validpref", tmp / "valid", "--testpref", tmp / "test",
         "--destdir", tmp / "bin", "--workers", "1"], tmp)
    return tmp / "bin"


def hypotheses(out):
    return [line.split("\t") for line in out.splitlines() if line.startswith("H-")]


@pytest.mark.slow
def test_folnet_lm_prefix_lm(tmp_path):
    rng = random.Random(3)
    src = [" ".join(rng.choice("abcdef") for _ in range(rng.randint(3, 8))) for _ in range(200)]
    tgt = [" ".join(reversed(s.split())) for s in src]
    data = pairs_preprocess(tmp_path, src, tgt, 8)
    save = tmp_path / "ck"
    run([BIN / "fairseq-train", data, "--user-dir", USER_DIR, "--task", "prefix_lm", "--arch", "folnet_lm_tiny",
         "--criterion", "cross_entropy", "--batch-size", "16", "--save-dir", save, *TRAIN_COMMON], tmp_path)
    for beam in ("1", "4"):
        out = run([BIN / "fairseq-generate", data, "--user-dir", USER_DIR, "--task", "prefix_lm",
                   "--path", last_checkpoint(save), "--beam", beam, "--max-len-b", "10", "--batch-size", "4",
                   "--required-batch-size-multiple", "1", "--num-workers", "0"], tmp_path)
        hyps = hypotheses(out)
        assert len(hyps) == 8
        for h in hyps:  # H-id, score, the target continuation only: the prefix (3-9 tokens) is not in it
            assert len(h) == 3 and 1 <= len(h[2].split()) <= 10
        rescore_matches_generate(out, data, last_checkpoint(save))


def math_pairs(tmp):
    """Tiny Mathematics Dataset data from DeepMind's generator, via the project pipeline."""
    from nesyseq.data_prep.math_pipeline import prepare_math

    return Path(prepare_math(tmp / "math", modules="arithmetic__add_or_sub", per_module=120,
                             test_per_module=8, seed=1, workers=1, progress=False))


@pytest.mark.slow
def test_folnet_transformer_translation_math(tmp_path):
    data = math_pairs(tmp_path)
    save = tmp_path / "ck"
    run([BIN / "fairseq-train", data, "--user-dir", USER_DIR, "--task", "translation",
         "--arch", "folnet_transformer_tiny", "--share-all-embeddings", "--criterion", "cross_entropy",
         "--batch-size", "16", "--save-dir", save, *TRAIN_COMMON], tmp_path)
    for beam in ("1", "4"):
        out = run([BIN / "fairseq-generate", data, "--user-dir", USER_DIR, "--path", last_checkpoint(save),
                   "--beam", beam, "--max-len-b", "12", "--batch-size", "4", "--required-batch-size-multiple", "1",
                   "--num-workers", "0"], tmp_path)
        assert len(hypotheses(out)) >= 8
        rescore_matches_generate(out, data, last_checkpoint(save))


def rescore_matches_generate(out, data, checkpoint):
    """fairseq-generate's per-token scores (incremental decoding) equal a full forward pass."""
    import math

    import torch
    from fairseq import checkpoint_utils

    from nesyseq import plugins  # noqa: F401

    models, _, task = checkpoint_utils.load_model_ensemble_and_task([str(checkpoint)],
                                                                    arg_overrides={"data": str(data)})
    model = models[0].eval()
    d = task.source_dictionary
    lines = {}
    for line in out.splitlines():
        if line[:2] in ("S-", "H-", "P-"):
            tag, sid = line[0], line.split("\t")[0][2:]
            lines.setdefault(sid, {})[tag] = line.split("\t")
    assert lines
    with torch.no_grad():
        for sid, L in lines.items():
            src = d.encode_line(L["S"][1], add_if_not_exist=False).long()[None]
            hyp = d.encode_line(L["H"][2], add_if_not_exist=False).long()[None]
            # An <unk> the model generated re-encodes to the same id; one in the source
            # would stand for a character we cannot recover, so the source must have none.
            assert d.unk() not in src
            prev = torch.cat([hyp.new_full((1, 1), d.eos()), hyp[:, :-1]], dim=1)
            logits, _ = model(src, torch.tensor([src.size(1)]), prev)
            lp = torch.log_softmax(logits.float(), -1).gather(-1, hyp[..., None])[0, :, 0] / math.log(2)
            generated = torch.tensor([float(x) for x in L["P"][1].split()])
            torch.testing.assert_close(generated, lp, rtol=0, atol=2e-4)


@pytest.mark.slow
def test_folnet_sentence_prediction(tmp_path):
    rng = random.Random(4)
    for split, n in (("train", 120), ("valid", 16)):
        lines = text_corpus(n, 5 if split == "train" else 6)
        write_lines(tmp_path / f"{split}.input0", lines)
        write_lines(tmp_path / f"{split}.label", [str(int("cat" in s)) for s in lines])
    for name in ("input0", "label"):
        run([BIN / "fairseq-preprocess", "--only-source", "--trainpref", tmp_path / f"train.{name}",
             "--validpref", tmp_path / f"valid.{name}", "--destdir", tmp_path / "bin" / name, "--workers", "1"],
            tmp_path)
    run([BIN / "fairseq-train", tmp_path / "bin", "--user-dir", USER_DIR, "--task", "sentence_prediction",
         "--arch", "folnet_tiny", "--criterion", "sentence_prediction", "--num-classes", "2",
         "--init-token", "0", "--separator-token", "2", "--max-positions", "64", "--batch-size", "8",
         "--save-dir", tmp_path / "ck", *TRAIN_COMMON], tmp_path)
    last_checkpoint(tmp_path / "ck")
