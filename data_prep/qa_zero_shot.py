"""``nesyseq prepare qa-zero-shot``: the paper's zero-shot test files made from bAbI test files.

    nesyseq prepare qa-zero-shot --babi-file tasks_1-20_v1-2/en-10k/qa2_two-supporting-facts_test.txt \
        --kinds rooms,objects,people,all --out data/babi_zero_shot

Table 2 of the symbol-shift paper (section "Zero-shot entities", Fig. 5): "we leave the training
dataset unchanged but perturb the test dataset by introducing unseen entities. Precisely, we
replace the 6 rooms present in the task (kitchen, bedroom, office, garden, hallway, bathroom) by
kitchenette, guest-room, open-space, entry, terrace, toilet only in the test set [...] unseen
people and objects in the test set with the same procedure".  So each kind is a word-for-word
renaming of the test file: statements, questions and answers; line ids and supporting facts
unchanged.  The room map pairs the two lists of the paper in the order it gives them; the paper
names no replacement objects or people, so those words are ours (``REPLACEMENTS``).  ``all``
(ours) renames the three kinds at once.

``--babi-dir DIR --task N`` takes task N's test file from the bAbI release as ``prepare qa
--source`` reads it (the archive, an unpacked copy, or a folder holding only that task's files:
data_prep/qa_source.py).  One naming scheme, whichever route: the zero-shot files of a bAbI test
file (either naming scheme, ``--babi-file`` or ``--babi-dir``) are ``OUT/qaN_test_{kind}.txt``, the
names ``prepare qa --generate --zero-shot`` gives its splits; any other file gives
``OUT/{stem}_{kind}.txt``.  The original test is not copied beside them, so the folder holds
only zero-shot files (``prepare qa`` keeps the original as ``raw/qaN_test.txt``).

A kind none of whose words occurs in the file (e.g. objects in task 1) is skipped with a note;
none at all is an error.  ``OUT/zero_shot_map.json`` records the word map used; every file is
written atomically.  Evaluate a checkpoint on them with ``nesyseq evaluate qa --checkpoint CK
--babi-file OUT/...`` (no retraining; unseen words get zero semantic rows).
"""
from __future__ import annotations

import argparse
import json
import os
import re
import sys
from typing import Dict, List, Sequence

from nesyseq.data_prep.qa_generate import ZERO_SHOT
from nesyseq.common.errors import UserError

# The entities of the bAbI tasks (tasks_1-20_v1-2, en and en-10k; tasks 1-3 and 5 use these).
# rooms: the paper's list, its order; objects and people: every object / person of tasks 1-3, 5.
BABI_ENTITIES: Dict[str, List[str]] = {
    "rooms": ["kitchen", "bedroom", "office", "garden", "hallway", "bathroom"],
    "objects": ["apple", "football", "milk"],
    "people": ["mary", "john", "sandra", "daniel", "fred", "bill", "jeff"],
}
# rooms: the paper's replacements in its order; objects and people: ours (the paper gives none).
REPLACEMENTS: Dict[str, List[str]] = {
    "rooms": ["kitchenette", "guest-room", "open-space", "entry", "terrace", "toilet"],
    "objects": ["lantern", "compass", "teapot"],
    "people": ["wilhelmina", "quentin", "ottilie", "bartholomew", "cornelius", "ignatius", "leopold"],
}
KINDS = ZERO_SHOT   # the generator's --zero-shot kinds: rooms, objects, people, all

_WORD = re.compile(r"[A-Za-z][A-Za-z-]*")


def entity_words() -> str:
    """bAbI's people, rooms and objects as ``--entity-dropout-words`` reads them (stpr / tpr_rnn:
    entity dropout then picks only these words, so story dropout shows the all-new test)."""
    return ",".join(w for k in ("people", "rooms", "objects") for w in BABI_ENTITIES[k])


