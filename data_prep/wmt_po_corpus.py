"""Build a small real en-de parallel corpus from the German gettext catalogs (.po)
that PyPI packages ship, e.g. Django (BSD-3-Clause) and Sphinx (BSD-2-Clause).

    python -m nesyseq.data_prep.wmt_po_corpus --wheel django-5.2.19-py3-none-any.whl \
        --wheel sphinx-9.0.4-py3-none-any.whl --out /tmp/po-ende
    -> /tmp/po-ende/{train,valid,test}.{en,de}

Each non-fuzzy entry with a translation gives one pair (msgid -> msgstr; for a
plural entry msgid -> msgstr[0] and msgid_plural -> msgstr[1]).  Pairs are
de-duplicated on the English side, then split by a hash of the English text
(deterministic, independent of the order of wheels): --test-percent to test,
--valid-percent to valid, the rest to train.  docs/wmt.md names the sources.
"""
from __future__ import annotations

import argparse
import ast
import hashlib
import re
import zipfile
from pathlib import Path
from typing import Dict, Iterator, List, Tuple

from nesyseq.common.atomic import atomic_write_bytes
from nesyseq.common.errors import UserError

_PLACEHOLDER = re.compile(r"\s+")


def _unquote(s: str, where: str) -> str:
    try:
        return ast.literal_eval(s)  # a C-style "…" string; \n \t \" \\ as in Python
    except (ValueError, SyntaxError):
        raise UserError(f"{where}: bad quoted string {s[:40]!r}") from None


def parse_po(text: str, name: str) -> Iterator[Tuple[str, str]]:
    """(english, german) pairs of one catalog, fuzzy and untranslated entries skipped."""
    entry: Dict[str, str] = {}
    fuzzy = False
    key = None

    def flush():
        if entry and not fuzzy:
            if "msgid_plural" in entry:
                pairs = [(entry.get("msgid", ""), entry.get("msgstr[0]", "")),
                         (entry["msgid_plural"], entry.get("msgstr[1]", ""))]
            else:
                pairs = [(entry.get("msgid", ""), entry.get("msgstr", ""))]
            for en, de in pairs:
                en, de = _PLACEHOLDER.sub(" ", en).strip(), _PLACEHOLDER.sub(" ", de).strip()
                if en and de:
                    yield en, de

    for n, line in enumerate(text.splitlines(), 1):
        line = line.strip()
        if not line:
            continue
        if line.startswith("#"):
            if line.startswith("#,") and "fuzzy" in line:
                yield from flush()
                entry, key, fuzzy = {}, None, True
            continue
        if line.startswith('"'):
            if key is None:
                raise UserError(f"{name}:{n}: continuation line outside an entry")
            entry[key] += _unquote(line, f"{name}:{n}")
            continue
        word, _, rest = line.partition(" ")
        if word == "msgid" and ("msgid" in entry and any(k.startswith("msgstr") for k in entry)):
            yield from flush()
            entry, fuzzy = {}, False
        if word == "msgctxt" and any(k.startswith("msgstr") for k in entry):
            yield from flush()
            entry, fuzzy = {}, False
        key = word
        entry[key] = _unquote(rest, f"{name}:{n}")
    yield from flush()


def catalogs(wheel: Path, lang: str = "de") -> Iterator[Tuple[str, str]]:
    try:
        zf = zipfile.ZipFile(wheel)
    except (OSError, zipfile.BadZipFile) as exc:
        raise UserError(f"{wheel}: not a readable wheel ({exc})") from None
    with zf:
        for name in sorted(zf.namelist()):
            if f"/{lang}/LC_MESSAGES/" in name and name.endswith(".po"):
                yield f"{wheel.name}:{name}", zf.read(name).decode("utf-8")


def split_of(en: str, valid_pct: float, test_pct: float) -> str:
    h = int.from_bytes(hashlib.sha256(en.encode()).digest()[:8], "big") / 2 ** 64 * 100
    return "test" if h < test_pct else "valid" if h < test_pct + valid_pct else "train"


def build(wheels: List[Path], out: Path, valid_pct: float = 5.0, test_pct: float = 5.0) -> Dict[str, int]:
    seen = {}
    for wheel in wheels:
        for name, text in catalogs(wheel):
            for en, de in parse_po(text, name):
                seen.setdefault(en, de)
    if not seen:
        raise UserError(f"{', '.join(map(str, wheels))}: no German .po catalogs found")
    splits: Dict[str, List[Tuple[str, str]]] = {"train": [], "valid": [], "test": []}
    for en in sorted(seen):
        splits[split_of(en, valid_pct, test_pct)].append((en, seen[en]))
    out.mkdir(parents=True, exist_ok=True)
    for split, pairs in splits.items():
        for i, lang in enumerate(("en", "de")):
            atomic_write_bytes(str(out / f"{split}.{lang}"),
                               "".join(p[i] + "\n" for p in pairs).encode("utf-8"))
    return {k: len(v) for k, v in splits.items()}


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--wheel", action="append", required=True, type=Path)
    ap.add_argument("--out", required=True, type=Path)
    ap.add_argument("--valid-percent", type=float, default=5.0)
    ap.add_argument("--test-percent", type=float, default=5.0)
    a = ap.parse_args(argv)
    print(build(a.wheel, a.out, a.valid_percent, a.test_percent))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
