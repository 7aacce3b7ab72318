"""Preprocess Mathematics Dataset raw files into fairseq's binarized translation format.

Input: a raw directory in DeepMind's layout (what :mod:`data_prep.math_generate`
writes, or the pregenerated v1.0 tarball): ``RAW/{train-easy,train-medium,
train-hard,interpolate,extrapolate}/<module>.txt`` with question and answer on
alternating lines.  Output under ``OUT``::

    OUT/text/{train,valid,test,test1}.{src,tgt}   one example per line, one
                                                  character per token, ' ' -> '▁'
    OUT/text/{valid,test,test1}.modules           module of each example (line i
                                                  <-> fairseq-generate id i)
    OUT/bin/                                      fairseq-preprocess output
                                                  (-s src -t tgt, joined dict)
    OUT/bin/{test,test1}.modules, OUT/bin/prepare_stats.json

``test`` is the interpolate set and ``test1`` the extrapolate set, so
``fairseq-generate OUT/bin --gen-subset test`` / ``--gen-subset test1`` decode
them and the ``.modules`` files give accuracy per module.  When no selected
module has an extrapolate module (e.g. only ``algebra__linear_1d``), ``bin/``
has no ``test1`` subset (fairseq cannot binarize an empty one) and
``prepare_stats.json`` says ``subsets.test1.examples == 0``.

Vocabulary
    Character level.  A space becomes the visible placeholder ``▁`` (U+2581)
    so that fairseq's whitespace tokenizer sees one token per character.  The
    joined source/target dictionary is built by fairseq-preprocess
    (``--joined-dictionary``) from the *train* subset only; valid and test
    characters that are not in it become ``<unk>`` and are counted (count and
    first ``file:line`` in ``prepare_stats.json`` and one warning line).
    Whitespace other than ' ' and a literal ``▁`` cannot be represented: in
    training data they are an error naming the file and line; in test data
    they are written as ``<unk>`` and counted.

Validation split -- and why the interpolate set is never used for selection
    The validation set is held out from the *training* files: a question goes
    to valid when ``blake2b(seed, question)`` falls below ``valid_fraction``
    (at least one question is always held out).  Hashing the question keeps all
    copies of a question on the same side, so valid and train share no
    question, and the split is streaming and independent of file order.
    Examples whose question also occurs in the interpolate or extrapolate set
    are dropped from train and valid (counted as ``dropped_test_overlap``), so
    valid is disjoint from both test sets.

    Checkpoints must be selected on ``valid`` only.  The reference TP-Transformer
    code validates on (and so effectively selects checkpoints / stops early on)
    the interpolate test set, which leaks the test set into model selection and
    inflates the reported interpolation accuracy -- a methodological flaw this
    pipeline does not reproduce: fairseq-train's ``--valid-subset`` default
    (``valid``) is the held-out training slice, and ``test``/``test1`` are only
    for the final fairseq-generate runs.

Bad input is reported as a one-line ``UserError("file:line: message")``: an
odd number of lines, an empty module file, an empty question/answer line,
undecodable bytes, an unknown ``--modules`` pattern, a raw directory without
training or interpolate files.
"""
from __future__ import annotations

import hashlib
import json
import os
import pathlib
import re
import shutil
import sys
from typing import Dict, Iterator, List, Tuple

from nesyseq.data_prep.fairseq_binarize import fairseq_preprocess
from nesyseq.data_prep.math_generate import SPLITS, TEST_SPLITS, TRAIN_SPLITS
from nesyseq.common.atomic import atomic_write_bytes

SPACE = "\u2581"  # '▁', the visible placeholder for ' '
UNK = "<unk>"
SUBSET_OF_SPLIT = {"interpolate": "test", "extrapolate": "test1"}
STATS_FILE = "prepare_stats.json"
FORMAT_VERSION = 1


def _user_error(message: str) -> Exception:
    from nesyseq.common.errors import UserError

    return UserError(message)


# --------------------------------------------------------------------------
# raw files
# --------------------------------------------------------------------------


