"""Let fairseq's SLURM distributed setup run on CPU (gloo), e.g. 2 tasks in CI.

fairseq 0.12's ``_infer_slurm_init`` sets ``device_id = SLURM_LOCALID`` and
``infer_init_method`` then calls ``torch.cuda.set_device(device_id)`` for
every local rank > 0, which raises on a machine without CUDA.  Without CUDA
there is no device to pick, so while fairseq infers the init method we
present local id 0; rank and world size still come from SLURM_PROCID /
SLURM_NTASKS.  On a CUDA machine nothing changes.
"""
import os

import torch
from fairseq.distributed import utils as distributed_utils

_infer_init_method = distributed_utils.infer_init_method


def infer_init_method_cpu_safe(cfg, force_distributed=False):
    if torch.cuda.is_available() or "SLURM_LOCALID" not in os.environ:
        return _infer_init_method(cfg, force_distributed)
    saved = os.environ["SLURM_LOCALID"]
    os.environ["SLURM_LOCALID"] = "0"
    try:
        return _infer_init_method(cfg, force_distributed)
    finally:
        os.environ["SLURM_LOCALID"] = saved


if distributed_utils.infer_init_method is _infer_init_method:
    distributed_utils.infer_init_method = infer_init_method_cpu_safe
