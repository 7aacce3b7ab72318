"""Fixes for bugs in the fairseq build we pin (ve-fairseq 0.12.3), applied on import.

batch_by_size drops the remainder
    The compiled ``batch_by_size_vec`` of this build returns only whole
    multiples of ``required_batch_size_multiple`` (default 8) and silently
    drops the last partial batch: fairseq-generate decodes 16 of 20 test
    sentences, validation scores a subset, every epoch skips a few training
    examples.  Upstream fairseq keeps that remainder as a final batch; so do
    we, by batching whatever the compiled code left out.

A resumed run trains on other batches than the uninterrupted one
    ``FairseqTask.get_batch_iterator`` composes the batches once, from
    ``ordered_indices()`` drawn under ``numpy_seed(seed + epoch)``
    (fairseq/tasks/fairseq_task.py:290), and caches the iterator for all later
    epochs (:277, :337), which only reshuffle the order of those same batches.
    An uninterrupted run composes them at epoch 1; a run resumed from
    ``checkpoint_last.pt`` at epoch E composes them at E, so from its next epoch
    on it sees other batches and drifts away (measured: docs/slurm.md, "Resume").
    For the cached iterator we always compose at epoch 1, and hand the iterator
    (and the dataset) the real epoch afterwards, so a resumed run continues the
    uninterrupted one.  Iterators that fairseq rebuilds every epoch (no cache,
    ``rebuild_batches``) are left as they are: they already compose at their epoch.

A resumed reduce_lr_on_plateau forgets how long it has waited
    ``ReduceLROnPlateauLRSchedule.state_dict`` saves only ``best`` and ``last_epoch``
    (fairseq/optim/lr_scheduler/reduce_lr_on_plateau.py).  torch's scheduler also counts the
    epochs without improvement (``num_bad_epochs``) and its cooldown; a run resumed from a
    checkpoint restarts that count at 0, so it halves the lr up to ``--lr-patience`` epochs later
    than the uninterrupted run.  And train.py saves the end-of-epoch checkpoint before it steps
    the scheduler with that epoch's valid loss, so a run resumed from it skips that step.  We
    save the count, the cooldown and the step still owed, and take the owed step on resume.
    Checkpoints written without them load as before.

Checkpoint copies are not atomic
    ``save_checkpoint`` writes the first of its files (checkpoint_best.pt when the run found a
    new best) atomically, temp file then rename (checkpoint_utils.py:578-587), and copies it to
    the others, checkpoint_last.pt among them, with ``PathManager.copy``, a plain
    ``shutil.copyfile`` onto the target (:137-139, file_io.py:76).  A job killed during that copy
    leaves a truncated checkpoint_last.pt, and every resume then fails on it.  We copy local
    files to a temp name and rename, so the old checkpoint_last.pt stays whole until the new one is.

A run resumed at its --max-update trains one more update
    train.py's ``train()`` takes a training step before ``validate_and_save`` tests
    ``num_updates >= max_update`` (fairseq_cli/train.py:331, then :345 and :389).  A run resumed from a
    checkpoint already at its budget (a requeued job that had finished, a sweep called again)
    therefore trains update max_update + 1 and saves it over checkpoint_last.pt.  We return from
    ``train()`` before its first step when the loaded update count is already at the budget.

A resumed run forgets its --patience count
    fairseq keeps the early-stopping state (best valid loss, validations without improvement) on
    the function ``should_stop_early`` and never saves it: a resumed run counts from zero, and one
    resumed after it had stopped early trains ``--patience`` more epochs.  We save both in the
    checkpoint, restore them on resume, and train nothing when the count already meets --patience.

--bf16 implies --tpu
    ``parse_args_and_arch`` turns on ``--tpu`` whenever --bf16 is given, so bf16 training on
    a GPU (or CPU) crashes in the Trainer.  We undo that implication where no TPU is in use
    (details at ``resolve_bf16_tpu`` below).
"""
import numpy as np

from fairseq.data import data_utils
from fairseq.tasks.fairseq_task import FairseqTask

_batch_by_size = data_utils.batch_by_size


def batch_by_size_keep_remainder(indices, num_tokens_fn=None, num_tokens_vec=None, max_tokens=None,
                                 max_sentences=None, required_batch_size_multiple=1, fixed_shapes=None):
    batches = _batch_by_size(indices, num_tokens_fn=num_tokens_fn, num_tokens_vec=num_tokens_vec,
                             max_tokens=max_tokens, max_sentences=max_sentences,
                             required_batch_size_multiple=required_batch_size_multiple,
                             fixed_shapes=fixed_shapes)
    if fixed_shapes is not None:
        return batches
    indices = np.asarray(indices, dtype=np.int64)
    covered = sum(len(b) for b in batches)
    if covered >= len(indices):
        return batches
    seen = np.concatenate(batches) if len(batches) else np.zeros(0, dtype=np.int64)
    keep = ~np.isin(indices, seen)
    rest = indices[keep]
    rest_vec = None if num_tokens_vec is None else np.asarray(num_tokens_vec)[keep]
    tail = _batch_by_size(rest, num_tokens_fn=num_tokens_fn, num_tokens_vec=rest_vec,
                          max_tokens=max_tokens, max_sentences=max_sentences,
                          required_batch_size_multiple=1)
    return list(batches) + list(tail)


