"""``nesyseq.load(path)``: open a checkpoint or export, find its dictionary, rebuild its model and
wrap it in the object of its family.

    (hub/checkpoint.py)        read_checkpoint, the one place a file is opened, and build
    find_data(path, cfg, data) the folder of the training dictionary: ``data``, else the folder
                               of the file, else its parent (the math study keeps one dictionary
                               beside its per-seed folders), else the training run's data folder
    family_of(cfg, data)       math | qa | wmt | folnet | folnet_lm | tpru, from the task and
                               the architecture (a translation model is math when its dictionary
                               is the character vocabulary of ``nesyseq prepare math``, WMT when
                               the folder holds the ``spm.model`` of ``nesyseq prepare wmt``)
"""
from __future__ import annotations

from pathlib import Path
from typing import Optional

from nesyseq.common.errors import UserError
from nesyseq.hub.checkpoint import checkpoint_config, read_checkpoint

FAMILIES = ("math", "qa", "wmt", "folnet", "folnet_lm", "tpru")
# the dictionary file each task reads from its data folder (None: the task builds its own)
_DICT_OF_TASK = {"translation": "dict.{src}.txt", "babi_qa": "dict.{src}.txt", "prefix_lm": "dict.{src}.txt",
                 "masked_lm": "dict.txt", "mlm_sop": "dict.txt", "language_modeling": "dict.txt",
                 "sentence_prediction": "input0/dict.txt", "entailment_pairs": None}
_MODEL_FILES = ("model.pt", "checkpoint_best.pt", "checkpoint_last.pt")


def model_file(path) -> Path:
    """``path`` itself, or the model file in the folder ``path`` names."""
    path = Path(path)
    if path.is_dir():
        for name in _MODEL_FILES:
            if (path / name).is_file():
                return path / name
        raise UserError(f"checkpoint {path}: a folder without {' / '.join(_MODEL_FILES)}")
    return path


def find_data(path: Path, cfg, data: Optional[str] = None) -> Optional[Path]:
    """The folder that holds the checkpoint's training dictionary (None for a task with a built-in one)."""
    task = cfg.task._name
    if task not in _DICT_OF_TASK:
        raise UserError(f"checkpoint {path}: task {task!r} is not one that nesyseq.load knows "
                        f"(families: {', '.join(FAMILIES)})")
    name = _DICT_OF_TASK[task]
    if name is None:
        return Path(data) if data else None
    name = name.format(src=getattr(cfg.task, "source_lang", None) or "src")
    if data:
        if not (Path(data) / name).is_file():
            raise UserError(f"data {data}: no {name} (the training dictionary of {path})")
        return Path(data)
    trained = str(getattr(cfg.task, "data", "") or "").split(":")[0]
    for folder in (path.parent, path.parent.parent, Path(trained) if trained else None):
        if folder is not None and (folder / name).is_file():
            return folder
    raise UserError(f"checkpoint {path}: no {name} beside it or in its parent folder; "
                    "pass data=DIR, the folder of its training dictionary")


def _is_character_dictionary(dictionary) -> bool:
    from nesyseq.data_prep.math_preprocess import SPACE

    words = [w for w in dictionary.symbols[dictionary.nspecial:] if not w.startswith("madeupword")]
    return SPACE in dictionary.indices and all(len(w) == 1 for w in words)


def family_of(cfg, data: Optional[Path], path: Path) -> str:
    from fairseq.data import Dictionary
    from fairseq.models import ARCH_MODEL_NAME_REGISTRY

    task = cfg.task._name
    arch = cfg.model._name if cfg.model is not None else None
    model = ARCH_MODEL_NAME_REGISTRY.get(arch, arch)
    if task == "babi_qa":
        return "qa"
    if task == "entailment_pairs":
        return "tpru"
    if model == "folnet" and task in ("masked_lm", "mlm_sop", "sentence_prediction"):
        return "folnet"
    if model == "folnet_lm" and task == "language_modeling":
        return "folnet_lm"
    if task == "translation":
        if data is not None and (data / "spm.model").is_file():
            return "wmt"
        src = getattr(cfg.task, "source_lang", None) or "src"
        if data is not None and _is_character_dictionary(Dictionary.load(str(data / f"dict.{src}.txt"))):
            return "math"
    raise UserError(f"checkpoint {path}: a {arch} model on task {task}, of no family nesyseq.load knows "
                    f"({', '.join(FAMILIES)}); a translation model needs its data folder with the "
                    "character dictionary of `nesyseq prepare math` or the spm.model of `nesyseq prepare wmt`")


def load(path, family: Optional[str] = None, data: Optional[str] = None, device: Optional[str] = None):
    """The checkpoint or export at ``path`` (a file, or a folder with model.pt) as the object of its
    family: ``MathModel`` (``.solve``, ``.roles``), ``QAModel`` (``.answer``), ``WMTModel``
    (``.translate``), ``FolnetModel`` (``.features``), ``FolnetLM`` (``.score``, ``.features``) or
    ``EntailmentModel`` (``.entails``); in eval mode on ``device`` (default: the GPU when there
    is one).  ``family`` names the family expected (a wrong one is an error); ``data`` the
    folder of the training dictionary when it is neither beside the file nor in its parent."""
    import torch

    if family is not None and family not in FAMILIES:
        raise UserError(f"family {family!r}: expected one of {', '.join(FAMILIES)}")
    path = model_file(path)
    state = read_checkpoint(path)
    cfg = checkpoint_config(state)
    data_dir = find_data(path, cfg, data)
    found = family_of(cfg, data_dir, path)
    if family is not None and found != family:
        raise UserError(f"checkpoint {path}: a {found} model ({cfg.model._name}), not {family}")
    from nesyseq.hub import families

    hub = families.CLASSES[found].from_checkpoint(path, cfg, state, data_dir)
    device = device or ("cuda" if torch.cuda.is_available() else "cpu")
    return hub.to(device).eval()
