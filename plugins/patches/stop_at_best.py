"""``nesyseq train --stop-at-best X``: fairseq's training loop also stops once a saved
checkpoint's best validation metric reaches X.  Not a bug fix, so ``apply_all`` (``user_dir``)
never installs it; ``nesyseq train`` (slurm/train_until.py) calls :func:`install` with its bound.

The rule reads fairseq's own record of the best checkpoint, ``checkpoint_utils.save_checkpoint.best``
(fairseq/checkpoint_utils.py:42-45: the lowest ``--best-checkpoint-metric`` of the checkpoints
saved so far, the highest with ``--maximize-best-checkpoint-metric``), which fairseq also stores in
every checkpoint's ``extra_state["best"]`` (:122) and restores on resume (:282).  Two functions of
fairseq_cli/train.py are wrapped, both looked up in their module at every call:

* ``validate_and_save`` (called at fairseq_cli/train.py:345): after fairseq saved a checkpoint,
  ``best`` <= X (>= X when maximising) ends the run as fairseq's own stop conditions do (its loop
  breaks, the log says "done training"), so the last checkpoint holds the state in which the bound
  was reached;
* ``train`` (one call per epoch, fairseq_cli/train.py:205): a run resumed from a
  ``checkpoint_last.pt`` whose restored ``best`` already reaches X trains nothing, so a requeued
  or relaunched stage that had stopped stays stopped.
"""
import logging

from nesyseq.plugins.patches._version import UntestedFairseq, check  # noqa: F401  (what install raises)

FAIRSEQ_VERSIONS = ("0.12.3",)

log = logging.getLogger("nesyseq.train")


def reached(best, bound, maximize: bool) -> bool:
    """The stop rule on fairseq's best saved metric: at or past the bound."""
    if best is None or bound is None:
        return False
    return best >= bound if maximize else best <= bound


def install(train_module, checkpoint_utils, bound: float) -> None:
    """Wrap ``train_module``'s ``validate_and_save`` and ``train`` with the stop rule, after the
    version check every patch passes."""
    check(__name__, FAIRSEQ_VERSIONS)

    def best():
        return getattr(checkpoint_utils.save_checkpoint, "best", None)

    original_vs, original_train = train_module.validate_and_save, train_module.train

    def validate_and_save(cfg, trainer, task, epoch_itr, valid_subsets, end_of_epoch):
        valid_losses, should_stop = original_vs(cfg, trainer, task, epoch_itr, valid_subsets, end_of_epoch)
        if not should_stop and reached(best(), bound, cfg.checkpoint.maximize_best_checkpoint_metric):
            log.info(f"stop: the best saved {cfg.checkpoint.best_checkpoint_metric} {best()} reached "
                     f"--stop-at-best {bound} (nesyseq train)")
            should_stop = True
        return valid_losses, should_stop

    def train(cfg, trainer, task, epoch_itr):
        if reached(best(), bound, cfg.checkpoint.maximize_best_checkpoint_metric):
            log.info(f"resumed with the best saved {cfg.checkpoint.best_checkpoint_metric} {best()}, which "
                     f"reaches --stop-at-best {bound}: nothing to train (nesyseq train)")
            return [None], True
        return original_train(cfg, trainer, task, epoch_itr)

    # resume_budget wraps train() once, and knows its wrapper by this marker: carried over, so
    # that it does not wrap this one again when a checkpoint loads
    setattr(train, "_nesyseq_fixed", getattr(original_train, "_nesyseq_fixed", False))
    train_module.validate_and_save, train_module.train = validate_and_save, train