if not getattr(data_utils.batch_by_size, "_nesyseq_fixed", False):
    batch_by_size_keep_remainder._nesyseq_fixed = True
    data_utils.batch_by_size = batch_by_size_keep_remainder


_get_batch_iterator = FairseqTask.get_batch_iterator


def get_batch_iterator_resumable(self, dataset, *args, epoch=1, disable_iterator_cache=False,
                                 update_epoch_batch_itr=False, **kwargs):
    cached_for_all_epochs = (not disable_iterator_cache and not update_epoch_batch_itr
                             and self.can_reuse_epoch_itr(dataset)
                             and not getattr(self.cfg, "rebuild_batches", False))
    if not cached_for_all_epochs or epoch == 1 or dataset in self.dataset_to_epoch_iter:
        return _get_batch_iterator(self, dataset, *args, epoch=epoch, disable_iterator_cache=disable_iterator_cache,
                                   update_epoch_batch_itr=update_epoch_batch_itr, **kwargs)
    itr = _get_batch_iterator(self, dataset, *args, epoch=1, disable_iterator_cache=disable_iterator_cache,
                              update_epoch_batch_itr=update_epoch_batch_itr, **kwargs)
    itr.epoch = epoch  # the batches are composed (at epoch 1); now the iterator's real epoch
    dataset.set_epoch(epoch)
    return itr


if not getattr(FairseqTask.get_batch_iterator, "_nesyseq_fixed", False):
    get_batch_iterator_resumable._nesyseq_fixed = True
    FairseqTask.get_batch_iterator = get_batch_iterator_resumable


# --- reduce_lr_on_plateau: keep the whole plateau state in the checkpoint --------------
# Two losses on resume, both fixed here.  (1) state_dict lacks torch's num_bad_epochs and
# cooldown_counter.  (2) train.py saves the end-of-epoch checkpoint inside train() (:345,
# validate_and_save -> checkpoint_utils.save_checkpoint, :442) and only then steps the
# scheduler with that epoch's valid loss (:210); a run resumed from that checkpoint never takes
# the step.  So an end-of-epoch save also records the step still owed (the epoch and its valid
# loss, the same value train.py hands lr_step), and a scheduler loaded from it takes that step
# at its first step() call, which Trainer.load_checkpoint makes (trainer.py:642) after it has
# loaded the optimizer (:630) whose lr the step may halve.
_PLATEAU_KEYS = ("num_bad_epochs", "cooldown_counter")


def _install_plateau_state_fix() -> None:
    from fairseq import checkpoint_utils
    from fairseq.optim.lr_scheduler.reduce_lr_on_plateau import ReduceLROnPlateauLRSchedule

    cls = ReduceLROnPlateauLRSchedule
    if getattr(cls.state_dict, "_nesyseq_fixed", False):
        return
    original_state_dict, original_load, original_step = cls.state_dict, cls.load_state_dict, cls.step
    original_save = checkpoint_utils.save_checkpoint

    def state_dict(self):
        state = original_state_dict(self)
        for key in _PLATEAU_KEYS:
            state[key] = int(getattr(self.lr_scheduler, key))
        owed = getattr(self, "_nesyseq_step_owed", None)
        if owed is not None:
            state["step_owed"] = owed
        return state

    def load_state_dict(self, state_dict):
        original_load(self, state_dict)
        for key in _PLATEAU_KEYS:
            if key in state_dict:
                setattr(self.lr_scheduler, key, int(state_dict[key]))
        self._nesyseq_step_on_resume = state_dict.get("step_owed")

    def step(self, epoch, val_loss=None):
        owed = getattr(self, "_nesyseq_step_on_resume", None)
        if owed is not None:
            self._nesyseq_step_on_resume = None
            original_step(self, owed["epoch"], owed["val_loss"])
        return original_step(self, epoch, val_loss)

    def save_checkpoint(cfg, trainer, epoch_itr, val_loss):
        sched = trainer.lr_scheduler
        plateau = isinstance(sched, cls)
        if plateau and val_loss is not None and epoch_itr.end_of_epoch():
            sched._nesyseq_step_owed = {"epoch": int(epoch_itr.epoch), "val_loss": float(val_loss)}
        try:
            return original_save(cfg, trainer, epoch_itr, val_loss)
        finally:
            if plateau:
                sched._nesyseq_step_owed = None

    state_dict._nesyseq_fixed = True
    cls.state_dict, cls.load_state_dict, cls.step = state_dict, load_state_dict, step
    checkpoint_utils.save_checkpoint = save_checkpoint


