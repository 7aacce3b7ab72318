"""Reading what ``fairseq-generate`` prints: ``S-<id>\\tsource``, ``T-<id>\\ttarget`` and
``H-<id>\\tscore\\thypothesis`` lines (other lines, e.g. ``D-``/``P-`` and the log, are skipped)."""
from collections import defaultdict
from pathlib import Path
from typing import Dict

from nesyseq.common.errors import UserError


def read_generate_output(path: Path) -> Dict[int, Dict[str, str]]:
    """Parse fairseq-generate's S-/T-/H- lines into {id: {'S':…, 'T':…, 'H':…}}.

    With ``--nbest`` > 1 the first (best) hypothesis is kept; a second S- or T- line for
    the same id is an error naming the file and line."""
    out: Dict[int, Dict[str, str]] = defaultdict(dict)
    with open(path, encoding="utf-8") as f:
        for lineno, line in enumerate(f, 1):
            tag, _, rest = line.rstrip("\n").partition("-")
            if tag not in ("S", "T", "H") or "\t" not in rest:
                continue
            ident, _, payload = rest.partition("\t")
            if not ident.isdigit():
                continue
            if tag == "H":
                _score, _, payload = payload.partition("\t")
            if tag in out[int(ident)]:
                if tag == "H":
                    continue
                raise UserError(f"{path}:{lineno}: duplicate {tag}-{ident} line")
            out[int(ident)][tag] = payload
    return dict(out)
