"""Thin entry for ``fairseq-train/-generate/-hydra-train --user-dir user_dir``.

fairseq imports this folder as a module.  It applies the fixes of the pinned fairseq's bugs
(``plugins.patches``: each checks the fairseq version it was written for and refuses another with
one line naming the patch) and imports ``plugins``, which registers every nesyseq model,
architecture, task and criterion.  It also filters the third-party warnings known to be harmless
(nesyseq/common/quiet.py; ``NESYSEQ_WARNINGS=all`` shows them).
"""
from nesyseq.common.quiet import install as _quiet_known_warnings
from nesyseq.plugins.patches import UntestedFairseq, apply_all

_quiet_known_warnings()   # fairseq's known-harmless Hydra / torch notices (nesyseq/common/quiet.py)

try:
    apply_all()
except UntestedFairseq as exc:   # one line, not a traceback through fairseq's import machinery
    raise SystemExit(f"nesyseq: {exc}") from None

from nesyseq import plugins  # noqa: E402,F401
