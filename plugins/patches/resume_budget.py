"""A run resumed at its --max-update, or after an early stop, trains on.

fairseq_cli/train.py's ``train()`` takes a training step before ``validate_and_save`` tests
``num_updates >= max_update`` (fairseq_cli/train.py:331, then :345 and :389): a run resumed from a checkpoint
already at its budget (a requeued job that had finished, a sweep called again) trains update
max_update + 1 and saves it over checkpoint_last.pt.  We return from ``train()`` before its first
step when the loaded update count is already at the budget.

--patience: ``should_stop_early`` keeps its best valid loss and its count of validations without
improvement as attributes of the function (train.py:242-248), never saved; a resumed run restarts
the count, and one resumed after it stopped early trains patience + 1 more epochs.  We save both
in the checkpoint's extra_state, restore them on resume, and train nothing when the count already
meets --patience.

Patched where train.py is the running program: the fairseq-train entry point and hydra_train
import it as fairseq_cli.train before the user dir is imported, ``python -m fairseq_cli.train``
runs it as __main__.  main() looks ``train`` up in its module at every epoch (train.py:205), so
replacing the module attribute is enough.  We never import train.py ourselves: at import it
configures the root logger (train.py:18).  Trainer.save_checkpoint adds the early-stop state to
extra_state (should_stop_early has already seen the epoch's valid loss there: train.py:438, then
:441); Trainer.load_checkpoint restores it under the condition fairseq uses for its own ``best``
(checkpoint_utils.py:276-282: neither optimizer nor meters reset, so not under
--finetune-from-model) and installs the train() wrapper when we were imported before train.py.
"""
from nesyseq.plugins.patches._version import check, mark_fixed

FAIRSEQ_VERSIONS = ("0.12.3",)


def apply() -> None:
    check(__name__, FAIRSEQ_VERSIONS)
    _install_train_fixes()


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
                         "(nesyseq plugins/patches/resume_budget.py)")
                return [None], True
            num_runs = getattr(_module.should_stop_early, "num_runs", None)
            if stopped_early(num_runs, cfg.checkpoint.patience):
                log.info(f"resumed after an early stop ({num_runs} validations without improvement, "
                         f"--patience {cfg.checkpoint.patience}): nothing to train (nesyseq plugins/patches/resume_budget.py; "
                         "--reset-meters starts the count again)")
                return [None], True
            return _original(cfg, trainer, task, epoch_itr)

        mark_fixed(train)
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

    mark_fixed(save_checkpoint)
    Trainer.save_checkpoint, Trainer.load_checkpoint = save_checkpoint, load_checkpoint


