"""The checkpoint side of ``nesyseq.load``: open a file, read its config, rebuild its model.

    read_checkpoint(path)     the one place the hub opens a file: the project's checkpoint
                              loader (evaluations/checkpoints.py read_raw, torch's safe unpickler)
    checkpoint_config(state)  the config as fairseq's own loader makes it
    build(cfg, state, data)   (task, model) with the checkpoint's weights, eval mode, fp32
"""
from __future__ import annotations

from pathlib import Path
from typing import Optional



def read_checkpoint(path: Path) -> dict:
    """The checkpoint at ``path`` as torch's safe loader reads it, through the project's one
    checkpoint loader (``evaluations/checkpoints.py``): a missing, truncated, foreign or malicious
    file is a one-line error naming it."""
    from nesyseq.evaluations.checkpoints import read_raw

    return read_raw(path, flag="checkpoint")


def checkpoint_config(state: dict):
    """The checkpoint's config as fairseq's own loader makes it (legacy ``args`` converted)."""
    from fairseq.checkpoint_utils import _upgrade_state_dict
    from fairseq.dataclass.utils import convert_namespace_to_omegaconf
    from omegaconf import OmegaConf

    if state.get("cfg") is not None:
        state["cfg"] = OmegaConf.create(state["cfg"], flags={"allow_objects": True})
    state = _upgrade_state_dict(state)
    if state.get("args") is not None:
        return convert_namespace_to_omegaconf(state["args"])
    return state["cfg"]


def build(cfg, state: dict, data: Optional[Path], task=None):
    """(task, model) with the checkpoint's weights, in eval mode on CPU, in fp32."""
    from fairseq import tasks

    from nesyseq import plugins  # noqa: F401  (registers the models and tasks)

    from omegaconf import open_dict

    with open_dict(cfg):
        if data is not None:
            cfg.task.data = str(data)
    if task is None:
        task = tasks.setup_task(cfg.task)
    model = task.build_model(cfg.model)
    history = state.get("optimizer_history") or [{}]
    if "num_updates" in history[-1]:
        model.set_num_updates(history[-1]["num_updates"])
    model.load_state_dict(state["model"], strict=True, model_cfg=cfg.model)
    return task, model.float().eval()
