"""fairseq's SLURM distributed setup fails on CPU (gloo), e.g. 2 tasks in CI.

``_infer_slurm_init`` sets ``device_id = SLURM_LOCALID`` and ``infer_init_method``
(fairseq/distributed/utils.py:46) then calls ``torch.cuda.set_device(device_id)`` (utils.py:84) for
every local rank > 0, which raises on a machine without CUDA.  Without CUDA there is no device to pick, so
while fairseq infers the init method we present local id 0; rank and world size still come from
SLURM_PROCID / SLURM_NTASKS.  On a CUDA machine nothing changes.
"""
import os
from typing import Any

from nesyseq.plugins.patches._version import swap

FAIRSEQ_VERSIONS = ("0.12.3",)
_original: Any = None  # the fairseq function this patch wraps, set by apply()


def infer_init_method_cpu_safe(cfg, force_distributed=False):
    import torch

    if torch.cuda.is_available() or "SLURM_LOCALID" not in os.environ:
        return _original(cfg, force_distributed)
    saved = os.environ["SLURM_LOCALID"]
    os.environ["SLURM_LOCALID"] = "0"
    try:
        return _original(cfg, force_distributed)
    finally:
        os.environ["SLURM_LOCALID"] = saved


def apply() -> None:
    global _original
    from fairseq.distributed import utils as distributed_utils

    _original = swap(__name__, FAIRSEQ_VERSIONS, distributed_utils, "infer_init_method",
                     infer_init_method_cpu_safe) or _original