def iter_module_file(path) -> Iterator[Tuple[str, str, int]]:
    """Yield ``(question, answer, question_line)`` from a DeepMind module file.

    Raises ``UserError("path:line: ...")`` for an empty file, an odd number of
    lines, an empty line or bytes that are not UTF-8.
    """
    path = str(path)
    n = 0
    question = None
    with open(path, "rb") as f:
        for n, raw in enumerate(f, start=1):
            if raw.endswith(b"\n"):
                raw = raw[:-1]
            if raw.endswith(b"\r"):
                raw = raw[:-1]
            try:
                line = raw.decode("utf-8")
            except UnicodeDecodeError as exc:
                raise _user_error(f"{path}:{n}: not valid UTF-8 ({exc.reason} at byte {exc.start})") from None
            if not line.strip():
                what = "question" if n % 2 else "answer"
                raise _user_error(f"{path}:{n}: empty line where a {what} is expected "
                                  f"(questions and answers must alternate, one per line)")
            if n % 2:
                question = line
            else:
                yield question, line, n - 1
    if n == 0:
        raise _user_error(f"{path}:1: empty module file (no question/answer pairs)")
    if n % 2:
        raise _user_error(f"{path}:{n}: odd number of lines ({n}): the question on line {n} "
                          f"has no answer line")


def discover_raw(raw_dir) -> Dict[str, Dict[str, str]]:
    """``{split: {module: path}}`` for the ``*.txt`` files of a raw directory."""
    raw_dir = str(raw_dir)
    if not os.path.isdir(raw_dir):
        raise _user_error(f"{raw_dir}: raw directory does not exist")
    found: Dict[str, Dict[str, str]] = {}
    for split in SPLITS:
        d = os.path.join(raw_dir, split)
        if os.path.isdir(d):
            files = sorted(n for n in os.listdir(d) if n.endswith(".txt") and not n.startswith("."))
            found[split] = {n[:-4]: os.path.join(d, n) for n in files}
    if not any(found.get(s) for s in TRAIN_SPLITS):
        raise _user_error(f"{raw_dir}: no training files (expected {'/, '.join(TRAIN_SPLITS)}/ "
                          f"with <module>.txt files)")
    if not found.get("interpolate"):
        raise _user_error(f"{raw_dir}: no interpolate/<module>.txt files (the test set)")
    return found


def select_raw(found: Dict[str, Dict[str, str]], modules: str = "*") -> Dict[str, Dict[str, str]]:
    """Restrict discovered files to ``modules`` (same rule as generation, see math_generate).

    Train/interpolate modules are matched by the patterns; an extrapolate module
    is kept when its family (longest train module name it extends) is selected,
    or -- for a file without a family among the train modules present -- when
    its own name matches a pattern.
    """
    from nesyseq.data_prep.math_generate import extrapolate_family, resolve_modules

    train_names = sorted({m for s in TRAIN_SPLITS + ("interpolate",) for m in found.get(s, {})})
    extra_names = sorted(found.get("extrapolate", {}))
    try:
        selected, extra = resolve_modules(modules, train_names, extra_names)
    except Exception as exc:
        from nesyseq.common.errors import UserError

        if isinstance(exc, UserError):
            raise _user_error(f"{exc} (modules found in the raw directory)") from None
        raise
    import fnmatch

    pats = [p.strip() for p in (modules or "*").split(",") if p.strip()]
    for name in extra_names:
        if extrapolate_family(name, train_names) is None and any(fnmatch.fnmatchcase(name, p) for p in pats):
            extra.append(name)
    keep = set(selected)
    out = {s: {m: p for m, p in found.get(s, {}).items() if m in keep}
           for s in TRAIN_SPLITS + ("interpolate",)}
    out["extrapolate"] = {m: p for m, p in found.get("extrapolate", {}).items() if m in set(extra)}
    return out


# --------------------------------------------------------------------------
# characters
# --------------------------------------------------------------------------


def _unrepresentable(ch: str) -> bool:
    return ch == SPACE or (ch != " " and (ch.isspace() or not ch.isprintable()))


_OTHER_WHITESPACE = re.compile(r"[^\S ]")


def encode_chars(text: str, where: str, strict: bool) -> str:
    """``'a b'`` -> ``'a ▁ b'``.  ``strict`` (training data): unrepresentable is an error."""
    if text.isprintable() and SPACE not in text and not _OTHER_WHITESPACE.search(text):
        return " ".join(text.replace(" ", SPACE))  # fast path: every character is representable
    out = []
    for i, ch in enumerate(text):
        if ch == " ":
            out.append(SPACE)
        elif _unrepresentable(ch):
            if strict:
                raise _user_error(f"{where}: character {ch!r} (U+{ord(ch):04X}, column {i + 1}) "
                                  f"cannot be represented in the character vocabulary")
            out.append(UNK)
        else:
            out.append(ch)
    return " ".join(out)


