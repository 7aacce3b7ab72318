"""Fixes of the pinned fairseq (plugins/fairseq_fixes.py): batch_by_size must cover every
index exactly once (the pinned build drops the remainder when required_batch_size_multiple
> 1); a run resumed at a later epoch must train on the uninterrupted run's batches."""
from pathlib import Path
from types import SimpleNamespace

import numpy as np
import pytest

from nesyseq import plugins  # noqa: F401  (applies the fixes)
from fairseq.data import FairseqDataset, data_utils
from fairseq.tasks import FairseqTask
from nesyseq.plugins import fairseq_fixes
from tests.qa_helpers import lr_per_epoch, prepare_tiny_task1, same_weights


@pytest.mark.parametrize("mult", [1, 3, 8])
@pytest.mark.parametrize("max_tokens,max_sentences", [(None, 8), (None, 32), (200, None), (90, 16)])
def test_every_index_batched_once(mult, max_tokens, max_sentences):
    rng = np.random.default_rng(mult)
    sizes = rng.integers(1, 30, size=61).astype(np.int64)
    indices = np.argsort(sizes, kind="mergesort").astype(np.int64)
    # fairseq passes the token counts aligned with ``indices``
    batches = data_utils.batch_by_size(indices, num_tokens_vec=sizes[indices], max_tokens=max_tokens,
                                       max_sentences=max_sentences, required_batch_size_multiple=mult)
    flat = np.concatenate(batches)
    assert sorted(flat.tolist()) == list(range(61))  # brute force: each index exactly once
    for b in batches:
        if max_sentences:
            assert len(b) <= max_sentences
        if max_tokens:
            assert len(b) * sizes[b].max() <= max_tokens or len(b) == 1


class _SizedDataset(FairseqDataset):
    """Like LanguagePairDataset.ordered_indices: a random permutation (under the task's numpy
    seed), then a stable sort by size; ties between equal sizes are what the seed decides."""

    def __init__(self, sizes):
        self.sizes = np.asarray(sizes, dtype=np.int64)

    def __getitem__(self, i):
        return int(i)

    def __len__(self):
        return len(self.sizes)

    def collater(self, samples):
        return tuple(samples)

    def num_tokens(self, i):
        return int(self.sizes[i])

    def size(self, i):
        return int(self.sizes[i])

    def ordered_indices(self):
        perm = np.random.permutation(len(self))
        return perm[np.argsort(self.sizes[perm], kind="mergesort")]


def _epochs(get_batch_iterator, first_epoch, last_epoch, offset=0):
    """Batches seen per epoch by a process that starts at first_epoch (train.py's calls)."""
    task = FairseqTask(SimpleNamespace())
    ds = _SizedDataset(np.random.default_rng(0).integers(3, 7, size=40))
    kw = dict(max_tokens=24, seed=1, num_workers=0)
    itr = get_batch_iterator(task, ds, epoch=first_epoch, **kw)
    if offset:  # resume mid-epoch, as checkpoint_utils.load_checkpoint does
        itr.load_state_dict({"version": 2, "epoch": first_epoch, "iterations_in_epoch": offset, "shuffle": True})
    seen = {}
    while itr.next_epoch_idx <= last_epoch:
        epoch_itr = itr.next_epoch_itr(shuffle=True)
        seen[itr.epoch] = [b for b in epoch_itr]
        itr = get_batch_iterator(task, ds, epoch=itr.next_epoch_idx, **kw)
    return seen


