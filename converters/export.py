"""``nesyseq convert export``: a trained checkpoint's weights for others to re-evaluate.

fairseq's checkpoint_best.pt carries the Adam state (twice the weights) and the data iterator's
position.  The export keeps what ``fairseq-generate`` / ``nesyseq evaluate math`` need to rebuild
and run the model: the config (``cfg`` or the legacy ``args``), the weights, and the update count
and validation loss for the record.  Absolute paths of the machine that trained it (the data,
save and user dirs in ``cfg``) are blanked: whoever evaluates it names their own ``--data`` and
``--user-dir``.  ``--dtype fp16`` halves the floating-point weights (the model
is rebuilt in fp32 and loads them rounded); ``fp32`` keeps them bit for bit.

    nesyseq convert export --checkpoint ckpt/checkpoint_best.pt --dtype fp16 --out model.pt
"""
import argparse
import io
from pathlib import Path

from nesyseq.common.atomic import atomic_write_bytes
from nesyseq.common.dictionaries import RECORD_KEY
from nesyseq.common.errors import UserError

DTYPES = ("fp16", "fp32")


def read_checkpoint(path: Path) -> dict:
    """The checkpoint as saved (evaluations/checkpoints.py: torch's safe loader; a file that is not
    a readable fairseq checkpoint is a one-line error naming it)."""
    from nesyseq.evaluations import checkpoints

    return checkpoints.read_raw(path)


def _without_paths(cfg):
    """``cfg`` (nested dicts, or the legacy Namespace) with every absolute-path string blanked."""
    import argparse

    if isinstance(cfg, dict):
        return {k: _without_paths(v) for k, v in cfg.items()}
    if isinstance(cfg, argparse.Namespace):
        return argparse.Namespace(**_without_paths(vars(cfg)))
    if isinstance(cfg, str) and cfg.startswith("/"):
        return ""
    return cfg


def export_weights(checkpoint, out, dtype: str = "fp16") -> dict:
    """Write the slim checkpoint to ``out`` atomically; returns it."""
    import torch

    if dtype not in DTYPES:
        raise UserError(f"--dtype {dtype}: expected one of {', '.join(DTYPES)}")
    state = read_checkpoint(Path(checkpoint))
    cast = torch.float16 if dtype == "fp16" else None
    model = {k: (v.to(cast) if cast is not None and torch.is_tensor(v) and v.is_floating_point() else v)
             for k, v in state["model"].items()}
    history = state.get("optimizer_history") or [{}]
    last = history[-1]
    slim = {k: _without_paths(state[k]) for k in ("cfg", "args") if state.get(k) is not None}
    slim["model"] = model
    # fairseq reads the criterion's name and the update count from here when it loads a model
    slim["optimizer_history"] = [{k: last[k] for k in ("criterion_name", "optimizer_name", "lr_scheduler_state",
                                                       "num_updates") if k in last}]
    extra = state.get("extra_state") or {}
    # the validation loss for the record, and which dictionaries the weights index (the evaluators check it)
    slim["extra_state"] = {k: extra[k] for k in ("val_loss", RECORD_KEY) if k in extra}
    slim["last_optimizer_state"] = None
    buf = io.BytesIO()
    torch.save(slim, buf)
    out = Path(out)
    out.parent.mkdir(parents=True, exist_ok=True)
    atomic_write_bytes(str(out), buf.getvalue())
    return slim


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--checkpoint", required=True, metavar="CKPT", help="a fairseq checkpoint (.pt)")
    parser.add_argument("--out", required=True, metavar="FILE", help="the exported checkpoint (.pt)")
    parser.add_argument("--dtype", default="fp16", choices=DTYPES,
                        help="fp16 (default): floating-point weights halved; fp32: kept bit for bit")


def run(args) -> int:
    slim = export_weights(args.checkpoint, args.out, args.dtype)
    n = sum(v.numel() for v in slim["model"].values())
    size = Path(args.out).stat().st_size
    print(f"{args.out}: {n:,} weights ({args.dtype}), {size / 2**20:.2f} MiB, "
          f"{slim['optimizer_history'][0].get('num_updates', '?')} updates")
    return 0