def decode_chars(tokens: str) -> str:
    """Inverse of :func:`encode_chars` (``<unk>`` stays ``<unk>``)."""
    return "".join(" " if t == SPACE else t for t in tokens.split())


def _valid_score(seed: int, question: str) -> float:
    h = hashlib.blake2b(f"{int(seed)}\0{question}".encode("utf-8"), digest_size=8).digest()
    return int.from_bytes(h, "big") / 2.0 ** 64


# --------------------------------------------------------------------------
# main entry
# --------------------------------------------------------------------------


def _fingerprint(selected: Dict[str, Dict[str, str]], seed: int, valid_fraction: float,
                 srcdict=None) -> str:
    items = []
    for split in SPLITS:
        for module, path in sorted(selected.get(split, {}).items()):
            st = os.stat(path)
            items.append([split, module, st.st_size, st.st_mtime_ns])
    blob = {"files": items, "seed": int(seed), "valid_fraction": float(valid_fraction), "format": FORMAT_VERSION}
    if srcdict is not None:   # a given dictionary: its content is part of what the binaries mean
        blob["dict"] = hashlib.sha256(pathlib.Path(srcdict).read_bytes()).hexdigest()
    return hashlib.sha256(json.dumps(blob, sort_keys=True).encode()).hexdigest()


def is_up_to_date(out_dir, raw_dir=None, modules: str = "*", seed: int = 0,
                  valid_fraction: float = 0.05, srcdict=None) -> bool:
    """True when ``OUT/bin`` was built from exactly these raw files and options."""
    out_dir = pathlib.Path(out_dir)
    raw_dir = out_dir / "raw" if raw_dir is None else pathlib.Path(raw_dir)
    try:
        stats = json.loads((out_dir / "bin" / STATS_FILE).read_text())
        selected = select_raw(discover_raw(raw_dir), modules)
    except Exception:
        return False
    return stats.get("fingerprint") == _fingerprint(selected, seed, valid_fraction, srcdict)


class _Writer:
    """Text output of one subset: .src/.tgt (+ .modules)."""

    def __init__(self, tmp_dir: str, subset: str, with_modules: bool):
        self.files = [open(os.path.join(tmp_dir, f"{subset}.{ext}"), "w", encoding="utf-8")
                      for ext in ("src", "tgt")]
        self.modules = open(os.path.join(tmp_dir, f"{subset}.modules"), "w",
                            encoding="utf-8") if with_modules else None
        self.count = 0

    def write(self, src: str, tgt: str, module: str) -> None:
        self.files[0].write(src + "\n")
        self.files[1].write(tgt + "\n")
        if self.modules is not None:
            self.modules.write(module + "\n")
        self.count += 1

    def close(self) -> None:
        for f in self.files + ([self.modules] if self.modules else []):
            f.flush()
            os.fsync(f.fileno())
            f.close()


def _swap_in(tmp: pathlib.Path, final: pathlib.Path) -> None:
    """Replace directory ``final`` by ``tmp`` (old one removed after the rename)."""
    old = None
    if final.exists():
        old = final.with_name(f"{final.name}.old-{os.getpid()}")
        os.replace(final, old)
    os.replace(tmp, final)
    if old is not None:
        shutil.rmtree(old, ignore_errors=True)