@pytest.mark.parametrize("resume_epoch,offset", [(2, 0), (3, 0), (3, 2), (5, 1)])
def test_resumed_run_sees_the_uninterrupted_batches(resume_epoch, offset):
    """Reference: the batches of a process that ran from epoch 1 (uninterrupted training).
    A process started at a later epoch (resume from checkpoint_last.pt) must see the same
    batches in every epoch from there on, mid-epoch resumes included."""
    fixed = FairseqTask.get_batch_iterator
    full = _epochs(fixed, 1, 6)
    resumed = _epochs(fixed, resume_epoch, 6, offset)
    assert sorted(resumed) == list(range(resume_epoch, 7))
    for epoch, batches in resumed.items():
        expected = full[epoch][offset:] if epoch == resume_epoch else full[epoch]
        assert batches == expected, epoch
    for epoch in full:  # every example once per epoch
        assert sorted(i for b in full[epoch] for i in b) == list(range(40))
    # the test can fail: fairseq's own iterator composes other batches when started later
    unfixed = _epochs(fairseq_fixes._get_batch_iterator, resume_epoch, 6, offset)
    assert any(unfixed[e] != resumed[e] for e in resumed)


# --- reduce_lr_on_plateau resumes with its count of bad epochs -----------------------------

def _plateau_scheduler(patience=2, cooldown=0):
    import torch
    from fairseq.optim.adam import FairseqAdam
    from fairseq.optim.lr_scheduler.reduce_lr_on_plateau import (ReduceLROnPlateauLRSchedule,
                                                                  ReduceLROnPlateauLRScheduleConfig)
    opt = FairseqAdam(SimpleNamespace(lr=[1.0], adam_betas="(0.9, 0.999)", adam_eps=1e-8, weight_decay=0.0,
                                      use_old_adam=False, fp16_adam_stats=False, tpu=False),
                      [torch.nn.Parameter(torch.zeros(1))])
    cfg = ReduceLROnPlateauLRScheduleConfig(lr_shrink=0.5, lr_threshold=1e-4, lr_patience=patience,
                                            warmup_updates=0, warmup_init_lr=-1, lr=[1.0],
                                            maximize_best_checkpoint_metric=False)
    sched = ReduceLROnPlateauLRSchedule(cfg, opt)
    if cooldown:
        sched.lr_scheduler.cooldown = cooldown
    return sched, opt


# valid losses per epoch: improvements, then plateaus of several lengths
VALID = [1.0, 0.8, 0.81, 0.82, 0.83, 0.7, 0.71, 0.72, 0.6, 0.61, 0.62, 0.63, 0.64, 0.65, 0.5, 0.51, 0.52,
         0.53, 0.54]


def _lrs(losses, patience, cooldown, stop_after=None):
    """lr after each epoch's step(epoch, valid loss), as train.py calls it; with stop_after=k the
    scheduler is saved after epoch k's step (as a checkpoint in the middle of epoch k + 1 is) and
    a fresh one (a resumed process) loads it the way Trainer.load_checkpoint does (the
    scheduler's state, then the optimizer's with its lr, then lr_step(epoch) without a loss).
    The end-of-epoch checkpoint, saved before that epoch's step, is tested end to end below."""
    sched, opt = _plateau_scheduler(patience, cooldown)
    out = []
    for epoch, loss in enumerate(losses, start=1):
        out.append(sched.step(epoch, loss))
        if epoch == stop_after:
            saved_sched, saved_opt = sched.state_dict(), opt.state_dict()
            sched, opt = _plateau_scheduler(patience, cooldown)
            sched.load_state_dict(saved_sched)
            opt.load_state_dict(saved_opt)
            sched.step(epoch + 1)  # Trainer.load_checkpoint -> lr_step(next epoch), no loss
    return out


@pytest.mark.parametrize("patience,cooldown", [(1, 0), (2, 0), (3, 0), (1, 1), (2, 1)])
def test_plateau_schedule_resumes_where_it_stopped(patience, cooldown):
    """Reference: the lr sequence of an uninterrupted scheduler.  Saved and reloaded after any
    epoch, the scheduler must give the same lr at every later epoch."""
    full = _lrs(VALID, patience, cooldown)
    assert len(set(full)) >= 3, full  # the losses do make it halve, more than once
    for k in range(1, len(VALID)):
        assert _lrs(VALID, patience, cooldown, stop_after=k) == full, k