_install_plateau_state_fix()


# --- atomic checkpoint copies ------------------------------------------------------------
def _install_atomic_copy() -> None:
    import os
    import shutil

    from fairseq.file_io import PathManager

    original = PathManager.copy
    if getattr(original, "_nesyseq_fixed", False):
        return

    def copy(src_path: str, dst_path: str, overwrite: bool = False) -> bool:
        if "://" in str(src_path) or "://" in str(dst_path):
            return original(src_path, dst_path, overwrite)
        # like the original without iopath (shutil.copyfile), an existing target is replaced
        tmp = f"{dst_path}.tmp-copy"
        try:
            shutil.copyfile(src_path, tmp)
            os.replace(tmp, dst_path)
        finally:
            if os.path.exists(tmp):
                os.remove(tmp)
        return True

    copy._nesyseq_fixed = True
    PathManager.copy = staticmethod(copy)


_install_atomic_copy()


# --- a run resumed at its budget, or after an early stop, trains on ---------------------
# Patched where train.py is the running program: the fairseq-train entry point and hydra_train
# import it as fairseq_cli.train before the user dir is imported, ``python -m fairseq_cli.train``
# runs it as __main__.  main() looks ``train`` up in its module at every epoch (train.py:205),
# so replacing the module attribute is enough.  We never import train.py ourselves: at import
# it configures the root logger (train.py:18).
#
# --patience: should_stop_early keeps its best valid loss and its count of validations without
# improvement as attributes of the function (train.py:242-248), never saved; a resumed run
# restarts the count, and one resumed after it stopped early trains patience + 1 more epochs.
# Trainer.save_checkpoint adds both to the checkpoint's extra_state (should_stop_early has
# already seen the epoch's valid loss there: train.py:438, then :441), Trainer.load_checkpoint
# restores them under the condition fairseq uses for its own ``best`` (checkpoint_utils.py:276-
# 282: neither optimizer nor meters reset, so not under --finetune-from-model), and train()
# returns at once when the restored count already meets --patience.  Any other load (none, a
# fresh start, an older checkpoint, reset meters) clears them, so a second run in the same
# process (hydra --multirun) does not inherit the first one's count.  The load also installs the
# train() wrapper when ours was imported before train.py (main() loads, train.py:165, before
# it first calls train, :205).
_EARLY_STOP_KEY = "nesyseq_early_stop"


def at_update_budget(num_updates: int, max_update) -> bool:
    """fairseq's own stop test (train.py:384-389): a max_update of 0 or None is no budget."""
    return bool(max_update) and num_updates >= max_update


def stopped_early(num_runs, patience) -> bool:
    """should_stop_early's test (train.py:236, :249) on a restored count."""
    return patience is not None and patience > 0 and num_runs is not None and num_runs >= patience


def _train_modules():
    import os
    import sys

    found = []
    for name in ("fairseq_cli.train", "__main__"):
        module = sys.modules.get(name)
        path = os.path.normpath(str(getattr(module, "__file__", "") or ""))
        if (module is not None and path.endswith(os.path.join("fairseq_cli", "train.py"))
                and callable(getattr(module, "train", None)) and callable(getattr(module, "should_stop_early", None))):
            found.append(module)
    return found


def restore_early_stop(extra_state, reset: bool) -> None:
    """Set the running train.py's should_stop_early state from a loaded checkpoint's extra_state,
    or clear it (nothing saved, or optimizer / meters reset)."""
    saved = None if reset else (extra_state or {}).get(_EARLY_STOP_KEY)
    for module in _train_modules():
        sse = module.should_stop_early
        if saved is not None:
            sse.best, sse.num_runs = saved["best"], saved["num_runs"]
        else:
            for attr in ("best", "num_runs"):
                if hasattr(sse, attr):
                    delattr(sse, attr)