def preprocess_math(out_dir, raw_dir=None, modules: str = "*", seed: int = 0,
                    valid_fraction: float = 0.05, workers: int = 1, progress: bool = True,
                    srcdict=None) -> pathlib.Path:
    """Build ``OUT/text`` and ``OUT/bin`` from ``raw_dir`` (default ``OUT/raw``); return ``OUT/bin``.
    ``srcdict``: binarize with this joined dictionary (e.g. the one a trained model indexes)
    instead of building one from train; its missing characters become <unk> and are counted."""
    from tqdm import tqdm

    if not 0.0 < float(valid_fraction) < 1.0:
        raise _user_error(f"--valid-fraction must be in (0, 1), got {valid_fraction}")
    out_dir = pathlib.Path(out_dir)
    raw_dir = out_dir / "raw" if raw_dir is None else pathlib.Path(raw_dir)
    selected = select_raw(discover_raw(raw_dir), modules)
    if not any(selected[s] for s in TRAIN_SPLITS):
        raise _user_error(f"{raw_dir}: no training files for the selected modules ({modules})")
    if not selected["interpolate"]:
        raise _user_error(f"{raw_dir}/interpolate: no test file for the selected modules ({modules})")
    if srcdict is not None and not pathlib.Path(srcdict).is_file():
        raise _user_error(f"--dict {srcdict}: no such file")
    fingerprint = _fingerprint(selected, seed, valid_fraction, srcdict)
    out_dir.mkdir(parents=True, exist_ok=True)
    from nesyseq.common.out_folder import is_stale

    for stale in out_dir.glob("*.tmp-*"):   # an interrupted run's; never a live run's
        if is_stale(stale.name):
            shutil.rmtree(stale, ignore_errors=True)
    text_tmp = out_dir / f"text.tmp-{os.getpid()}"
    bin_tmp = out_dir / f"bin.tmp-{os.getpid()}"
    text_tmp.mkdir()

    n_files = sum(len(v) for v in selected.values())
    bar = tqdm(total=n_files, unit="file", desc="preprocess math", disable=not progress, dynamic_ncols=True)
    stats: dict = {"format": FORMAT_VERSION, "raw_dir": str(raw_dir), "seed": int(seed),
                   "valid_fraction": float(valid_fraction), "fingerprint": fingerprint,
                   "raw": {s: {} for s in SPLITS}, "subsets": {}, "per_module": {}}
    try:
        # 1. test sets (small): write them, remember their questions and provenance.
        test_questions = set()
        test_examples: Dict[str, List[Tuple[str, str, str, str]]] = {}
        for split in TEST_SPLITS:
            subset = SUBSET_OF_SPLIT[split]
            w = _Writer(str(text_tmp), subset, with_modules=True)
            examples = []
            for module, path in sorted(selected[split].items()):
                n = 0
                for q, a, line in iter_module_file(path):
                    where = f"{path}:{line}"
                    w.write(encode_chars(q, where, strict=False), encode_chars(a, f"{path}:{line + 1}",
                                                                              strict=False), module)
                    examples.append((q, a, module, where))
                    test_questions.add(q)
                    n += 1
                stats["raw"][split][module] = n
                bar.update(1)
            w.close()
            test_examples[subset] = examples
            stats["subsets"][subset] = {"examples": w.count, "split": split}

        # 2. train files, pass 1: validate, count, find the valid questions.
        train_files = [(split, module, path) for split in TRAIN_SPLITS
                       for module, path in sorted(selected[split].items())]
        best = (2.0, None)
        any_valid = False
        for split, module, path in train_files:
            n = 0
            for q, a, line in iter_module_file(path):
                encode_chars(q, f"{path}:{line}", strict=True)
                encode_chars(a, f"{path}:{line + 1}", strict=True)
                n += 1
                if q in test_questions:
                    continue
                score = _valid_score(seed, q)
                if score < valid_fraction:
                    any_valid = True
                elif score < best[0]:
                    best = (score, q)
            stats["raw"][split][module] = n
        forced_valid = None if any_valid else best[1]
        if not any_valid and forced_valid is None:
            raise _user_error(f"{raw_dir}: every training question also occurs in the test sets; "
                              f"nothing left to train on")

        # 3. train files, pass 2: write train / valid.
        train_w = _Writer(str(text_tmp), "train", with_modules=False)
        valid_w = _Writer(str(text_tmp), "valid", with_modules=True)
        per_module: Dict[str, Dict[str, int]] = {}
        overlap = 0
        for split, module, path in train_files:
            pm = per_module.setdefault(module, {"train": 0, "valid": 0, "dropped_test_overlap": 0})
            for q, a, line in iter_module_file(path):
                if q in test_questions:
                    pm["dropped_test_overlap"] += 1
                    overlap += 1
                    continue
                src, tgt = encode_chars(q, "", True), encode_chars(a, "", True)
                if _valid_score(seed, q) < valid_fraction or q == forced_valid:
                    valid_w.write(src, tgt, module)
                    pm["valid"] += 1
                else:
                    train_w.write(src, tgt, module)
                    pm["train"] += 1
            bar.update(1)
        train_w.close()
        valid_w.close()
        bar.close()
        if train_w.count == 0:
            raise _user_error(f"{raw_dir}: no training examples left after holding out the valid "
                              f"split (valid_fraction={valid_fraction}); generate more per module")
        stats["subsets"]["train"] = {"examples": train_w.count}
        stats["subsets"]["valid"] = {"examples": valid_w.count}
        stats["dropped_test_overlap"] = overlap
        for split in TEST_SPLITS:
            for module, n in stats["raw"][split].items():
                per_module.setdefault(module, {"train": 0, "valid": 0, "dropped_test_overlap": 0})
                per_module[module][SUBSET_OF_SPLIT[split]] = n
        stats["per_module"] = dict(sorted(per_module.items()))

        # 4. binarize with fairseq-preprocess (joined dictionary from train only).
        test_subsets = [s for s in ("test", "test1") if stats["subsets"][s]["examples"]]
        if "test" not in test_subsets:
            raise _user_error(f"{raw_dir}/interpolate: no test examples for the selected modules")
        fairseq_preprocess(bin_tmp, text_tmp / "train", text_tmp / "valid", [text_tmp / t for t in test_subsets],
                           srcdict=None if srcdict is None else pathlib.Path(srcdict).resolve(),
                           workers=workers if train_w.count > 20_000 else 1)   # our bar, not its INFO lines
        from fairseq.data import Dictionary

        vocab = Dictionary.load(str(bin_tmp / "dict.src.txt"))
        stats["vocab_size"] = len(vocab)
        stats["unk"] = {}
        for subset in ("test", "test1"):
            stats["unk"][subset] = _count_unk(vocab, test_examples[subset])
        stats["unk"]["valid"] = _count_unk_text(vocab, text_tmp / "valid", out_dir / "text" / "valid")
        for subset in ["valid"] + test_subsets:
            shutil.copyfile(text_tmp / f"{subset}.modules", bin_tmp / f"{subset}.modules")
        atomic_write_bytes(str(bin_tmp / STATS_FILE),
                           (json.dumps(stats, indent=1, sort_keys=True) + "\n").encode())
        for subset in ("test", "test1", "valid"):
            u = stats["unk"][subset]
            if subset == "test1" and "test1" not in test_subsets:
                print("nesyseq: warning: no extrapolate module belongs to the selected modules; "
                      "bin/ has no test1 subset", file=sys.stderr)
            if u["chars"]:
                print(f"nesyseq: warning: {subset}: {u['chars']} character(s) in {u['examples']} "
                      f"example(s) are not in the training vocabulary and map to <unk> "
                      f"(first: {u['first']})", file=sys.stderr)
        _swap_in(text_tmp, out_dir / "text")
        _swap_in(bin_tmp, out_dir / "bin")
    except BaseException:
        bar.close()
        shutil.rmtree(text_tmp, ignore_errors=True)
        shutil.rmtree(bin_tmp, ignore_errors=True)
        raise
    return out_dir / "bin"


