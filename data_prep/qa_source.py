"""Where a bAbI task's files come from: ``prepare qa --source``, ``prepare qa-zero-shot --babi-dir``
and the ``babi_dir`` of configs/experiments/qa_table2.yaml read the same three forms:

* the release archive ``tasks_1-20_v1-2.tar.gz`` (any tar archive of it): one set of the release
  (``--babi-set``, default ``en-10k``) is read from the archive, nothing is unpacked;
* an unpacked copy: the folder holding ``tasks_1-20_v1-2/`` (what ``nesyseq fetch babi --out``
  writes), ``tasks_1-20_v1-2/`` itself, or one set's folder (``.../en-10k``);
* a folder holding only some tasks' files, in either naming scheme (data_prep/qa_babi.py).

Only the requested tasks are read and checked: other tasks' files may be missing or incomplete.
A missing requested file is a one-line error naming it.

A file whose place in the release is known (its set from the archive path or from the folder's
name, ``en-10k/qa2_two-supporting-facts_train.txt``) and whose md5 is published (``RELEASE_MD5``,
the table of docs/qa.md) is checked: ``fetch babi --from`` refuses a file that differs, ``prepare``
prints a note and records it (``qa_meta.json``'s ``source_files``), so a deliberately edited copy
still prepares.  Files in a folder not named after a set have no known place: their md5 is
recorded, not compared.
"""
from __future__ import annotations

import hashlib
import os
import sys
import tarfile
from dataclasses import dataclass
from pathlib import Path
from typing import Dict, Iterable, List, Optional, Tuple

from nesyseq.common.errors import UserError

RELEASE = "tasks_1-20_v1-2"
SETS = ("en", "en-10k", "en-valid", "en-valid-10k", "hn", "hn-10k", "shuffled", "shuffled-10k")
DEFAULT_SET = "en-10k"

# md5 of the released files the results use (docs/qa.md, "The released bAbI tasks")
RELEASE_MD5: Dict[str, str] = {
    "en-10k/qa1_single-supporting-fact_test.txt": "d33488e97ced71fabb9381ee273a66d3",
    "en-10k/qa1_single-supporting-fact_train.txt": "1835e9ea97b02d6546071b41987bcd8b",
    "en-10k/qa2_two-supporting-facts_test.txt": "dd4b3eb2de365efe93eecfa67b3988f0",
    "en-10k/qa2_two-supporting-facts_train.txt": "14833d98880fb69fff2fce0974cef008",
    "en-10k/qa5_three-arg-relations_test.txt": "2cf6f2134b9dac40d1e57a75ed1f4b35",
    "en-10k/qa5_three-arg-relations_train.txt": "bd196dcf7bea77bae010ad53810fdfa8",
}


@dataclass(frozen=True)
class BabiFile:
    task: int
    split: str                      # train, valid or test
    where: str                      # a path, or ARCHIVE:MEMBER
    release_name: Optional[str]     # SET/FILE where the set is known, else None
    data: bytes

    def md5(self) -> str:
        return hashlib.md5(self.data).hexdigest()

    def lines(self) -> List[str]:
        """The file's lines, read as data_prep/qa_babi.read_babi_lines reads a file."""
        try:
            return self.data.decode("utf-8-sig").splitlines()
        except UnicodeDecodeError as exc:
            raise UserError(f"{self.where}: not UTF-8 text ({exc.reason})") from None


def md5_check(f: BabiFile, strict: bool) -> Dict[str, object]:
    """Compare ``f`` with its published md5 where there is one; returns the record kept in
    qa_meta.json / fetch_babi.json.  A mismatch is an error when ``strict``, else a note."""
    got, want = f.md5(), RELEASE_MD5.get(f.release_name or "")
    if want and got != want:
        msg = f"{f.where}: md5 {got}, but bAbI v1.2's {f.release_name} has md5 {want} (docs/qa.md)"
        if strict:
            raise UserError(msg + "; nothing written")
        print(f"note: {msg}: not the released file", file=sys.stderr)
    return {"from": f.where, "release_name": f.release_name, "md5": got,
            "published_md5": want or "unknown", "verified": bool(want) and got == want}


