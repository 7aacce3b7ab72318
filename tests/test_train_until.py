"""nesyseq train --stop-at-best (slurm/train_until.py, plugins/patches/stop_at_best.py): the run stops after the first save whose
best valid loss reaches the bound, with exactly the state an unbounded run had at that save, and a
resumed run that had stopped trains nothing.

Reference: the same training without a bound, with a checkpoint per epoch (fairseq's own
extra_state val_loss in each); the expected stop epoch is worked out from those losses here."""
import os
import subprocess
import sys
from pathlib import Path

import pytest
import torch

import nesyseq.plugins.checkpoint_safety  # noqa: F401  (checkpoint classes allowed for torch.load)
from nesyseq.plugins.patches.stop_at_best import reached
from tests.qa_helpers import prepare_tiny_task1, same_weights

REPO = Path(__file__).resolve().parents[1]
MODEL = ["--task", "babi_qa", "--arch", "memnet_babi", "--embed-dim", "16", "--hops", "2", "--max-story", "40",
         "--criterion", "cross_entropy", "--optimizer", "adam", "--lr", "0.01", "--batch-size", "32",
         "--lr-scheduler", "reduce_lr_on_plateau", "--lr-patience", "1", "--num-workers", "0", "--cpu",
         "--seed", "3", "--log-format", "simple"]


def _train(data, save_dir, bound, *extra):
    argv = [sys.executable, "-m", "nesyseq.cli.main", "train", f"--stop-at-best={bound}", str(data),
            "--user-dir", str(REPO / "user_dir"), *MODEL, "--save-dir", str(save_dir), "--max-update", "60", *extra]
    return subprocess.run(argv, cwd=REPO, env=dict(os.environ, OMP_NUM_THREADS="1"), capture_output=True,
                          text=True, timeout=300)


def _load(path):
    return torch.load(path, map_location="cpu", weights_only=True)


def test_the_rule():
    assert reached(0.5, 0.5, False) and reached(0.4, 0.5, False) and not reached(0.6, 0.5, False)
    assert reached(0.6, 0.5, True) and not reached(0.4, 0.5, True)
    assert not reached(None, 0.5, False) and not reached(0.1, None, False)


@pytest.mark.slow  # two tiny fairseq-train runs (60 updates at most) and a resume
def test_stops_at_the_first_save_that_reaches_the_bound_and_stays_stopped(tmp_path):
    data = prepare_tiny_task1(tmp_path / "d")
    ref = tmp_path / "ref"
    # no bound: to the budget, a checkpoint at every save (mid-epoch every 5 updates, and each epoch's end)
    r = _train(data, ref, "", "--save-interval-updates", "5")
    assert r.returncode == 0, r.stderr[-3000:]
    saves = {}
    for p in ref.glob("checkpoint*[0-9].pt"):
        state = _load(p)
        saves[state["optimizer_history"][-1]["num_updates"]] = state
    order = sorted(saves)
    assert order == list(range(5, 65, 5))                     # 12 saves, 6 of them mid-epoch (10 updates per epoch)
    losses = {u: saves[u]["extra_state"]["val_loss"] for u in order}
    # a bound that the best loss first reaches at the third save (or earlier when the loss rose)
    bound = min(losses[u] for u in order[:3])
    stop = next(u for u in order if min(losses[k] for k in order if k <= u) <= bound)
    assert stop < order[-1]
    run = tmp_path / "run"
    r = _train(data, run, bound, "--save-interval-updates", "5", "--no-epoch-checkpoints", "--keep-interval-updates", "1")
    assert r.returncode == 0, r.stderr[-3000:]
    last, at_stop = _load(run / "checkpoint_last.pt"), saves[stop]
    assert last["optimizer_history"][-1]["num_updates"] == stop
    assert last["extra_state"]["train_iterator"] == at_stop["extra_state"]["train_iterator"]
    assert last["extra_state"]["best"] == bound and last["extra_state"]["val_loss"] == losses[stop]
    assert same_weights(last["model"], at_stop["model"])
    assert "reached --stop-at-best" in r.stderr
    # called again (a requeue, a relaunch): fairseq restores its best, and nothing is trained
    before = (run / "checkpoint_last.pt").read_bytes()
    r = _train(data, run, bound, "--no-epoch-checkpoints")
    assert r.returncode == 0 and "nothing to train" in r.stderr, r.stderr[-3000:]
    assert (run / "checkpoint_last.pt").read_bytes() == before


def test_refuses_spawned_ranks_and_options_first(tmp_path):
    r = _train(tmp_path / "nodata", tmp_path / "ck", "0.5", "--distributed-world-size", "2")
    assert r.returncode == 2 and "distributed world size is 2" in r.stderr
    r = subprocess.run([sys.executable, "-m", "nesyseq.cli.main", "train", "--stop-at-best", "x", "d"], cwd=REPO,
                       capture_output=True, text=True, timeout=120)
    assert r.returncode == 2 and "--stop-at-best" in r.stderr and "expected a number" in r.stderr
