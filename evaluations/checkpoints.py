"""The one checkpoint loader of evaluations/: every command that reads a trained checkpoint
(``evaluate math / wmt / qa / entailment / lm``, ``analyze roles``, ``convert export``, the step
reader of math_compare) reads it here, so all of them refuse the same bad input the same way, in
one line naming the file, before anything is decoded or written:

* missing, empty or truncated (the zip directory torch.save writes at the end is checked first);
* a pickle that asks for anything beyond torch's safe set and plugins/checkpoint_safety.py's one
  class (``torch.load(weights_only=True)``: a crafted ``os.system`` global is refused, never run);
* not a fairseq checkpoint (no ``model``, no ``cfg`` or ``args``);
* another family: the command scores another task (a math checkpoint given to ``evaluate qa``), or
  a translation checkpoint of another language pair (a math ``src-tgt`` model given WMT ``en-de``);
* other dictionaries: the data folder's dictionaries are not the ones the weights index.  Checked on
  contents, not only sizes: against the record training writes in the checkpoint
  (nesyseq/common/dictionaries.py), else against the dictionaries of the checkpoint's own training
  folder (``cfg.task.data``) when it is still there, else by size against the embedding rows.
"""
from __future__ import annotations

import os
import re
import sys
from pathlib import Path
from typing import Dict, Optional, Sequence, Tuple

from nesyseq.common.cli_args import named
from nesyseq.common.errors import UserError

# the language-modelling tasks `evaluate lm` scores (fairseq eval-lm needs one)
LM_TASKS = ("language_modeling", "multilingual_language_modeling", "prefix_lm")


def _first_line(exc: BaseException, limit: int = 200) -> str:
    text = str(exc).strip()
    return text.splitlines()[0][:limit] if text else type(exc).__name__


def _refused_global(exc: BaseException) -> str:
    """What the safe unpickler refused, from torch's several-paragraph message."""
    text = str(exc)
    m = re.search(r"(?:unsupported |Unsupported global: )GLOBAL ([\w.]+)", text)
    if m:
        return f"the global {m.group(1)}"
    for line in text.splitlines():
        if "nsupported" in line or "not an allowed global" in line or "blocked" in line:
            return line.strip()[:160]
    return "something its safe loader does not allow"


def read_raw(path, flag: str = "--checkpoint", mmap: bool = False) -> dict:
    """The checkpoint as torch.save wrote it (safe load only, nothing upgraded); one-line errors."""
    import pickle

    import torch

    from nesyseq.common.cli_args import check_checkpoint_file
    from nesyseq.plugins import checkpoint_safety  # noqa: F401  (the one extra class fairseq pickles)

    path = check_checkpoint_file(path, flag)
    try:
        state = torch.load(str(path), map_location="cpu", weights_only=True, mmap=mmap)
    except pickle.UnpicklingError as exc:
        raise UserError(f"{named(flag, path)}: refused: it asks the unpickler for {_refused_global(exc)}, which a "
                        "checkpoint of ours never holds (a file from elsewhere, or a malicious one); "
                        "it is not loaded") from None
    except Exception as exc:   # a damaged record inside a whole zip
        raise UserError(f"{named(flag, path)}: not a readable checkpoint ({_first_line(exc)})") from None
    if not isinstance(state, dict) or "model" not in state or not (state.get("cfg") or state.get("args")):
        raise UserError(f"{named(flag, path)}: not a fairseq checkpoint (no 'model' and 'cfg'/'args')")
    return state


def read(path, flag: str = "--checkpoint", overrides: Optional[dict] = None, mmap: bool = False) -> dict:
    """The checkpoint as fairseq's loaders see it: :func:`read_raw`, its config as an OmegaConf
    (``overrides`` applied, e.g. ``{"data": DIR}``) and fairseq's upgrades of old formats."""
    from fairseq import checkpoint_utils
    from fairseq.dataclass.utils import overwrite_args_by_name
    from omegaconf import OmegaConf

    from nesyseq import plugins  # noqa: F401  (registers our models and tasks: the upgrade looks them up)

    state = read_raw(path, flag, mmap=mmap)
    if state.get("args") is not None and overrides:
        for key, value in overrides.items():
            setattr(state["args"], key, value)
    if state.get("cfg") is not None:
        state["cfg"] = OmegaConf.create(state["cfg"], flags={"allow_objects": True})
        if overrides:
            overwrite_args_by_name(state["cfg"], overrides)
    try:
        return checkpoint_utils._upgrade_state_dict(state)
    except Exception as exc:   # an old config naming a model or task this code no longer has
        raise UserError(f"{named(flag, path)}: cannot read its config ({_first_line(exc)})") from None