def test_plateau_schedule_without_the_fix_forgets_its_count(monkeypatch):
    """The test above can fail: with fairseq's own state_dict (best and last_epoch only) a
    resume in the middle of a plateau halves the lr later than the uninterrupted run."""
    from fairseq.optim.lr_scheduler.reduce_lr_on_plateau import ReduceLROnPlateauLRSchedule
    monkeypatch.setattr(ReduceLROnPlateauLRSchedule, "state_dict",
                        lambda self: {"best": self.lr_scheduler.best, "last_epoch": self.lr_scheduler.last_epoch})
    full = _lrs(VALID, 2, 0)
    assert any(_lrs(VALID, 2, 0, stop_after=k) != full for k in range(1, len(VALID)))


def test_old_plateau_state_still_loads():
    sched, _ = _plateau_scheduler()
    sched.lr_scheduler.num_bad_epochs = 1
    sched.load_state_dict({"best": 0.5, "last_epoch": 3})  # a checkpoint from before the fix
    assert sched.lr_scheduler.best == 0.5 and sched.lr_scheduler.num_bad_epochs == 1
    state = sched.state_dict()
    assert isinstance(state["num_bad_epochs"], int) and isinstance(state["cooldown_counter"], int)


def _train(data, save_dir, *extra):
    """fairseq-train of a tiny memnet under reduce_lr_on_plateau; --lr-threshold 0.5 makes every
    epoch after the first a bad one, so with patience 1 the lr halves every second epoch."""
    return lr_per_epoch(_train_log(data, save_dir, *extra))


def _train_log(data, save_dir, *extra, as_module=False):
    """_train's run; its stdout.  as_module: ``python -m fairseq_cli.train`` (train.py runs as
    __main__) rather than the fairseq-train script."""
    import os
    import subprocess
    import sys

    from nesyseq.common.fairseq_cli import USER_DIR, fairseq_bin
    entry = [sys.executable, "-m", "fairseq_cli.train"] if as_module else [fairseq_bin("fairseq-train")]
    cmd = [*entry, data, "--user-dir", USER_DIR, "--task", "babi_qa", "--arch", "memnet_babi",
           "--embed-dim", "16", "--hops", "2", "--max-story", "40", "--criterion", "cross_entropy",
           "--optimizer", "adam", "--lr", "0.01", "--batch-size", "32", "--lr-scheduler", "reduce_lr_on_plateau",
           "--lr-shrink", "0.5", "--lr-patience", "1", "--lr-threshold", "0.5", "--save-dir", save_dir,
           "--no-epoch-checkpoints", "--num-workers", "0", "--cpu", "--seed", "3", "--log-format", "simple",
           "--log-interval", "1000", *extra]
    env = dict(os.environ, OMP_NUM_THREADS="1")
    p = subprocess.run([str(c) for c in cmd], env=env, capture_output=True, text=True, timeout=300)
    assert p.returncode == 0, p.stdout[-2000:] + p.stderr[-3000:]
    return p.stdout


@pytest.fixture(scope="module")
def plateau_full_run(tmp_path_factory):
    """Tiny task-1 data and the uninterrupted run: lr per epoch and final weights."""
    import torch
    tmp = tmp_path_factory.mktemp("plateau")
    data = prepare_tiny_task1(tmp / "d")
    full = _train(data, tmp / "full", "--max-epoch", "8")
    assert sorted(full) == list(range(1, 9)) and len(set(full.values())) >= 3, full  # it does halve
    return data, full, torch.load(tmp / "full" / "checkpoint_last.pt", map_location="cpu")["model"]


