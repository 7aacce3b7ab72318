"""Let torch>=2.6 load fairseq checkpoints with the default ``weights_only=True``.

What fairseq-train writes (``Trainer.state_dict``) is tensors, plain
containers, ``collections.OrderedDict`` and numbers, all of which torch's safe
unpickler accepts; older fairseq checkpoints also keep the legacy config under
``"args"`` as an ``argparse.Namespace``.  Rather than turning the safe loader
off, we allow-list exactly that class.  Anything else in a checkpoint (for
example a crafted ``os.system`` global) is still refused by torch.
"""
import argparse

import torch

SAFE_GLOBALS = [argparse.Namespace]

torch.serialization.add_safe_globals(SAFE_GLOBALS)
