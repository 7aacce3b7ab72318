"""configs/qa_train.sh: a finished run is skipped (SAVE_DIR.done); an interrupted one continues
from its own checkpoint_last.pt, even when it was started with --restore-file, and ends with the
weights of an uninterrupted run; a folder from an older qa_train (checkpoint_best.pt only) is
left as it is, with a warning.

Reference: the same qa_train call run without interruption (one CPU thread: bitwise equal)."""
import os
import re
import subprocess
import sys
from pathlib import Path

import pytest
import torch

from nesyseq import plugins  # noqa: F401  (checkpoint classes allowed for torch.load)
from tests.qa_helpers import lr_per_epoch, prepare_tiny_task1, same_weights

REPO = Path(__file__).resolve().parents[1]
MODEL = "--arch memnet_babi --embed-dim 16 --hops 2 --max-story 40 --lr-threshold 0.5"


def qa_train(data, ck, maxup, *extra, bin_dir=None):
    script = (f'source "{REPO}/configs/qa_train.sh"; HERE="{REPO}"; LR=0.01; LR_PATIENCE=1; '
              f'qa_train "{data}" "{ck}" 3 {maxup} {MODEL} ' + " ".join(f'"{e}"' for e in extra))
    path = os.pathsep.join([str(bin_dir)] * bool(bin_dir) + [str(Path(sys.executable).parent), os.environ["PATH"]])
    env = dict(os.environ, OMP_NUM_THREADS="1", PATH=path)
    return subprocess.run(["bash", "-euo", "pipefail", "-c", script], env=env, capture_output=True, text=True,
                          timeout=300)


def weights(ck):
    return torch.load(Path(ck) / "checkpoint_last.pt", map_location="cpu")["model"]


@pytest.fixture(scope="module")
def data(tmp_path_factory):
    return prepare_tiny_task1(tmp_path_factory.mktemp("qa_train") / "d")


@pytest.mark.slow  # five tiny fairseq-train runs
def test_interrupted_run_resumes_from_its_own_checkpoint(data, tmp_path):
    a, full, b = tmp_path / "a", tmp_path / "full", tmp_path / "b"
    assert qa_train(data, a, 18).returncode == 0  # 18 updates, into epoch 2: the run both others continue
    restore = ["--restore-file", str(a / "checkpoint_best.pt")]
    r = qa_train(data, full, 72, *restore)
    assert r.returncode == 0, r.stderr[-3000:]
    full_log = Path(f"{full}.log").read_text()
    assert Path(f"{full}.done").exists() and "num_updates 72" in full_log
    assert len(set(lr_per_epoch(full_log).values())) >= 2  # the plateau schedule does halve in this run
    # the same call stopped after epoch 4; its marker and fairseq's last line ("done training")
    # removed, it is what a kill just after epoch 4's checkpoint leaves
    r = qa_train(data, b, 72, *restore, "--max-epoch", "4")
    assert r.returncode == 0, r.stderr[-3000:]
    Path(f"{b}.done").unlink()
    first = "".join(ln for ln in Path(f"{b}.log").read_text().splitlines(keepends=True) if "done training" not in ln)
    Path(f"{b}.log").write_text(first)
    assert max(lr_per_epoch(first)) == 4
    r = qa_train(data, b, 72, *restore)
    assert r.returncode == 0, r.stderr[-3000:]
    log = Path(f"{b}.log").read_text()
    assert log.startswith(first)  # the log is continued
    rest = log[len(first):]
    assert "qa_train: resuming" in rest and re.search(rf"Loaded checkpoint {re.escape(str(b))}/checkpoint_last.pt", rest)
    assert Path(f"{b}.done").exists()
    assert lr_per_epoch(rest) == {e: lr for e, lr in lr_per_epoch(full_log).items() if e > 4}
    got, ref = weights(b), weights(full)
    assert same_weights(got, ref)
    # finished: a further call does nothing
    mtime = Path(f"{b}.log").stat().st_mtime_ns
    assert qa_train(data, b, 72, *restore).returncode == 0 and Path(f"{b}.log").stat().st_mtime_ns == mtime
    # finished but its marker lost (killed before `touch`): the marker comes back, nothing trains
    # (fairseq resumed at its budget would train one more update)
    Path(f"{b}.done").unlink()
    ck_mtime = (b / "checkpoint_last.pt").stat().st_mtime_ns
    assert qa_train(data, b, 72, *restore).returncode == 0 and Path(f"{b}.done").exists()
    assert Path(f"{b}.log").stat().st_mtime_ns == mtime and (b / "checkpoint_last.pt").stat().st_mtime_ns == ck_mtime


@pytest.fixture
def fake_fairseq(tmp_path):
    """A fairseq-train that only writes its arguments to stdout (the run's log), one per line."""
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    (bin_dir / "fairseq-train").write_text('#!/usr/bin/env bash\nprintf "ARG %s\\n" "$@"\n')
    (bin_dir / "fairseq-train").chmod(0o755)
    return bin_dir


def _args(log):
    return [ln[4:] for ln in Path(log).read_text().splitlines() if ln.startswith("ARG ")]


@pytest.mark.parametrize("form", [["--restore-file", "/x/checkpoint_best.pt"], ["--restore-file=/x/checkpoint_best.pt"]])
def test_resume_drops_restore_file_in_either_form(fake_fairseq, tmp_path, form):
    ck = tmp_path / "ck"
    r = qa_train("DATA", ck, 9, *form, "--max-epoch", "4", bin_dir=fake_fairseq)  # a fresh run: passed on
    assert r.returncode == 0, r.stderr
    assert [a for a in _args(f"{ck}.log") if a.startswith(("--restore-file", "/x/"))] == form
    Path(f"{ck}.done").unlink()
    ck.mkdir()
    (ck / "checkpoint_last.pt").write_bytes(b"")  # as if interrupted after a save
    r = qa_train("DATA", ck, 9, *form, "--max-epoch", "4", bin_dir=fake_fairseq)
    assert r.returncode == 0, r.stderr
    args = _args(f"{ck}.log")
    resumed = args[len(args) // 2:]   # the second call's arguments (the log is continued)
    assert not [a for a in resumed if a.startswith(("--restore-file", "/x/"))] and "--max-epoch" in resumed
    assert Path(f"{ck}.done").exists()


def test_resume_with_a_dangling_restore_file_is_an_error(fake_fairseq, tmp_path):
    ck = tmp_path / "ck"
    ck.mkdir()
    (ck / "checkpoint_last.pt").write_bytes(b"")
    r = qa_train("DATA", ck, 9, "--restore-file", bin_dir=fake_fairseq)
    assert r.returncode == 2 and "--restore-file without a file" in r.stderr and not Path(f"{ck}.done").exists()


def test_older_folder_without_last_checkpoint_is_kept(data, tmp_path):
    ck = tmp_path / "old"
    ck.mkdir()
    (ck / "checkpoint_best.pt").write_bytes(b"kept")
    r = qa_train(data, ck, 9)
    assert r.returncode == 0 and "used as it is" in r.stderr and str(ck) in r.stderr
    assert (ck / "checkpoint_best.pt").read_bytes() == b"kept" and not Path(f"{ck}.log").exists()
    assert not Path(f"{ck}.done").exists()