@pytest.mark.slow
@pytest.mark.parametrize("stop", [["--max-epoch", "3"], ["--max-update", "23"]], ids=["epoch_end", "mid_epoch"])
def test_plateau_run_resumed_from_checkpoint_last_equals_uninterrupted(plateau_full_run, stop, tmp_path):
    """End to end: fairseq-train stopped at the end of an epoch (--max-epoch 3: the checkpoint is
    saved before that epoch's scheduler step) or in the middle of one (--max-update 23: inside
    epoch 3, of 10 updates each), then resumed from its checkpoint_last.pt, must give the uninterrupted
    run's lr in every later epoch and, on one CPU thread, its exact final weights."""
    import shutil

    import torch
    data, full, ref = plateau_full_run
    first = _train(data, tmp_path / "first", *stop)
    assert first == {e: full[e] for e in first}
    itr = torch.load(tmp_path / "first" / "checkpoint_last.pt", map_location="cpu")["extra_state"]["train_iterator"]
    # where the checkpoint stands: after epoch 3 (the iterator at epoch 4) or inside epoch 3
    assert (itr["epoch"], itr["iterations_in_epoch"] > 0) == ((4, False) if "--max-epoch" in stop else (3, True)), itr
    shutil.copytree(tmp_path / "first", tmp_path / "resumed")
    resumed = _train(data, tmp_path / "resumed", "--max-epoch", "8")
    assert resumed and resumed == {e: full[e] for e in resumed}, (resumed, full)
    got = torch.load(tmp_path / "resumed" / "checkpoint_last.pt", map_location="cpu")["model"]
    assert same_weights(got, ref)


def _num_updates(save_dir):
    """(update count, weights) of SAVE_DIR/checkpoint_last.pt."""
    import torch
    state = torch.load(save_dir / "checkpoint_last.pt", map_location="cpu")
    return state["optimizer_history"][-1]["num_updates"], state["model"]


def test_at_update_budget_is_fairseqs_stop_test():
    assert fairseq_fixes.at_update_budget(20, 20) and fairseq_fixes.at_update_budget(21, 20)
    assert not fairseq_fixes.at_update_budget(19, 20)
    assert not fairseq_fixes.at_update_budget(50, 0) and not fairseq_fixes.at_update_budget(50, None)


@pytest.mark.slow
@pytest.mark.parametrize("as_module", [False, True], ids=["fairseq-train", "python-m"])
def test_run_resumed_at_its_max_update_trains_nothing(tmp_path, as_module):
    """fairseq-train called again on a run that finished at --max-update 20 (a requeued job, a
    sweep run twice) must leave checkpoint_last.pt as it was, not train update 21; a larger
    --max-update still continues the run."""
    data = prepare_tiny_task1(tmp_path / "d")
    _train_log(data, tmp_path / "r", "--max-update", "20")
    updates, before = _num_updates(tmp_path / "r")
    assert updates == 20
    log = _train_log(data, tmp_path / "r", "--max-update", "20", as_module=as_module)
    updates, after = _num_updates(tmp_path / "r")
    assert updates == 20
    assert same_weights(after, before)
    assert "Loaded checkpoint" in log and "nothing to train" in log, log[-2000:]
    _train_log(data, tmp_path / "r", "--max-update", "25", as_module=as_module)
    assert _num_updates(tmp_path / "r")[0] == 25


def test_stopped_early_is_should_stop_earlys_test():
    assert fairseq_fixes.stopped_early(2, 2) and fairseq_fixes.stopped_early(3, 2)
    assert not fairseq_fixes.stopped_early(1, 2) and not fairseq_fixes.stopped_early(5, 0)
    assert not fairseq_fixes.stopped_early(None, 2) and not fairseq_fixes.stopped_early(5, -1)


def test_restore_early_stop_sets_or_clears_the_running_train_py(monkeypatch):
    """The restore sets should_stop_early's state from a checkpoint and clears it on any other
    load, so a second run in one process (hydra --multirun) starts its count afresh."""
    import sys
    import types
    fake = types.ModuleType("fairseq_cli.train")
    fake.__file__ = "/x/fairseq_cli/train.py"
    fake.train = lambda *a: None

    def should_stop_early(cfg, valid_loss):
        return False
    fake.should_stop_early = should_stop_early
    monkeypatch.setitem(sys.modules, "fairseq_cli.train", fake)
    saved = {fairseq_fixes._EARLY_STOP_KEY: {"best": 0.5, "num_runs": 2}}
    fairseq_fixes.restore_early_stop(saved, reset=False)
    assert (should_stop_early.best, should_stop_early.num_runs) == (0.5, 2)
    fairseq_fixes.restore_early_stop(saved, reset=True)      # --finetune-from-model, --reset-meters
    assert not hasattr(should_stop_early, "best") and not hasattr(should_stop_early, "num_runs")
    should_stop_early.best, should_stop_early.num_runs = 0.1, 9   # left by an earlier run in the process
    fairseq_fixes.restore_early_stop(None, reset=False)       # no checkpoint
    assert not hasattr(should_stop_early, "best") and not hasattr(should_stop_early, "num_runs")