def _install_train_fixes() -> None:
    import logging

    from fairseq.trainer import Trainer

    log = logging.getLogger("nesyseq")
    for module in _train_modules():
        original = module.train
        if getattr(original, "_nesyseq_fixed", False):
            continue

        def train(cfg, trainer, task, epoch_itr, _original=original, _module=module):
            num_updates, budget = trainer.get_num_updates(), cfg.optimization.max_update
            if at_update_budget(num_updates, budget):
                log.info(f"resumed at num_updates {num_updates} >= max_update {budget}: nothing to train "
                         "(nesyseq plugins/fairseq_fixes.py)")
                return [None], True
            num_runs = getattr(_module.should_stop_early, "num_runs", None)
            if stopped_early(num_runs, cfg.checkpoint.patience):
                log.info(f"resumed after an early stop ({num_runs} validations without improvement, "
                         f"--patience {cfg.checkpoint.patience}): nothing to train (nesyseq plugins/fairseq_fixes.py; "
                         "--reset-meters starts the count again)")
                return [None], True
            return _original(cfg, trainer, task, epoch_itr)

        train._nesyseq_fixed = True
        module.train = train

    if getattr(Trainer.save_checkpoint, "_nesyseq_fixed", False):
        return
    original_save, original_load = Trainer.save_checkpoint, Trainer.load_checkpoint

    def save_checkpoint(self, filename, extra_state):
        for module in _train_modules():   # the running train.py's should_stop_early, once it has a best
            sse = module.should_stop_early
            if getattr(sse, "best", None) is not None:
                extra_state = {**extra_state, _EARLY_STOP_KEY: {"best": float(sse.best),
                                                                "num_runs": int(getattr(sse, "num_runs", 0))}}
                break
        return original_save(self, filename, extra_state)

    def load_checkpoint(self, filename, reset_optimizer=False, reset_lr_scheduler=False, optimizer_overrides=None,
                        reset_meters=False):
        _install_train_fixes()   # train.py imported after plugins: main() loads before it trains
        extra_state = original_load(self, filename, reset_optimizer, reset_lr_scheduler, optimizer_overrides,
                                    reset_meters=reset_meters)
        restore_early_stop(extra_state, reset=reset_optimizer or reset_meters)
        return extra_state

    save_checkpoint._nesyseq_fixed = True
    Trainer.save_checkpoint, Trainer.load_checkpoint = save_checkpoint, load_checkpoint


_install_train_fixes()


# --- --bf16 implies --tpu -------------------------------------------------------------
# fairseq/options.py:200-201 (parse_args_and_arch) sets ``args.tpu = True`` whenever --bf16
# (or --memory-efficient-bf16) is given, a leftover from when bf16 meant TPU.  On a GPU the
# Trainer then asks torch_xla for a device (trainer.py:63) and dies with
# "'NoneType' object has no attribute 'xla_device'"; infer_init_method
# (distributed/utils.py:47) also skips the SLURM/torchrun setup when tpu is set.
# The user's --user-dir is imported inside that same parse call, too late to change it, so
# we undo the implication at the next fairseq entry point every CLI goes through,
# ``distributed_utils.call_main`` (train.py:572-574, hydra_train.py:54-56, validate.py,
# eval_lm.py, interactive.py), before it reads cfg.common.tpu.  A real TPU keeps it:
# the implied tpu stays when torch_xla is importable and no CUDA device is visible, and an
# explicit --tpu on the command line is never touched.

def _torch_xla_available() -> bool:
    import importlib.util

    return importlib.util.find_spec("torch_xla") is not None


def tpu_requested_explicitly(argv=None) -> bool:
    import sys

    argv = sys.argv[1:] if argv is None else argv
    return any(a == "--tpu" or a.startswith("--tpu=") for a in argv)


def resolve_bf16_tpu(cfg, argv=None, xla_available=None, cuda_available=None) -> bool:
    """Clear ``cfg.common.tpu`` where fairseq set it only because of --bf16 and no TPU is
    in use.  Returns True when it changed the config.  ``cfg`` is a FairseqConfig
    (omegaconf) or anything with ``.common.bf16`` / ``.common.tpu``."""
    import torch

    common = getattr(cfg, "common", None)
    if common is None or not getattr(common, "tpu", False) or not getattr(common, "bf16", False):
        return False
    if tpu_requested_explicitly(argv):
        return False
    xla = _torch_xla_available() if xla_available is None else xla_available
    cuda = torch.cuda.is_available() if cuda_available is None else cuda_available
    if xla and not cuda:
        return False  # a TPU host: fairseq's original meaning of --bf16
    common.tpu = False
    return True


def _install_bf16_fix() -> None:
    import logging

    from fairseq.distributed import utils as distributed_utils

    original = distributed_utils.call_main
    if getattr(original, "_nesyseq_fixed", False):
        return

    def call_main(cfg, main, **kwargs):
        if resolve_bf16_tpu(cfg):
            logging.getLogger("nesyseq").info(
                "--bf16 without a TPU: fairseq's implied --tpu is undone (nesyseq plugins/fairseq_fixes.py); "
                "pass --tpu explicitly to train on a TPU")
        return original(cfg, main, **kwargs)

    call_main._nesyseq_fixed = True
    distributed_utils.call_main = call_main


_install_bf16_fix()
