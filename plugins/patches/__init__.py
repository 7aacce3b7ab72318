"""Patches for bugs of the fairseq we pin (ve-fairseq 0.12.3), one module per bug.

Each module names the fairseq code it fixes (file:line), ``FAIRSEQ_VERSIONS``, the fairseq
versions it was written and tested against, and ``apply()``.  Nothing is patched on import:
``user_dir`` (what ``fairseq-train/-generate --user-dir`` imports) calls :func:`apply_all`, and
so does any in-process caller that needs fairseq's training loop fixed.  Importing ``plugins``,
its safe globals or an evaluation helper patches nothing.

``stop_at_best`` is the one module here that fixes no bug: it wraps fairseq's training loop for
``nesyseq train --stop-at-best`` (slurm/train_until.py), which installs it with its bound; it
passes the same version gate, and ``apply_all`` leaves it out.

On a fairseq version a patch was not written for, ``apply()`` raises
:class:`UntestedFairseq`, one line naming the patch; ``NESYSEQ_UNTESTED_FAIRSEQ=1`` applies the
patches anyway (at your own risk: the code they replace may have moved or been fixed).
"""
import importlib
from typing import List

from nesyseq.plugins.patches._version import FORCE_ENV, UntestedFairseq, check  # noqa: F401  (re-exported)

# in the order they are applied
PATCHES = ("batch_remainder", "resume_batches", "plateau_state", "atomic_copy", "resume_budget",
           "bf16_tpu", "cpu_distributed", "checkpoint_files", "dictionary_record")


def patch_module(name: str):
    if name not in PATCHES:
        raise KeyError(f"no patch {name!r} (known: {', '.join(PATCHES)})")
    return importlib.import_module(f"nesyseq.plugins.patches.{name}")


def apply_all() -> List[str]:
    """Apply every patch once (idempotent); returns the names applied."""
    for name in PATCHES:
        patch_module(name).apply()
    return list(PATCHES)
