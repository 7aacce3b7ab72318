"""End to end through ``fairseq-train --user-dir``: SOP pretraining, then GLUE-style fine-tuning.

1. ``--task mlm_sop --criterion mlm_sop --arch folnet_tiny`` on a tiny sentence-per-line
   corpus with document boundaries (a few updates);
2. ``--task sentence_prediction`` on a tiny pair dataset (input0 / input1 / label) restored
   from that checkpoint.

Both runs go through fairseq's own ``cli_main`` (what the ``fairseq-train`` script calls) in a
subprocess whose only addition is a forward hook on the model's token-type embedding: it
records the tokens and the segment ids the model actually saw in every forward.  In the
fine-tuning data, sentence A uses only upper-case words and sentence B only lower-case words,
so the expected segment of every word follows from the word alone.
"""
import os
import random
import subprocess
import sys
from pathlib import Path

import pytest
import torch
from fairseq.data import Dictionary

from tests import forkserver

pytestmark = pytest.mark.slow  # two fairseq-train runs

REPO = Path(__file__).resolve().parents[1]
USER_DIR = REPO / "user_dir"
BIN = Path(sys.executable).parent
COMMON = ["--optimizer", "adam", "--lr", "1e-3", "--max-update", "4", "--num-workers", "0", "--no-progress-bar",
          "--log-interval", "1", "--no-epoch-checkpoints", "--seed", "1", "--required-batch-size-multiple", "1",
          "--log-format", "simple"]
UPPER = ["ALPHA", "BETA", "GAMMA", "DELTA", "OMEGA", "SIGMA", "KAPPA", "THETA"]
LOWER = ["the", "cat", "dog", "sat", "on", "a", "mat", "ran", "far", "red"]

# A --user-dir that is nesyseq's plus a hook: every training batch's tokens and segment ids
# (the input of FOLNet's type embedding) are saved to $NESYSEQ_TEST_SEEN as they are seen, so
# plain fairseq-train runs it (and the suite's fork server can serve it).
HOOK_USER_DIR = '''
import os, torch
import nesyseq.user_dir  # noqa: F401  (nesyseq's patches and registrations)
import nesyseq.plugins.models.folnet as folnet

records, state = [], {}
build = folnet.FolnetModel.build_model.__func__

def record(m, args, out):
    records.append((state["tokens"], args[0].detach().clone()))
    torch.save(records, os.environ["NESYSEQ_TEST_SEEN"])

def build_with_hooks(cls, cfg, task):
    model = build(cls, cfg, task)
    core = model.encoder.core
    core.register_forward_pre_hook(lambda m, args: state.__setitem__("tokens", args[0].detach().clone()))
    core.embed_types.register_forward_hook(record)
    return model

folnet.FolnetModel.build_model = classmethod(build_with_hooks)
'''
PASSED_ON = (forkserver.SOCK_ENV, "NESYSEQ_TEST_FORKSERVER", "TRITON_INTERPRET")   # the suite's own


def run(cmd, cwd, **env):
    base = {"PATH": f"{BIN}:/usr/bin:/bin", "OMP_NUM_THREADS": "1", "MKL_NUM_THREADS": "1",
            "PYTHONPATH": str(REPO)}  # this checkout's plugins, whatever the venv points at
    base.update({k: os.environ[k] for k in PASSED_ON if k in os.environ})
    p = subprocess.run([str(c) for c in cmd], cwd=cwd, capture_output=True, text=True, timeout=600,
                       env={**base, **env})
    assert p.returncode == 0, f"{cmd[:3]} failed:\n{p.stdout[-3000:]}\n{p.stderr[-5000:]}"
    return p.stdout + p.stderr


def hooked_train(tmp, args):
    hooks = tmp / "sop_hooks"
    hooks.mkdir(exist_ok=True)
    (hooks / "__init__.py").write_text(HOOK_USER_DIR)
    rec = tmp / f"seen_{len(list(tmp.glob('seen_*')))}.pt"
    args = [str(hooks) if str(a) == str(USER_DIR) else a for a in args]
    log = run([BIN / "fairseq-train", *args], tmp, NESYSEQ_TEST_SEEN=str(rec))
    return log, torch.load(rec, weights_only=True)


def sentence(rng, words):
    return " ".join(rng.choice(words) for _ in range(rng.randint(3, 7)))


def write(path, lines):
    path.write_text("\n".join(lines) + "\n")


@pytest.fixture(scope="module")
def pretrained(tmp_path_factory):
    tmp = tmp_path_factory.mktemp("sop")
    rng = random.Random(0)
    for split, docs in (("train", 40), ("valid", 6)):
        lines = []
        for _ in range(docs):
            lines += [sentence(rng, UPPER + LOWER) for _ in range(rng.randint(2, 6))] + [""]
        write(tmp / f"{split}.txt", lines)
    run([BIN / "fairseq-preprocess", "--only-source", "--trainpref", tmp / "train.txt", "--validpref",
         tmp / "valid.txt", "--destdir", tmp / "bin", "--workers", "1"], tmp)
    log, seen = hooked_train(tmp, [tmp / "bin", "--user-dir", USER_DIR, "--task", "mlm_sop", "--criterion", "mlm_sop",
                                   "--arch", "folnet_tiny", "--tokens-per-sample", "32", "--batch-size", "8",
                                   "--mask-prob", "0.15", "--max-predictions-per-seq", "3", "--sop-split", "middle",
                                   "--lr-scheduler", "polynomial_decay", "--power", "0.5", "--warmup-updates", "1",
                                   "--total-num-update", "4", "--save-dir", tmp / "ck", *COMMON])
    return tmp, log, seen


