"""--bf16 implies --tpu.

fairseq/options.py:200-201 (parse_args_and_arch) sets ``args.tpu = True`` whenever --bf16 (or
--memory-efficient-bf16) is given, a leftover from when bf16 meant TPU.  On a GPU the Trainer then
asks torch_xla for a device (trainer.py:63) and dies with "'NoneType' object has no attribute
'xla_device'"; infer_init_method (distributed/utils.py:47) also skips the SLURM/torchrun setup when
tpu is set.  The user's --user-dir is imported inside that same parse call, too late to change it,
so we undo the implication at the next fairseq entry point every CLI goes through,
``distributed_utils.call_main`` (distributed/utils.py:368; train.py:572-574, hydra_train.py:54-56,
validate.py, eval_lm.py, interactive.py), before it reads cfg.common.tpu.  A real TPU keeps it: the
implied tpu stays when torch_xla is importable and no CUDA device is visible, and an explicit
--tpu on the command line is never touched.
"""
from nesyseq.plugins.patches._version import check, mark_fixed

FAIRSEQ_VERSIONS = ("0.12.3",)


def apply() -> None:
    check(__name__, FAIRSEQ_VERSIONS)
    _install_bf16_fix()


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
                "--bf16 without a TPU: fairseq's implied --tpu is undone (nesyseq plugins/patches/bf16_tpu.py); "
                "pass --tpu explicitly to train on a TPU")
        return original(cfg, main, **kwargs)

    mark_fixed(call_main)
    distributed_utils.call_main = call_main


