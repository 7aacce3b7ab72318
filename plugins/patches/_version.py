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
    found = fairseq_version() if found is None else found
    if found in versions or os.environ.get(FORCE_ENV, "") not in ("", "0"):
        return
    raise UntestedFairseq(f"nesyseq patch {patch!r} was written for fairseq {', '.join(versions)}, "
                          f"found {found}; set {FORCE_ENV}=1 to apply it anyway")
