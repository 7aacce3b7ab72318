"""A checkpoint that cannot be written or read ends training in one line naming the file.

Saving: ``torch_persistent_save`` writes ``FILE.tmp`` and renames it (fairseq/checkpoint_utils.py:583-587),
but when ``torch.save`` fails (a full disk) it retries twice with 2.5 s sleeps, logs the traceback
(:599-607) and leaves the partial ``FILE.tmp`` behind; fairseq-train then dies with several more
tracebacks.  We write local files through ``nesyseq.common.atomic.atomic_write`` (a unique temporary,
removed on any failure, fsynced, renamed), once, and end the run with one line naming the file and
the error.  The checkpoints already on disk are untouched.

Resuming: ``Trainer.load_checkpoint`` (fairseq/trainer.py:465) reads the ``--restore-file``
(checkpoint_last.pt by default) with ``torch.load``; an empty file ends in a bare ``EOFError``, a
truncated one in a multi-line zip error, a pickle outside the safe loader's allow-list in an
``UnpicklingError``, none naming the file.  We check the file first (its zip directory, the same
check every ``nesyseq evaluate`` makes) and turn these into one line that names it and says what
to do: resume from another checkpoint with ``--restore-file`` (with ``--reset-*`` as needed), or
remove the damaged one to start over.  Training still refuses to start over by itself.

The one line is a ``SystemExit``: fairseq-train prints it without a traceback, exit status 1.
"""
from nesyseq.common.atomic import atomic_write
from nesyseq.common.cli_args import checkpoint_file_problem
from nesyseq.plugins.patches._version import check

FAIRSEQ_VERSIONS = ("0.12.3",)
_MARK = "_nesyseq_checkpoint_files"


def apply() -> None:
    check(__name__, FAIRSEQ_VERSIONS)
    _install()


def damaged_message(filename: str, problem: str) -> str:
    return (f"nesyseq: error: {filename}: damaged checkpoint ({problem}); resume from another checkpoint "
            "with --restore-file FILE (e.g. checkpoint_best.pt or a checkpoint_EPOCH_UPDATES.pt, with "
            "--reset-optimizer / --reset-dataloader / --reset-meters as needed), or remove it to start over")


def save_failed_message(filename: str, exc: BaseException) -> str:
    text = str(exc).strip()
    reason = getattr(exc, "strerror", None) or (text.splitlines()[0][:200] if text else type(exc).__name__)
    return (f"nesyseq: error: {filename}: cannot save the checkpoint ({reason}); nothing partial is left "
            "and the checkpoints already saved are intact")


def save(obj, filename: str) -> None:
    """``torch.save(obj, filename)`` atomically; a failure is one line (SystemExit)."""
    import torch

    try:
        atomic_write(filename, lambda tmp: torch.save(obj, tmp))
    except (OSError, RuntimeError) as exc:   # RuntimeError: torch's zip writer wraps a failed write
        raise SystemExit(save_failed_message(filename, exc)) from None


def check_readable(filename: str) -> None:
    """A damaged checkpoint file is one line (SystemExit) naming it and the choices."""
    problem = checkpoint_file_problem(filename)
    if problem:
        raise SystemExit(damaged_message(filename, problem))


def _install() -> None:
    import os
    import pickle

    from fairseq import checkpoint_utils
    from fairseq.trainer import Trainer

    if not getattr(checkpoint_utils.torch_persistent_save, _MARK, False):
        original_save = checkpoint_utils.torch_persistent_save

        def torch_persistent_save(obj, filename, async_write: bool = False):
            if async_write or "://" in str(filename):
                return original_save(obj, filename, async_write)
            return save(obj, filename)

        setattr(torch_persistent_save, _MARK, True)
        checkpoint_utils.torch_persistent_save = torch_persistent_save

    if not getattr(Trainer.load_checkpoint, _MARK, False):
        original_load = Trainer.load_checkpoint

        def load_checkpoint(self, filename, *args, **kwargs):
            local = "://" not in str(filename)
            if local and os.path.isfile(filename):
                check_readable(filename)
            try:
                return original_load(self, filename, *args, **kwargs)
            except (pickle.UnpicklingError, EOFError) as exc:
                if not local:
                    raise
                first = str(exc).strip().splitlines()[0] if str(exc).strip() else type(exc).__name__
                raise SystemExit(damaged_message(filename, first[:200])) from None

        setattr(load_checkpoint, _MARK, True)
        Trainer.load_checkpoint = load_checkpoint