def test_mlm_sop_pretraining_runs(pretrained):
    tmp, log, seen = pretrained
    assert "MlmSopTask" in log and "FolnetModel" in log and "MlmSopLoss" in log
    assert "sentence-order pairs" in log
    assert "sop_accuracy" in log and "mlm_loss" in log and "num_updates 4" in log
    ck = torch.load(tmp / "ck" / "checkpoint_last.pt", weights_only=True, map_location="cpu")
    assert any(k.startswith("classification_heads.sentence_order_head.") for k in ck["model"])
    d = Dictionary.load(str(tmp / "bin" / "dict.txt"))
    mask = d.add_symbol("<mask>")
    masked_seen = 0
    assert len(seen) >= 4
    for tokens, types in seen:
        for row, ty in zip(tokens, types):
            n = int(row.ne(d.pad()).sum())
            row, ty = row[:n].tolist(), ty[:n].tolist()
            eos = [i for i, t in enumerate(row) if t == d.eos()]
            assert row[0] == d.bos() and len(eos) == 3 and eos[1] == eos[0] + 1 and eos[2] == n - 1
            assert ty == [0] * (eos[0] + 1) + [1] * (n - eos[0] - 1)
            assert row.count(mask) <= 3  # --max-predictions-per-seq 3
            masked_seen += row.count(mask)
    assert masked_seen > 0


def test_sentence_prediction_pairs_reach_the_model_as_segments(pretrained):
    pre, _, _ = pretrained
    tmp = pre / "glue"
    tmp.mkdir()
    rng = random.Random(1)
    for split, n in (("train", 48), ("valid", 12)):
        a = [sentence(rng, UPPER) for _ in range(n)]
        b = [sentence(rng, LOWER) for _ in range(n)]
        write(tmp / f"{split}.input0", a)
        write(tmp / f"{split}.input1", b)
        write(tmp / f"{split}.label", [str(int("cat" in s)) for s in b])
    for name in ("input0", "input1"):
        run([BIN / "fairseq-preprocess", "--only-source", "--trainpref", tmp / f"train.{name}", "--validpref",
             tmp / f"valid.{name}", "--destdir", tmp / "bin" / name, "--srcdict", pre / "bin" / "dict.txt",
             "--workers", "1"], tmp)
    run([BIN / "fairseq-preprocess", "--only-source", "--trainpref", tmp / "train.label", "--validpref",
         tmp / "valid.label", "--destdir", tmp / "bin" / "label", "--workers", "1"], tmp)
    log, seen = hooked_train(tmp, [tmp / "bin", "--user-dir", USER_DIR, "--task", "sentence_prediction",
                                   "--criterion", "sentence_prediction", "--arch", "folnet_tiny", "--num-classes", "2",
                                   "--init-token", "0", "--separator-token", "2", "--max-positions", "64",
                                   "--batch-size", "8", "--restore-file", pre / "ck" / "checkpoint_last.pt",
                                   "--reset-optimizer", "--reset-dataloader", "--reset-meters",
                                   "--shorten-method", "truncate", "--lr-scheduler", "polynomial_decay",
                                   "--power", "1", "--warmup-updates", "1", "--total-num-update", "4",
                                   "--save-dir", tmp / "ck", *COMMON])
    assert "num_updates 4" in log and "accuracy" in log
    assert "loaded checkpoint" in log.lower()
    d = Dictionary.load(str(pre / "bin" / "dict.txt"))
    upper = {d.index(w) for w in UPPER}
    lower = {d.index(w) for w in LOWER}
    assert d.unk() not in upper | lower
    rows = 0
    for tokens, types in seen:
        for row, ty in zip(tokens, types):
            real = row.ne(d.pad())
            row, ty = row[real].tolist(), ty[real].tolist()
            eos = [i for i, t in enumerate(row) if t == d.eos()]
            assert row[0] == d.bos() and len(eos) == 3
            for i, (t, s) in enumerate(zip(row, ty)):
                if t in upper:
                    assert s == 0, (row, ty)  # a word of sentence A
                elif t in lower:
                    assert s == 1, (row, ty)  # a word of sentence B
            # <s> and A's </s> are segment 0; the separator </s> and B's </s> segment 1
            assert ty[0] == 0 and ty[eos[0]] == 0 and ty[eos[1]] == 1 and ty[eos[2]] == 1
            assert sum(t in upper for t in row) >= 3 and sum(t in lower for t in row) >= 3
            rows += 1
    assert rows >= 4 * 8
