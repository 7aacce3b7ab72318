"""Reader for the bAbI question-answering format (Weston et al., 2015).

A bAbI file is a sequence of stories.  Every line is ``ID TEXT``; ``ID`` restarts
at 1 where a new story begins.  A statement line is ``ID sentence.``; a question
line is ``ID question?<TAB>answer<TAB>supporting ids`` and the supporting ids are
line ids of the same story (question lines are numbered too, so ids can skip)::

    1 Mary moved to the bathroom.
    2 John went to the hallway.
    3 Where is Mary? \tbathroom\t1

Each question becomes one :class:`QAExample`: the statements of the story so far
(earlier question lines dropped), keeping the ``memory_size`` most recent ones
(50 in jojonki/MemoryNetworks and TPR-RNN, 130 for task 3 in TPR-RNN; see
docs/qa.md), plus the question and its answer.  Answers such as ``guest-room``,
``apple,football`` and ``n,s`` are one token each.

Two naming schemes are understood (:func:`discover_tasks`):
``qa{N}_<name>_{train,test}.txt`` (the 1k and 10k folders; valid is held out of
train later) and ``qa{N}_{train,valid,test}.txt`` (the en-valid folders).

Malformed input raises :class:`nesyseq.common.errors.UserError` with ``file:line``.
"""
from __future__ import annotations

import os
import re
from dataclasses import dataclass, field
from typing import Dict, Iterable, List, Optional, Tuple

from nesyseq.common.errors import UserError

SENTENCE_END = "."   # token that closes every story sentence in the flat source
QUESTION_END = "?"   # token that closes the question

_TOKEN = re.compile(r"[^\s.?!]+")
# control characters (NUL, ESC, DEL, C1 ...; the tab is the format's separator): never passed on silently
_CONTROL = re.compile("[\x00-\x08\x0b-\x1f\x7f-\x9f]")
MAX_POSITIONS = 1024   # fairseq's --max-source-positions default, which the babi_qa task keeps


def tokenize(text: str) -> List[str]:
    """Lower-cased words; ``.``/``?``/``!`` are separators, ``-`` and ``,`` stay inside a word."""
    return [t.lower() for t in _TOKEN.findall(text)]


@dataclass
class QAExample:
    story: List[List[str]]          # kept statements, oldest first, each a token list
    question: List[str]
    answer: str                     # one token, e.g. "apple,football"
    supporting: List[int] = field(default_factory=list)  # indices into ``story`` (-1: dropped by the cap)
    where: str = ""                 # "file:line" of the question

    def source_tokens(self) -> List[str]:
        """The flat source: ``s_1 . s_2 . ... s_n . q ?`` (the separators let the memory models
        recover sentences; sequence models read it as it is)."""
        out: List[str] = []
        for sent in self.story:
            out.extend(sent)
            out.append(SENTENCE_END)
        out.extend(self.question)
        out.append(QUESTION_END)
        return out


def parse_babi_lines(lines: Iterable[str], path: str = "<string>",
                     memory_size: Optional[int] = 50, max_tokens: Optional[int] = None) -> List[QAExample]:
    """Parse bAbI lines into examples; ``memory_size`` None keeps the whole story.  A line with a
    control character, or (``max_tokens``) with more tokens than that, is an error naming it."""
    if memory_size is not None and memory_size < 1:
        raise UserError(f"memory size must be >= 1, got {memory_size}")
    examples: List[QAExample] = []
    story: List[Tuple[int, List[str]]] = []   # (line id, tokens) of the statements so far
    seen_ids: set = set()                     # every id of the current story, statements and questions
    prev_id = 0
    for lineno, raw in enumerate(lines, 1):
        where = f"{path}:{lineno}"
        line = raw.rstrip("\n").rstrip("\r")
        if not line.strip():
            continue
        bad = _CONTROL.search(line)
        if bad:
            raise UserError(f"{where}: control character U+{ord(bad.group()):04X} at column {bad.start() + 1} "
                            "(a NUL byte or another invisible character)")
        head, _, rest = line.partition(" ")
        if not head.isdigit() or not rest.strip():
            raise UserError(f"{where}: expected 'ID text', got {line[:60]!r}")
        line_id = int(head)
        if line_id == 1:
            story, seen_ids = [], set()
        elif line_id <= prev_id:
            raise UserError(f"{where}: line id {line_id} does not follow {prev_id} "
                            "(a new story must start at 1)")
        prev_id = line_id
        if "\t" in rest:
            parts = rest.split("\t")
            if len(parts) < 2 or not parts[1].strip():
                raise UserError(f"{where}: question line without an answer after the tab")
            question = tokenize(parts[0])
            _check_length(question, where, max_tokens)
            answer = parts[1].strip().lower()
            if not question:
                raise UserError(f"{where}: empty question")
            if " " in answer:
                raise UserError(f"{where}: answer {answer!r} is not one token")
            if not story:
                raise UserError(f"{where}: question before any story sentence")
            sup_ids = []
            for tok in (parts[2].split() if len(parts) > 2 else []):
                if not tok.isdigit():
                    raise UserError(f"{where}: supporting-fact id {tok!r} is not a number")
                sid = int(tok)
                if sid not in seen_ids or sid >= line_id:
                    raise UserError(f"{where}: supporting-fact id {sid} names no earlier line of this story")
                if sid not in {i for i, _ in story}:
                    raise UserError(f"{where}: supporting-fact id {sid} is a question line, not a statement")
                sup_ids.append(sid)
            kept = story if memory_size is None else story[-memory_size:]
            index = {sid: k for k, (sid, _) in enumerate(kept)}
            examples.append(QAExample(story=[list(t) for _, t in kept], question=question, answer=answer,
                                      supporting=[index.get(s, -1) for s in sup_ids], where=where))
        else:
            if "?" in rest:
                raise UserError(f"{where}: question line without a tab-separated answer")
            toks = tokenize(rest)
            if not toks:
                raise UserError(f"{where}: empty sentence")
            _check_length(toks, where, max_tokens)
            story.append((line_id, toks))
        seen_ids.add(line_id)
    return examples


