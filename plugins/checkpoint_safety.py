"""Let torch>=2.6 load fairseq checkpoints with the default ``weights_only=True``.

A fairseq checkpoint pickles a few non-tensor Python objects (the legacy
``argparse.Namespace`` config, the logging meters in ``extra_state``).  Rather
than turning the safe unpickler off, we allow-list exactly those classes.
Anything else in a checkpoint (for example a crafted ``os.system`` global) is
still refused by torch.
"""
import argparse
import collections

import torch

from fairseq.logging import meters


def _safe_globals():
    return [
        argparse.Namespace,
        collections.OrderedDict,
        meters.AverageMeter,
        meters.SumMeter,
        meters.TimeMeter,
        meters.StopwatchMeter,
        meters.MetersDict,
    ]


SAFE_GLOBALS = _safe_globals()
torch.serialization.add_safe_globals(SAFE_GLOBALS)
