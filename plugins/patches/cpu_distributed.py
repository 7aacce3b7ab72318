"""fairseq's SLURM distributed setup fails on CPU (gloo), e.g. 2 tasks in CI.

fairseq/distributed/utils.py's ``_infer_slurm_init`` sets ``device_id = SLURM_LOCALID`` and
``infer_init_method`` (:46) then calls ``torch.cuda.set_device(device_id)`` (:84) for every local
rank > 0, which raises on a machine without CUDA.  Without CUDA there is no device to pick, so
while fairseq infers the init method we present local id 0; rank and world size still come from
SLURM_PROCID / SLURM_NTASKS.  On a CUDA machine nothing changes.
"""
import os

from nesyseq.plugins.patches._version import check

FAIRSEQ_VERSIONS = ("0.12.3",)
NAME = "cpu_distributed"
_original = None


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
    check(NAME, FAIRSEQ_VERSIONS)
    from fairseq.distributed import utils as distributed_utils

    if getattr(distributed_utils.infer_init_method, "_nesyseq_fixed", False):
        return
    _original = distributed_utils.infer_init_method
    infer_init_method_cpu_safe._nesyseq_fixed = True
    distributed_utils.infer_init_method = infer_init_method_cpu_safe
