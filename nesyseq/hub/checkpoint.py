"""The checkpoint side of ``nesyseq.load``: open a file, read its config, rebuild its model.

    read_checkpoint(path)     the one place a file is opened: torch's safe unpickler
                              (weights_only=True, the plugins' allow-list); kept small so that the
                              project's shared checkpoint loader can take its place
    checkpoint_config(state)  the config as fairseq's own loader makes it
    build(cfg, state, data)   (task, model) with the checkpoint's weights, eval mode, fp32
"""
from __future__ import annotations

from pathlib import Path
from typing import Optional

from nesyseq.common.errors import UserError


def read_checkpoint(path: Path) -> dict:
    """The checkpoint at ``path`` as torch's safe loader reads it; a missing, truncated or
    foreign file is a one-line error naming it."""
    import torch

    from nesyseq.common.cli_args import check_checkpoint_file
    from nesyseq.plugins.checkpoint_safety import SAFE_GLOBALS

    check_checkpoint_file(path, flag="checkpoint")
    torch.serialization.add_safe_globals(SAFE_GLOBALS)
    try:
        state = torch.load(str(path), map_location="cpu", weights_only=True)
    except Exception as exc:  # not a torch file, a refused global
        first = str(exc).strip().splitlines()[0] if str(exc).strip() else type(exc).__name__
        raise UserError(f"checkpoint {path}: not a readable checkpoint ({first[:160]})") from None
    if not isinstance(state, dict) or "model" not in state or not (state.get("cfg") or state.get("args")):
        raise UserError(f"checkpoint {path}: not a fairseq checkpoint (no 'model' and 'cfg'/'args')")
    return state


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
