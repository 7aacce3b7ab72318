"""The one vocabulary of ``nesyseq evaluate``: every subcommand names the same things the same way.

    --checkpoint CKPT [CKPT ...]   the checkpoint(s) to score
    --data DIR                     the binarized data (or the folder the command documents)
    --out DIR                      the report folder; default beside the (first) checkpoint
    --subset NAME[,NAME]           which split(s) of DIR
    --cpu                          run on CPU; the GPU is the default when one is present

Older spellings stay as hidden aliases (``--path``, ``--gen-subset``, ``--subsets``,
``--splits``, ``--gpu``, a positional DATA), so existing scripts keep working.
"""
import argparse
from pathlib import Path
from typing import Optional, Sequence

from nesyseq.common.errors import UserError

HIDDEN = argparse.SUPPRESS


def add_checkpoint(parser, help: str, aliases: Sequence[str] = (), required: bool = True) -> None:
    parser.add_argument("--checkpoint", dest="checkpoint", nargs="+", action="extend", metavar="CKPT",
                        required=required and not aliases, help=help)
    for alias in aliases:   # hidden; then --checkpoint is checked in out_dir()/checkpoints()
        parser.add_argument(alias, dest="checkpoint", nargs="+", action="extend", help=HIDDEN)


def add_data(parser, help: str, required: bool = True, positional_alias: bool = False) -> None:
    parser.add_argument("--data", metavar="DIR", required=required and not positional_alias, help=help)
    if positional_alias:   # the older `nesyseq evaluate lm DATA ...`
        parser.add_argument("data_positional", nargs="?", default=None, help=HIDDEN)


def add_out(parser, default_help: str) -> None:
    parser.add_argument("--out", metavar="DIR", default=None,
                        help=f"report folder (default: {default_help})")


def add_subset(parser, default: str, help: str, aliases: Sequence[str] = ()) -> None:
    parser.add_argument("--subset", default=default, metavar="NAME", help=f"{help} (default: {default})")
    for alias in aliases:
        parser.add_argument(alias, dest="subset", help=HIDDEN)


def add_cpu(parser, gpu_alias: bool = False) -> None:
    parser.add_argument("--cpu", action="store_true",
                        help="run on CPU even when a GPU is present (the GPU is the default when one is)")
    if gpu_alias:   # --gpu is accepted and changes nothing: the GPU is the default when present
        parser.add_argument("--gpu", action="store_true", help=HIDDEN)


def use_cpu(args) -> bool:
    """--cpu, or no CUDA device to run on."""
    if getattr(args, "cpu", False):
        return True
    import torch

    return not torch.cuda.is_available()


def data_dir(args) -> str:
    data = getattr(args, "data", None) or getattr(args, "data_positional", None)
    if not data:
        raise UserError("--data DIR is required")
    return data


def out_dir(args, checkpoint: Optional[str], name: str) -> Path:
    """--out, or ``name`` beside the (first) checkpoint."""
    if args.out:
        return Path(args.out).resolve()
    if not checkpoint:
        raise UserError("--out DIR is required here")
    return Path(checkpoint).resolve().parent / name


def checkpoint_file_problem(path) -> Optional[str]:
    """Why ``path`` is not a checkpoint torch can open, or None: it exists and its zip container is
    whole (torch.save writes a zip whose directory sits at the end, so an empty or truncated copy
    fails here, before torch.load, which would fail without naming the file)."""
    import zipfile

    path = Path(path)
    if not path.is_file():
        return "no such file"
    try:
        with zipfile.ZipFile(path) as z:
            if not z.namelist():
                raise zipfile.BadZipFile("empty archive")
    except (zipfile.BadZipFile, OSError) as exc:
        what = "an empty file" if path.stat().st_size == 0 else "truncated or not a torch file"
        return f"{what}: {exc}"
    return None


def named(flag: str, value) -> str:
    """``--checkpoint X``, or ``ckpt=X`` for a key of a ``--run`` spec (a flag ending in '=')."""
    return f"{flag}{value}" if flag.endswith("=") else f"{flag} {value}"


def check_checkpoint_file(path, flag: str = "--checkpoint") -> Path:
    """A checkpoint torch can open (:func:`checkpoint_file_problem`), else a one-line error naming it."""
    path = Path(path)
    problem = checkpoint_file_problem(path)
    if problem == "no such file":
        raise UserError(f"{named(flag, path)}: no such file")
    if problem:
        raise UserError(f"{named(flag, path)}: not a readable checkpoint ({problem})")
    return path