# ------------------------------------------------------------------ what the checkpoint is
def _cfg_get(state: dict, section: str, key: str):
    cfg = state.get("cfg")
    if cfg is not None:
        try:
            part = cfg[section]
        except (KeyError, TypeError):
            part = None
        if part is not None:
            try:
                return part[key]
            except (KeyError, TypeError):
                pass
    args = state.get("args")   # the legacy flat Namespace: the task's name is args.task, the model's args.arch
    if key == "_name":
        key = {"task": "task", "model": "arch"}.get(section, key)
    return getattr(args, key, None) if args is not None else None


def task_name(state: dict) -> str:
    return str(_cfg_get(state, "task", "_name") or "?")


def arch_name(state: dict) -> str:
    return str(_cfg_get(state, "model", "_name") or _cfg_get(state, "model", "arch") or "?")


def language_pair(state: dict) -> Tuple[Optional[str], Optional[str]]:
    return _cfg_get(state, "task", "source_lang"), _cfg_get(state, "task", "target_lang")


def training_data(state: dict) -> Optional[str]:
    data = _cfg_get(state, "task", "data")
    return str(data).split(os.pathsep)[0] if data else None


def describe(state: dict) -> str:
    """``task 'translation', src-tgt, arch tp_transformer`` (for error messages)."""
    src, tgt = language_pair(state)
    pair = f", {src}-{tgt}" if src and tgt else ""
    return f"task {task_name(state)!r}{pair}, arch {arch_name(state)}"


def require_task(state: dict, path, tasks: Sequence[str], command: str, flag: str = "--checkpoint") -> None:
    """``state``'s task is one of ``tasks``, else one line naming the checkpoint's and the wanted ones."""
    if task_name(state) not in tasks:
        raise UserError(f"{named(flag, path)}: a checkpoint of {describe(state)}, but {command} scores "
                        f"{' / '.join(repr(t) for t in tasks)} checkpoints")


def require_pair(state: dict, path, src: str, tgt: str, data, flag: str = "--checkpoint") -> None:
    """A translation checkpoint's language pair is the data's, else one line naming both."""
    a, b = language_pair(state)
    if (a, b) != (src, tgt):
        raise UserError(f"{named(flag, path)}: a checkpoint of {describe(state)}, but --data {data} is {src}-{tgt} data")


# ------------------------------------------------------------------ dictionaries
def setup_task(state: dict, data, path, flag: str = "--checkpoint", overrides: Optional[dict] = None,
               data_flag: str = "--data"):
    """The checkpoint's task with its data folder set to ``data`` (its dictionaries read from there;
    ``state``'s config says ``data`` from then on); a missing or malformed dictionary is one line
    naming it."""
    from fairseq import tasks
    from omegaconf import open_dict

    cfg = state["cfg"]
    with open_dict(cfg):
        cfg.task.data = str(data)
        for key, value in (overrides or {}).items():
            setattr(cfg.task, key, value)
    try:
        return tasks.setup_task(cfg.task, from_checkpoint=True)
    except FileNotFoundError as exc:
        missing = exc.filename or _first_line(exc)
        raise UserError(f"{named(data_flag, data)}: {missing} is missing (a dictionary {named(flag, path)} needs)") from None
    except (ValueError, UnicodeError, OSError, AssertionError) as exc:
        raise UserError(f"{named(data_flag, data)}: cannot read its dictionaries for {named(flag, path)} "
                        f"({_first_line(exc)})") from None
    except Exception as exc:   # fairseq raises a plain Exception for a badly encoded dictionary
        if "dictionary" in str(exc).lower() or "encoding" in str(exc).lower():
            raise UserError(f"{named(data_flag, data)}: cannot read its dictionaries ({_first_line(exc)})") from None
        raise


def _training_dictionaries(state: dict, trained_on: str, path, flag: str) -> dict:
    """The dictionaries of the checkpoint's own training folder ({} when they cannot be read)."""
    from nesyseq.common.dictionaries import task_dictionaries

    import copy

    config_only = {"cfg": copy.deepcopy(state["cfg"])}   # the config, not the weights
    try:
        return task_dictionaries(setup_task(config_only, trained_on, path, flag))
    except UserError:
        return {}


def _embedding_rows(state: dict) -> Dict[str, int]:
    """Rows of the encoder's / decoder's token embedding (``*embed_tokens.weight``), by side."""
    rows = {}
    for key, w in state["model"].items():
        if key.endswith("embed_tokens.weight") and hasattr(w, "shape"):
            side = "source" if key.startswith("encoder") else "target" if key.startswith("decoder") else None
            if side and side not in rows:
                rows[side] = int(w.shape[0])
    return rows


def _first_difference(a: Sequence[str], b: Sequence[str]) -> str:
    for i, (x, y) in enumerate(zip(a, b)):
        if x != y:
            return f"id {i} is {x!r} there, {y!r} here"
    return f"{len(a)} symbols there, {len(b)} here"


