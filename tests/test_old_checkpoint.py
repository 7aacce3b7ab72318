"""A checkpoint in the format nesyseq wrote before it became one import name (flat model config,
trained with the `plugins` user dir; tests/reference/make_old_checkpoint_fixture.py) loads with
today's code and scores what it scored then: the same greedy answers, the same accuracy.

Equal answers are not left to floating-point luck: the test first checks that every greedy
decision of the model has a margin of more than 1e-3 in log-probability, far above the rounding
differences between CPUs' kernels, so only a real change of the model can flip one."""
import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
import torch

REPO = Path(__file__).resolve().parents[1]
FIX = REPO / "tests" / "fixtures" / "old_checkpoint"


def _load():
    from fairseq import checkpoint_utils

    from nesyseq.plugins import checkpoint_safety  # noqa: F401
    from nesyseq import plugins  # noqa: F401  (registers tp_transformer)

    models, cfg, task = checkpoint_utils.load_model_ensemble_and_task(
        [str(FIX / "checkpoint_best.pt")], arg_overrides={"data": str(FIX / "bin")})
    task.load_dataset("test")
    return models[0].eval(), task


def test_every_greedy_decision_has_a_safe_margin():
    model, task = _load()
    ds, d = task.dataset("test"), task.target_dictionary
    expected = json.loads((FIX / "expected.json").read_text())["hypotheses"]
    with torch.no_grad():
        for i in range(len(ds)):
            src = ds[i]["source"][None]
            enc = model.encoder(src, src_lengths=torch.tensor([src.shape[1]]))
            prev = torch.tensor([[d.eos()]])
            out = []
            for _ in range(8):
                logits = model.decoder(prev, encoder_out=enc)[0][0, -1]
                lp = torch.log_softmax(logits.float(), -1)
                lp[d.pad()] = -float("inf")
                if not out:   # fairseq-generate never ends an answer at its first step
                    lp[d.eos()] = -float("inf")
                top = lp.topk(2)
                assert top.values[0] - top.values[1] > 1e-3, (i, len(out))
                tok = int(top.indices[0])
                if tok == d.eos():
                    break
                out.append(tok)
                prev = torch.cat([prev, torch.tensor([[tok]])], 1)
            assert d.string(torch.tensor(out)) == expected[str(i)], i


@pytest.mark.slow  # fairseq-generate through `nesyseq evaluate math`
def test_old_checkpoint_evaluates_to_the_same_numbers(tmp_path):
    r = subprocess.run([sys.executable, "-m", "nesyseq.cli.main", "evaluate", "math", "--checkpoint",
                        str(FIX / "checkpoint_best.pt"), "--data", str(FIX / "bin"), "--subset", "test",
                        "--out", str(tmp_path), "--cpu"], capture_output=True, text=True, timeout=600,
                       env=dict(os.environ, OMP_NUM_THREADS="1"), cwd=REPO)
    assert r.returncode == 0, r.stderr[-3000:]
    expected = json.loads((FIX / "expected.json").read_text())
    assert json.loads((tmp_path / "summary.json").read_text()) == expected["summary"]
    hyps = {}
    for line in (tmp_path / "generate-test.txt").read_text(encoding="utf-8").splitlines():
        if line.startswith("H-"):
            i, _score, text = line.split("\t")
            hyps[i[2:]] = text
    assert hyps == expected["hypotheses"]
