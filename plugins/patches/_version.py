"""The version gate every patch passes before it touches fairseq."""
import os
from typing import Optional, Sequence

FORCE_ENV = "NESYSEQ_UNTESTED_FAIRSEQ"


class UntestedFairseq(RuntimeError):
    """A patch refused a fairseq version it was not written for (one line, names the patch)."""


def fairseq_version() -> str:
    import fairseq

    return str(getattr(fairseq, "__version__", "unknown"))


def check(patch: str, versions: Sequence[str], found: Optional[str] = None) -> None:
    patch = patch.rpartition(".")[2]   # a module's __name__ names its patch
    found = fairseq_version() if found is None else found
    if found in versions or os.environ.get(FORCE_ENV, "") not in ("", "0"):
        return
    raise UntestedFairseq(f"nesyseq patch {patch!r} was written for fairseq {', '.join(versions)}, "
                          f"found {found}; set {FORCE_ENV}=1 to apply it anyway")


def swap(patch: str, versions: Sequence[str], owner, attr: str, new):
    """Check the version, then put ``new`` in place of ``owner.attr`` once; returns what it
    replaced (None when ``owner.attr`` is already ours)."""
    check(patch, versions)
    current = getattr(owner, attr)
    if getattr(current, "_nesyseq_fixed", False):
        return None
    setattr(owner, attr, mark_fixed(new))
    return current


def mark_fixed(fn):
    """Mark ``fn`` as nesyseq's replacement (a patch applied twice then changes nothing)."""
    setattr(fn, "_nesyseq_fixed", True)
    return fn