def entity_groups() -> str:
    """bAbI's people; rooms; objects as ``--entity-dropout-groups`` reads them (one group per kind,
    so ``--entity-dropout-type`` shows the 'people', 'rooms' and 'objects' zero-shot tests)."""
    return ";".join(",".join(BABI_ENTITIES[k]) for k in ("people", "rooms", "objects"))


def word_map(kind: str) -> Dict[str, str]:
    """Lower-case entity -> lower-case replacement for ``kind`` (``all``: the three maps)."""
    if kind not in KINDS:
        raise UserError(f"--kinds: unknown kind {kind!r}; choose from {', '.join(KINDS)}")
    kinds = ("rooms", "objects", "people") if kind == "all" else (kind,)
    return {old: new for k in kinds for old, new in zip(BABI_ENTITIES[k], REPLACEMENTS[k])}


def _same_case(new: str, old: str) -> str:
    return new[:1].upper() + new[1:] if old[:1].isupper() else new


def rename_lines(lines: Sequence[str], mapping: Dict[str, str], path: str = "<string>") -> List[str]:
    """Rename every whole word of ``lines`` found in ``mapping`` (case-insensitive; a capitalised
    word stays capitalised).  Only the text after the line id changes; tabs and ids are kept."""
    targets = set(mapping.values())
    out = []
    for lineno, line in enumerate(lines, 1):
        head, sep, rest = line.partition(" ")
        for m in _WORD.finditer(rest):
            if m.group(0).lower() in targets:
                raise UserError(f"{path}:{lineno}: already holds {m.group(0)!r}, a replacement word; "
                                "the renamed entities would not be unseen")
        rest = _WORD.sub(lambda m: _same_case(mapping[m.group(0).lower()], m.group(0))
                         if m.group(0).lower() in mapping else m.group(0), rest)
        out.append(head + sep + rest)
    return out


_BABI_TEST = re.compile(r"^qa(\d+)_(?:[A-Za-z0-9-]+_)?test\.txt$")


def zero_shot_stem(babi_file: str) -> str:
    """The stem of a test file's zero-shot files: ``qa{N}_test`` for a bAbI test file of either
    naming scheme (``qa2_two-supporting-facts_test.txt``, ``qa2_test.txt``), so every route writes
    ``qa{N}_test_{kind}.txt``, the names of ``prepare qa --generate --zero-shot``; any other file
    keeps its own stem."""
    name = os.path.basename(babi_file)
    m = _BABI_TEST.match(name)
    return f"qa{int(m.group(1))}_test" if m else os.path.splitext(name)[0]


def test_kind(path: str) -> str:
    """What a bAbI test file is, by its name: ``original`` (``qa{N}_test.txt``, ``qa{N}_<title>_test.txt``),
    the zero-shot kind of ``{stem}_{kind}.txt`` (rooms, objects, people, all), else ``""``."""
    name = os.path.basename(str(path))
    if _BABI_TEST.match(name):
        return "original"
    stem = os.path.splitext(name)[0]
    kind = stem.rsplit("_", 1)[-1] if "_" in stem else ""
    return kind if kind in KINDS else ""


def make_zero_shot(babi_file: str, kinds: Sequence[str], out: str) -> List[str]:
    """Write ``out/{stem}_{kind}.txt`` for each kind (stem: :func:`zero_shot_stem`); returns the paths."""
    from nesyseq.data_prep.qa_babi import read_babi_lines

    return write_zero_shot(read_babi_lines(babi_file), babi_file, zero_shot_stem(babi_file), kinds, out)


