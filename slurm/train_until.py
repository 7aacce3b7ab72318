"""``nesyseq train [--stop-at-best X] DATA [fairseq-train options]``: fairseq-train, run in this
process, that also stops once a saved checkpoint's validation metric reaches X.

    nesyseq train --stop-at-best 0.008 data/bin/task1 --user-dir user_dir --task babi_qa ... --max-update 30000

Everything after the nesyseq options is fairseq-train's command line, parsed by fairseq's own
training parser; without ``--stop-at-best`` this is ``fairseq-train``.  The rule reads fairseq's
own record of the best checkpoint (the lowest ``--best-checkpoint-metric``, default the valid
loss in bits, of the checkpoints saved so far; the highest with ``--maximize-best-checkpoint-metric``),
through two hooks of fairseq_cli/train.py that plugins/patches/stop_at_best.py installs under the
fairseq version gate of every patch: the run ends after the first save whose best reaches X, and a
run resumed from a checkpoint whose best already reaches it trains nothing.

A run under ``--finetune-from-model`` or ``--reset-optimizer`` starts with no ``best``
(fairseq does not restore it then).  The bound is checked only when fairseq saves, never on a
validation it does not save.  Only one training process: fairseq's spawned ranks would import
train.py afresh, without the hooks, so a distributed world size above 1 is refused; fairseq's own
``--patience`` is the early stop for those runs.
"""
from __future__ import annotations

import argparse
import math

from nesyseq.common.errors import UserError


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


def train(fairseq_args, bound=None) -> int:
    from fairseq import checkpoint_utils, options
    from fairseq.dataclass.utils import convert_namespace_to_omegaconf
    from fairseq.distributed import utils as distributed_utils
    from fairseq_cli import train as train_module

    from nesyseq.plugins.patches import stop_at_best

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
        try:
            stop_at_best.install(train_module, checkpoint_utils, bound)
        except stop_at_best.UntestedFairseq as exc:   # one line, as user_dir refuses
            raise UserError(str(exc)) from None
    distributed_utils.call_main(cfg, train_module.main)
    return 0


def run(args) -> int:
    return train(args.fairseq_args, args.stop_at_best)
