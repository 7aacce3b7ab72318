"""``nesyseq train [--stop-at-best X] DATA [fairseq-train options]``: fairseq-train, run in this
process, that also stops once a saved checkpoint's validation metric reaches X.

    nesyseq train --stop-at-best 0.008 data/bin/task1 --user-dir user_dir --task babi_qa ... --max-update 30000

Everything after the nesyseq options is fairseq-train's command line, parsed by fairseq's own
training parser; without ``--stop-at-best`` this is ``fairseq-train``.  The rule reads fairseq's
own record of the best checkpoint, ``checkpoint_utils.save_checkpoint.best`` (the lowest
``--best-checkpoint-metric``, default the valid loss in bits, of the checkpoints saved so far;
the highest with ``--maximize-best-checkpoint-metric``), which fairseq also stores in every
checkpoint's ``extra_state["best"]`` and restores on resume.  Two hooks of fairseq_cli/train.py:

* ``validate_and_save``: after fairseq saved a checkpoint, ``best`` <= X (>= X when maximising)
  ends the run as fairseq's own stop conditions do (its loop breaks, the log says "done
  training"), so the last checkpoint holds the state in which the bound was reached;
* ``train`` (one call per epoch): a run resumed from a ``checkpoint_last.pt`` whose restored
  ``best`` already reaches X trains nothing, so a requeued or relaunched stage that had stopped
  stays stopped.

A run under ``--finetune-from-model`` or ``--reset-optimizer`` starts with no ``best``
(fairseq does not restore it then).  The bound is checked only when fairseq saves, never on a
validation it does not save.  Only one training process: fairseq's spawned ranks would import
train.py afresh, without the hooks, so a distributed world size above 1 is refused; fairseq's own
``--patience`` is the early stop for those runs.
"""
from __future__ import annotations

import argparse
import logging
import math

from nesyseq.common.errors import UserError

log = logging.getLogger("nesyseq.train")


def _bound(text: str):
    if text.strip().lower() in ("", "none"):
        return None
    try:
        value = float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected a number (or nothing: no bound), got {text!r}") from None
    if not math.isfinite(value):
        raise argparse.ArgumentTypeError(f"expected a finite number, got {text!r}")
    return value


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--stop-at-best", type=_bound, default=None, metavar="X",
                        help="stop once a saved checkpoint's --best-checkpoint-metric (default: valid loss) is <= X "
                             "(>= X with --maximize-best-checkpoint-metric); '' or none: no bound")
    parser.add_argument("fairseq_args", nargs=argparse.REMAINDER, metavar="DATA [OPTIONS]",
                        help="fairseq-train's arguments (the data folder first)")


def reached(best, bound, maximize: bool) -> bool:
    """The stop rule on fairseq's best saved metric: at or past the bound."""
    if best is None or bound is None:
        return False
    return best >= bound if maximize else best <= bound


def install_stop(train_module, checkpoint_utils, bound: float) -> None:
    """Wrap ``train_module``'s ``validate_and_save`` and ``train`` (fairseq_cli/train.py looks both
    up in its module at every call) with the stop rule."""
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

    # plugins/fairseq_fixes.py wraps train() once (its marker); it has by now, keep its marker
    train._nesyseq_fixed = getattr(original_train, "_nesyseq_fixed", False)
    train_module.validate_and_save, train_module.train = validate_and_save, train


def train(fairseq_args, bound=None) -> int:
    from fairseq import checkpoint_utils, options
    from fairseq.dataclass.utils import convert_namespace_to_omegaconf
    from fairseq.distributed import utils as distributed_utils
    from fairseq_cli import train as train_module

    if not fairseq_args or fairseq_args[0].startswith("-"):
        raise UserError("nesyseq train: give fairseq-train's data folder first, then its options "
                        "(nesyseq train [--stop-at-best X] DATA [OPTIONS])")
    args = options.parse_args_and_arch(options.get_training_parser(), input_args=list(fairseq_args))
    cfg = convert_namespace_to_omegaconf(args)
    if bound is not None:
        world = cfg.distributed_training.distributed_world_size
        if world > 1:
            raise UserError(f"--stop-at-best: runs in one process, but the distributed world size is {world} "
                            "(--distributed-world-size 1, or fairseq's --patience for several ranks)")
        install_stop(train_module, checkpoint_utils, bound)
    distributed_utils.call_main(cfg, train_module.main)
    return 0


def run(args) -> int:
    return train(args.fairseq_args, args.stop_at_best)