def write_zero_shot(lines: List[str], where: str, stem: str, kinds: Sequence[str], out: str) -> List[str]:
    """The renamings of the test file ``where`` (its ``lines``) as ``out/{stem}_{kind}.txt``."""
    from nesyseq.data_prep.qa_babi import parse_babi_lines
    from nesyseq.common.atomic import atomic_write_bytes

    parse_babi_lines(lines, where, None)        # a malformed input names its file:line here
    words = {m.group(0).lower() for line in lines for m in _WORD.finditer(line.partition(" ")[2])}
    os.makedirs(out, exist_ok=True)
    paths, maps = [], {}
    for kind in kinds:
        mapping = word_map(kind)
        present = {old: new for old, new in mapping.items() if old in words}
        if not present:            # e.g. objects in task 1: that split would equal the original
            print(f"{where}: no {kind} split: none of {', '.join(sorted(mapping))} occurs in it",
                  file=sys.stderr)
            continue
        renamed = rename_lines(lines, mapping, where)   # any replacement word already there is refused
        path = os.path.join(out, f"{stem}_{kind}.txt")
        atomic_write_bytes(path, ("\n".join(renamed) + "\n").encode("utf-8"))
        paths.append(path)
        maps[kind] = present
    if not paths:
        raise UserError(f"{where}: none of the bAbI entities of --kinds {','.join(kinds)} occurs in it; "
                        "nothing to rename")
    map_path = os.path.join(out, "zero_shot_map.json")
    old = {}
    if os.path.exists(map_path):
        with open(map_path, encoding="utf-8") as f:
            old = json.load(f)
    old[stem] = maps
    atomic_write_bytes(map_path, (json.dumps(old, indent=1, sort_keys=True) + "\n").encode("utf-8"))
    return paths


def make_task_zero_shot(babi_dir: str, task: str, kinds: Sequence[str], out: str,
                        babi_set: str = "en-10k") -> List[str]:
    """The renamings of task ``task``'s test file of ``babi_dir`` (an archive or a folder, as
    ``prepare qa --source`` reads it: data_prep/qa_source.py) as ``out/qa{task}_test_{kind}.txt``;
    returns the paths.  The original test is not copied: ``prepare qa --source`` keeps it as
    ``raw/qa{task}_test.txt``."""
    from nesyseq.data_prep.qa_source import babi_files, md5_check

    try:
        number = int(str(task))
    except ValueError:
        raise UserError(f"--task {task}: not a bAbI task number") from None
    test = babi_files(babi_dir, [number], babi_set, need=("test",))[number]["test"]
    md5_check(test, strict=False)
    return write_zero_shot(test.lines(), test.where, f"qa{number}_test", kinds, out)


def add_arguments(parser: argparse.ArgumentParser) -> None:
    from nesyseq.data_prep.qa_cli import zero_shot_kinds

    src = parser.add_mutually_exclusive_group(required=True)
    src.add_argument("--babi-file", action="append", metavar="FILE",
                     help="a bAbI-format test file (repeatable)")
    src.add_argument("--babi-dir", metavar="DIR|ARCHIVE",
                     help="the bAbI release as prepare qa --source reads it (archive, unpacked copy, or a folder "
                          "holding only the task's files); with --task N: that task's test file")
    parser.add_argument("--task", metavar="N", help="with --babi-dir: the task number")
    parser.add_argument("--babi-set", default="en-10k", metavar="SET",
                        help="with --babi-dir ARCHIVE or a copy of the whole release: the set read")
    parser.add_argument("--kinds", type=zero_shot_kinds, default=list(KINDS), metavar="KIND[,KIND...]",
                        help="rooms, objects, people (paper Table 2), all (ours: the three at once)")
    parser.add_argument("--out", required=True, metavar="DIR", help="output directory")


def run(args) -> int:
    if args.babi_dir:
        if not args.task:
            raise UserError("--babi-dir needs --task N")
        for path in make_task_zero_shot(args.babi_dir, args.task, args.kinds, args.out, args.babi_set):
            print(path)
        return 0
    if args.task:
        raise UserError("--task goes with --babi-dir (a --babi-file is one task's file already)")
    for babi_file in args.babi_file:
        for path in make_zero_shot(babi_file, args.kinds, args.out):
            print(path)
    return 0
