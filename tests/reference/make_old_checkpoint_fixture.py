"""Makes tests/fixtures/old_checkpoint/: a small tp_transformer checkpoint in the format nesyseq
wrote before the package became one import name (`plugins`, flat model config fields), the
binarized test data it is scored on, and what it scored then (expected.json).  Run once, from a
checkout of that format, with its venv:

    python tests/reference/make_old_checkpoint_fixture.py

tests/test_old_checkpoint.py loads the checkpoint with today's code and checks the numbers.
"""
import json
import os
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]
OUT = REPO / "tests" / "fixtures" / "old_checkpoint"
BIN = Path(sys.executable).parent


def run(cmd, **kw):
    subprocess.run([str(c) for c in cmd], check=True, env=dict(os.environ, OMP_NUM_THREADS="1"), **kw)


def main():
    work = Path(tempfile.mkdtemp())
    run([BIN / "nesyseq", "prepare", "math", "--out", work / "data", "--modules", "numbers__place_value",
         "--per-module", 600, "--test-per-module", 24, "--seed", 11, "--workers", 1, "--no-progress"])
    data = work / "data" / "bin"
    run([BIN / "fairseq-train", data, "--user-dir", REPO / "user_dir", "--task", "translation", "-s", "src",
         "-t", "tgt", "--arch", "tp_transformer_tiny", "--encoder-embed-dim", 32, "--encoder-ffn-embed-dim", 64,
         "--encoder-attention-heads", 2, "--encoder-layers", 1, "--decoder-layers", 1, "--optimizer", "adam",
         "--lr", "3e-3", "--batch-size", 32, "--max-update", 400, "--save-dir", work / "ck", "--no-epoch-checkpoints",
         "--seed", 1, "--cpu", "--num-workers", 0, "--log-format", "simple"], stdout=subprocess.DEVNULL)
    OUT.mkdir(parents=True, exist_ok=True)
    shutil.copy(work / "ck" / "checkpoint_best.pt", OUT / "checkpoint_best.pt")
    (OUT / "bin").mkdir(exist_ok=True)
    for name in ("dict.src.txt", "dict.tgt.txt", "test.modules", "test.src-tgt.src.bin", "test.src-tgt.src.idx",
                 "test.src-tgt.tgt.bin", "test.src-tgt.tgt.idx"):
        shutil.copy(data / name, OUT / "bin" / name)
    run([BIN / "nesyseq", "evaluate", "math", "--checkpoint", OUT / "checkpoint_best.pt", "--data", OUT / "bin",
         "--out", work / "eval", "--subsets", "test", "--cpu"], stdout=subprocess.DEVNULL)
    hyps = {}
    for line in (work / "eval" / "generate-test.txt").read_text(encoding="utf-8").splitlines():
        if line.startswith("H-"):
            i, score, text = line.split("\t")
            hyps[i[2:]] = text
    summary = json.loads((work / "eval" / "summary.json").read_text())
    (OUT / "expected.json").write_text(json.dumps({"summary": summary, "hypotheses": hyps}, indent=1) + "\n")
    shutil.rmtree(work)


if __name__ == "__main__":
    main()