@pytest.mark.slow
def test_patience_survives_a_resume(tmp_path):
    """--patience 2 with --maximize-best-checkpoint-metric: the valid loss falls every epoch, so
    under "higher is better" epochs 2 and 3 are not improvements and the run stops early after
    epoch 3 (10 updates per epoch).  Stopped by --max-epoch 2 and resumed, it must stop after epoch
    3 too, with the uninterrupted run's weights; called again after its early stop, it must train
    nothing.  (Without the fix the resumed run counts from zero and stops after epoch 5.)  A run
    that only starts from its weights (--finetune-from-model) counts from zero."""
    import shutil
    data = prepare_tiny_task1(tmp_path / "d")
    early = ("--patience", "2", "--maximize-best-checkpoint-metric", "--max-epoch", "10")
    log = _train_log(data, tmp_path / "full", *early)
    assert "early stop since valid performance hasn't improved for last 2 runs" in log
    assert sorted(lr_per_epoch(log)) == [1, 2, 3], log[-2000:]
    full_updates, full_weights = _num_updates(tmp_path / "full")
    assert full_updates == 30
    _train_log(data, tmp_path / "resumed", *early[:3], "--max-epoch", "2")
    assert _num_updates(tmp_path / "resumed")[0] == 20
    log = _train_log(data, tmp_path / "resumed", *early)
    got_updates, got_weights = _num_updates(tmp_path / "resumed")
    assert got_updates == full_updates and same_weights(got_weights, full_weights), got_updates
    shutil.copytree(tmp_path / "full", tmp_path / "again")
    log = _train_log(data, tmp_path / "again", *early)
    assert _num_updates(tmp_path / "again")[0] == full_updates
    assert "resumed after an early stop" in log, log[-2000:]
    # a new run started from it with --finetune-from-model (fresh optimiser and meters, as the
    # curriculum's task 2 starts from task 1) does not inherit the count: 3 epochs of its own
    log = _train_log(data, tmp_path / "finetuned", *early, "--finetune-from-model", tmp_path / "full" / "checkpoint_last.pt")
    assert "resumed after an early stop" not in log and _num_updates(tmp_path / "finetuned")[0] == 30, log[-2000:]


def test_checkpoint_copy_is_atomic(tmp_path, monkeypatch):
    """save_checkpoint copies its first file to checkpoint_last.pt with PathManager.copy; a job
    killed during that copy must leave the previous checkpoint_last.pt whole (a truncated one
    makes every resume fail).  Reference: the old file's bytes."""
    import shutil

    from fairseq.file_io import PathManager
    src, dst = tmp_path / "checkpoint_best.pt", tmp_path / "checkpoint_last.pt"
    src.write_bytes(b"new checkpoint " * 100)
    dst.write_bytes(b"old whole checkpoint")
    assert PathManager.copy(str(src), str(dst), overwrite=True)
    assert dst.read_bytes() == src.read_bytes()
    dst.write_bytes(b"old whole checkpoint")

    def killed_mid_copy(a, b, *args, **kwargs):
        Path(b).write_bytes(Path(a).read_bytes()[:10])
        raise KeyboardInterrupt  # what SIGINT raises; SIGTERM's default kills at any byte

    monkeypatch.setattr(shutil, "copyfile", killed_mid_copy)
    with pytest.raises(KeyboardInterrupt):
        PathManager.copy(str(src), str(dst), overwrite=True)
    assert dst.read_bytes() == b"old whole checkpoint"
    assert sorted(p.name for p in tmp_path.iterdir()) == ["checkpoint_best.pt", "checkpoint_last.pt"]