def _names_of_babi_files(names: Iterable[str]) -> bool:
    from nesyseq.data_prep.qa_babi import _SCHEME_1K, _SCHEME_VALID

    return any(_SCHEME_1K.match(n) or _SCHEME_VALID.match(n) for n in names)


def set_folder(source: str, babi_set: str = DEFAULT_SET) -> Path:
    """The folder of bAbI files that ``source`` (a folder) stands for: itself when it holds bAbI
    files, else its ``SET/`` or ``tasks_1-20_v1-2/SET/``."""
    p = Path(source)
    if _names_of_babi_files(os.listdir(p)):
        return p
    for cand in (p / babi_set, p / RELEASE / babi_set):
        if cand.is_dir():
            return cand
    raise UserError(f"{source}: no bAbI files (qa{{N}}_*_train.txt or qa{{N}}_train.txt), nor a {babi_set}/ "
                    f"or {RELEASE}/{babi_set}/ folder holding them (--babi-set picks the set)")


def babi_files(source: str, tasks: Optional[Iterable] = None, babi_set: str = DEFAULT_SET,
               need: Tuple[str, ...] = ("train", "test")) -> Dict[int, Dict[str, BabiFile]]:
    """{task: {split: BabiFile}} of ``source`` (an archive or a folder, see the module docstring);
    with ``tasks`` only those, each with the splits ``need`` names."""
    from nesyseq.data_prep.qa_babi import group_task_files

    if babi_set not in SETS:
        raise UserError(f"--babi-set {babi_set}: not a set of the bAbI release ({', '.join(SETS)})")
    p = Path(source)
    if p.is_dir():
        folder = set_folder(source, babi_set)
        set_name = folder.name if folder.name in SETS else None
        found = group_task_files(sorted(os.listdir(folder)), str(folder), tasks, need)
        out: Dict[int, Dict[str, BabiFile]] = {}
        for t, splits in found.items():
            for split, name in splits.items():
                path = folder / name
                try:
                    data = path.read_bytes()
                except OSError as exc:
                    raise UserError(f"{path}: cannot read ({exc.strerror or exc})") from None
                out.setdefault(t, {})[split] = BabiFile(t, split, str(path),
                                                        f"{set_name}/{name}" if set_name else None, data)
        return out
    if not p.exists():
        raise UserError(f"{source}: no such file or folder")
    return _archive_files(p, tasks, babi_set, need)


def _archive_files(archive: Path, tasks, babi_set: str, need) -> Dict[int, Dict[str, BabiFile]]:
    from nesyseq.data_prep.qa_babi import group_task_files

    try:
        tar = tarfile.open(archive)
    except (tarfile.TarError, OSError) as exc:
        raise UserError(f"{archive}: neither a folder nor a readable tar archive ({exc})") from None
    with tar:
        try:
            members = [m for m in tar.getmembers() if m.isfile()]
        except (tarfile.TarError, OSError, EOFError) as exc:
            raise UserError(f"{archive}: cannot read the archive ({exc})") from None
        babi = [m for m in members if _names_of_babi_files([Path(m.name).name])]
        in_set = {Path(m.name).name: m for m in babi if Path(m.name).parent.name == babi_set}
        if not in_set:
            sets = sorted({Path(m.name).parent.name for m in babi})
            raise UserError(f"{archive}: no {babi_set}/ folder of bAbI files in the archive "
                            f"({'its sets: ' + ', '.join(sets) if sets else 'it holds no bAbI files'}; --babi-set picks one)")
        where = f"{archive}:{Path(next(iter(in_set.values())).name).parent}"
        found = group_task_files(sorted(in_set), where, tasks, need)
        out: Dict[int, Dict[str, BabiFile]] = {}
        for t, splits in found.items():
            for split, name in splits.items():
                member = in_set[name]
                try:
                    data = tar.extractfile(member).read()
                except (tarfile.TarError, OSError, EOFError, AttributeError) as exc:
                    raise UserError(f"{archive}:{member.name}: cannot read ({exc})") from None
                out.setdefault(t, {})[split] = BabiFile(t, split, f"{archive}:{member.name}",
                                                        f"{babi_set}/{name}", data)
        return out