def _count_unk(vocab, examples) -> dict:
    """Characters of (question, answer) pairs outside ``vocab``: count and first location."""
    chars = examples_hit = 0
    first = None
    by_module: Dict[str, int] = {}
    known = {s for i, s in enumerate(vocab.symbols) if i >= vocab.nspecial and len(s) == 1 and s != SPACE}
    if SPACE in vocab.indices:
        known.add(" ")
    for q, a, module, where in examples:
        if set(q) <= known and set(a) <= known:
            continue
        hit = 0
        for side, text in (("question", q), ("answer", a)):
            for i, ch in enumerate(text):
                if ch not in known:
                    hit += 1
                    if first is None:
                        path, line = where.rsplit(":", 1)
                        line = int(line) + (side == "answer")
                        first = f"{path}:{line}: {side} character {ch!r} (U+{ord(ch):04X}, column {i + 1})"
        if hit:
            chars += hit
            examples_hit += 1
            by_module[module] = by_module.get(module, 0) + hit
    return {"chars": chars, "examples": examples_hit, "first": first, "by_module": by_module}


def _count_unk_text(vocab, prefix: pathlib.Path, shown: pathlib.Path) -> dict:
    """Like :func:`_count_unk` for an already tokenized subset (valid)."""
    chars = examples_hit = 0
    first = None
    for ext in ("src", "tgt"):
        path = f"{prefix}.{ext}"
        with open(path, encoding="utf-8") as f:
            for n, line in enumerate(f, start=1):
                hit = sum(1 for t in line.split() if vocab.index(t) == vocab.unk())
                if hit:
                    chars += hit
                    examples_hit += 1
                    if first is None:
                        first = f"{shown}.{ext}:{n}"
    return {"chars": chars, "examples": examples_hit, "first": first}