def check_dictionaries(state: dict, task, path, data, trained_on: Optional[str] = None,
                       flag: str = "--checkpoint", note: bool = True, data_flag: str = "--data") -> str:
    """The dictionaries ``task`` read from ``data`` are the ones the checkpoint's weights index,
    else one line naming both.  Checked against the checkpoint's record, else the dictionaries of
    ``trained_on`` (its training folder) when that is still there, else by size against the token
    embeddings; returns which ("record", "training data", "size")."""
    from nesyseq.common.dictionaries import RECORD_KEY, fingerprint, task_dictionaries

    here = task_dictionaries(task)
    record = (state.get("extra_state") or {}).get(RECORD_KEY)
    if isinstance(record, dict) and record:
        for side, want in record.items():
            if side not in here or not isinstance(want, dict):
                continue
            got = fingerprint(here[side].symbols)
            if got["sha256"] != want.get("sha256"):
                raise UserError(f"{named(flag, path)}: its {side} dictionary ({want.get('size')} symbols, sha256 "
                                f"{str(want.get('sha256'))[:12]}) is not the one of {named(data_flag, data)} ({got['size']} "
                                f"symbols, sha256 {got['sha256'][:12]}): the model was trained on other data")
        return "record"
    if trained_on and os.path.realpath(trained_on) == os.path.realpath(str(data)):
        return "training data"
    theirs = _training_dictionaries(state, trained_on, path, flag) if trained_on and os.path.isdir(trained_on) else {}
    for side, d in theirs.items():
        if side in here and list(d.symbols) != list(here[side].symbols):
            raise UserError(f"{named(flag, path)}: its {side} dictionary (of its training data {trained_on}, "
                            f"{len(d)} symbols) is not the one of {named(data_flag, data)} ({len(here[side])} symbols; "
                            f"{_first_difference(d.symbols, here[side].symbols)})")
    if theirs:
        return "training data"
    for side, rows in _embedding_rows(state).items():
        if side in here and rows != len(here[side]):
            raise UserError(f"{named(flag, path)}: its {side} embedding has {rows} rows, but the {side} dictionary of "
                            f"{named(data_flag, data)} has {len(here[side])} symbols: the model was trained on other data")
    if note:
        print(f"nesyseq: note: {path} records no dictionary and its training data is not here: the "
              f"dictionaries of {data} are checked by size only", file=sys.stderr)
    return "size"


# ------------------------------------------------------------------ the whole check, and models
def checked(path, data, tasks: Sequence[str], command: str, flag: str = "--checkpoint",
            pair: Optional[Tuple[str, str]] = None, task_overrides: Optional[dict] = None,
            mmap: bool = False, state: Optional[dict] = None, data_flag: str = "--data"):
    """(state, task): ``path`` read safely (or ``state``, read by :func:`read` already), of one of
    ``tasks`` (and of language ``pair``), its task set up on ``data`` and the dictionaries found
    there checked against the checkpoint.  Nothing is decoded, nothing written."""
    if not Path(str(data)).is_dir():
        raise UserError(f"{named(data_flag, data)}: no such directory")
    if state is None:
        state = read(path, flag, mmap=mmap)
    require_task(state, path, tasks, command, flag)
    if pair is not None:
        require_pair(state, path, pair[0], pair[1], data, flag)
    trained_on = training_data(state)
    task = setup_task(state, data, path, flag, task_overrides, data_flag)
    check_dictionaries(state, task, path, data, trained_on, flag, data_flag=data_flag)
    return state, task


def load_model(path, data, tasks: Sequence[str], command: str, flag: str = "--checkpoint",
               pair: Optional[Tuple[str, str]] = None, state: Optional[dict] = None,
               data_flag: str = "--data"):
    """(model, cfg, task, state): the checked checkpoint's model, in eval mode, on CPU."""
    from fairseq import checkpoint_utils

    state, task = checked(path, data, tasks, command, flag, pair=pair, state=state, data_flag=data_flag)
    try:
        models, cfg, task = checkpoint_utils.load_model_ensemble_and_task(
            [str(path)], arg_overrides={"data": str(data)}, task=task, state=state)
    except RuntimeError as exc:   # shapes that do not fit the model its config builds
        raise UserError(f"{named(flag, path)}: its weights do not fit the model its config builds "
                        f"({_first_line(exc)})") from None
    return models[0].eval(), cfg, task, state


def steps(path, flag: str = "--checkpoint") -> Optional[int]:
    """The update count a checkpoint was saved at (its optimizer history), or None."""
    state = read_raw(path, flag, mmap=True)
    history = state.get("optimizer_history") or [{}]
    value = history[-1].get("num_updates") if isinstance(history[-1], dict) else None
    return int(value) if value is not None else None


def valid_loss(state: dict) -> Optional[float]:
    """fairseq's ``extra_state["val_loss"]`` of a read checkpoint, or None."""
    v = (state.get("extra_state") or {}).get("val_loss")
    return None if v is None else float(v)