def _check_length(tokens: List[str], where: str, max_tokens: Optional[int]) -> None:
    """One line (its tokens and the closing ``.`` or ``?``) must fit the model's positions."""
    if max_tokens is not None and len(tokens) + 1 > max_tokens:
        raise UserError(f"{where}: {len(tokens) + 1} tokens in one line, more than the model's {max_tokens} "
                        "positions (--max-positions); a line this long is no bAbI sentence")


def read_babi_lines(path: str) -> List[str]:
    """The lines of a bAbI-format file; a missing or non-UTF-8 file is a one-line error.  A UTF-8
    byte-order mark (Windows editors write one) and CRLF line ends are read as plain text."""
    try:
        with open(path, encoding="utf-8-sig") as f:
            return f.read().splitlines()
    except UnicodeDecodeError as exc:
        raise UserError(f"{path}: not UTF-8 text ({exc.reason})") from None
    except FileNotFoundError:
        raise UserError(f"{path}: no such file") from None


def parse_babi_file(path: str, memory_size: Optional[int] = 50, max_tokens: Optional[int] = None) -> List[QAExample]:
    return parse_babi_lines(read_babi_lines(path), path, memory_size, max_tokens)


_SCHEME_1K = re.compile(r"^qa(\d+)_([A-Za-z0-9-]+)_(train|test)\.txt$")
_SCHEME_VALID = re.compile(r"^qa(\d+)_(train|valid|test)\.txt$")


def discover_tasks(folder: str, tasks: Optional[Iterable] = None) -> Dict[int, Dict[str, str]]:
    """Map task number -> {split: path} for both naming schemes in ``folder``.

    ``qa{N}_<name>_{train,test}.txt`` gives train/test (valid is held out later);
    ``qa{N}_{train,valid,test}.txt`` gives all three.  With ``tasks`` only those tasks are
    read and checked (a folder may hold just them, or other tasks' files in any state); each
    must have its train and test file, else a one-line error names the missing file.
    Without, every task found must have both.  A task present under both naming schemes is an
    error naming the files.
    """
    if not os.path.isdir(folder):
        raise UserError(f"{folder}: not a directory")
    found = group_task_files(sorted(os.listdir(folder)), folder, tasks)
    return {t: {split: os.path.join(folder, name) for split, name in splits.items()}
            for t, splits in found.items()}


# the file titles of the released tasks (tasks_1-20_v1-2): qa{N}_{title}_{train,test}.txt
BABI_TITLES = {1: "single-supporting-fact", 2: "two-supporting-facts", 3: "three-supporting-facts",
               4: "two-arg-relations", 5: "three-arg-relations", 6: "yes-no-questions", 7: "counting",
               8: "lists-sets", 9: "simple-negation", 10: "indefinite-knowledge", 11: "basic-coreference",
               12: "conjunction", 13: "compound-coreference", 14: "time-reasoning", 15: "basic-deduction",
               16: "basic-induction", 17: "positional-reasoning", 18: "size-reasoning", 19: "path-finding",
               20: "agents-motivations"}


def task_numbers(tasks: Iterable) -> List[int]:
    """``tasks`` (numbers or their text) as ints; anything else is a one-line error."""
    out = []
    for t in tasks:
        text = str(t).strip()
        if not text.isdigit() or int(text) < 1:
            raise UserError(f"--tasks: {text!r} is not a bAbI task number (bAbI files are qa1 ... qa20)")
        if int(text) not in out:
            out.append(int(text))
    return out


def group_task_files(names: Iterable[str], where: str, tasks: Optional[Iterable] = None,
                     need: Tuple[str, ...] = ("train", "test")) -> Dict[int, Dict[str, str]]:
    """{task: {split: name}} of the bAbI file names among ``names`` (the entries of the folder or
    archive folder ``where``, named in errors); see :func:`discover_tasks`.  ``need``: the splits
    each requested task must have."""
    wanted = None if tasks is None else task_numbers(tasks)
    found: Dict[int, Dict[str, str]] = {}
    scheme: Dict[int, str] = {}
    for name in names:
        m1, m2 = _SCHEME_1K.match(name), _SCHEME_VALID.match(name)
        if not (m1 or m2):
            continue
        task, split, kind = (int(m1.group(1)), m1.group(3), "1k") if m1 else (int(m2.group(1)), m2.group(2), "valid")
        if wanted is not None and task not in wanted:
            continue
        if scheme.setdefault(task, kind) != kind:
            raise UserError(f"{os.path.join(where, name)}: task {task} appears under both naming schemes")
        if split in found.setdefault(task, {}):
            raise UserError(f"{os.path.join(where, name)}: second {split} file for task {task} "
                            f"(first: {found[task][split]})")
        found[task][split] = name
    if wanted is None:
        if not found:
            raise UserError(f"{where}: no bAbI files (qa{{N}}_*_train.txt or qa{{N}}_train.txt)")
        for task, splits in found.items():
            for need in ("train", "test"):
                if need not in splits:
                    raise UserError(f"{where}: task {task} has no {need} file")
        return found
    for task in wanted:
        for split in need:
            if split not in found.get(task, {}):
                expected = (f"qa{task}_{split}.txt" if scheme.get(task) == "valid" else
                            f"qa{task}_{BABI_TITLES.get(task, '*')}_{split}.txt")
                raise UserError(f"{os.path.join(where, expected)}: no such file (task {task}'s {split} file)")
    return {t: found[t] for t in wanted}
