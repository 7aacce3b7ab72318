"""``nesyseq prepare wmt``: raw parallel text -> SentencePiece -> fairseq binaries.

    PREFIX.en / PREFIX.de (or .gz), one sentence per line, several train prefixes
      1. normalise     whitespace, optional Moses punctuation normalisation (sacremoses)
      2. clean         (train only) drop empty pairs, length ratio > --max-ratio, optional dedup
      3. spm_train     one joint BPE model on both sides of the cleaned train text
      4. encode        pieces, with --workers processes, in input order
      5. fairseq-preprocess --joined-dictionary
    OUT/  dict.*.txt, {train,valid,test}.en-de.*.{bin,idx}  (what fairseq-train reads)
          spm.model, spm.vocab, raw/{split}.{lang} (normalised text), ref/test.{lang}
          (the untouched references that ``nesyseq evaluate wmt`` scores against),
          prepare.json (options and counts kept / dropped)

Every file is streamed: memory does not grow with the corpus, except for the
optional de-duplication (8 bytes per distinct pair) and SentencePiece's training
sample (``--spm-sample`` sentences).

OUT is the user's folder as much as ours.  It must be new, empty, or made by an earlier
``prepare wmt`` (``OUT/.nesyseq-prepare-wmt.json``, the marker, lists the files that run
wrote); any other non-empty folder, a regular file, or an input file where an output goes is
refused before any work (``--overwrite`` writes into a non-empty folder anyway).  All output is
built in ``OUT/.prepare-wmt.tmp-<pid>`` and moved into place only when every step succeeded:
bad input leaves OUT as it was.  The move replaces only prepare wmt's own files (the marker's
list and this run's); everything else in OUT stays.  The marker says ``complete: false`` while
the files are moved, ``true`` after.  ``OUT/.nesyseq.lock`` keeps a second run out.

A line with a control character that normalisation would not turn into a space (NUL, ESC,
DEL, ...) is an error naming its file:line in valid and test (they are kept whole); in train its
pair is dropped, counted (``dropped_control``) and the first one's file:line printed.
"""
from __future__ import annotations

import argparse
import gzip
import hashlib
import io
import json
import multiprocessing as mp
import os
import re
import shutil
import sys
import time
from pathlib import Path
from typing import Iterator, List, Optional, Tuple

from nesyseq.data_prep.fairseq_binarize import fairseq_preprocess
from nesyseq.common.atomic import atomic_write_bytes
from nesyseq.common.errors import UserError

_WS = re.compile(r"\s+")


# ---------------------------------------------------------------- input files
def resolve(prefix: str, lang: str) -> Path:
    """``PREFIX.lang`` or ``PREFIX.lang.gz``; a clear error naming both if neither exists."""
    plain, gz = Path(f"{prefix}.{lang}"), Path(f"{prefix}.{lang}.gz")
    if plain.is_file():
        return plain
    if gz.is_file():
        return gz
    raise UserError(f"{plain}: no such file (nor {gz.name})")


def open_text(path: Path):
    try:
        raw = gzip.open(path, "rb") if path.suffix == ".gz" else open(path, "rb")
    except OSError as exc:
        raise UserError(f"{path}: cannot read ({exc.strerror or exc})") from None
    return io.TextIOWrapper(raw, encoding="utf-8", newline="\n")


def read_lines(path: Path) -> Iterator[Tuple[int, str]]:
    """(line number, text without the newline); decode errors name the file and line."""
    n = 0
    try:
        with open_text(path) as f:
            for n, line in enumerate(f, 1):
                yield n, line.rstrip("\n").rstrip("\r")
    except UnicodeDecodeError:
        raise UserError(f"{path}:{n + 1}: not valid UTF-8") from None
    except (OSError, EOFError) as exc:
        raise UserError(f"{path}:{n + 1}: cannot read ({exc})") from None


# control characters that normalisation does not turn into spaces (NUL, ESC, DEL, C1 ...): in a
# dictionary they become tokens no one can see, so they are never passed on silently
_CONTROL = re.compile("[\x00-\x08\x0e-\x1b\x7f-\x84\x86-\x9f]")


def control_character(text: str) -> Optional[str]:
    """``'U+0000 at column 5'`` for the first control character of ``text``, else None."""
    m = _CONTROL.search(text)
    return None if m is None else f"U+{ord(m.group()):04X} at column {m.start() + 1}"


def read_pairs(src: Path, tgt: Path, drop_control: bool = False, counts=None) -> Iterator[Tuple[str, str]]:
    """Zip two files line by line; different line counts are an error naming both.  A line with
    a control character (:func:`control_character`) is an error naming its file:line, or with
    ``drop_control`` (train) its pair is dropped, counted in ``counts["dropped_control"]`` and the
    first one's file:line kept in ``counts.first_control``."""
    it_s, it_t = read_lines(src), read_lines(tgt)
    n = 0
    while True:
        a, b = next(it_s, None), next(it_t, None)
        if a is None and b is None:
            return
        if a is None or b is None:
            longer, shorter = (tgt, src) if a is None else (src, tgt)
            rest = sum(1 for _ in (it_t if a is None else it_s)) + 1
            raise UserError(f"{shorter}: {n} lines but {longer} has {n + rest}: "
                            "source and target must have the same number of lines")
        n += 1
        for path, (lineno, text) in ((src, a), (tgt, b)):
            bad = control_character(text)
            if bad is None:
                continue
            if not drop_control:
                raise UserError(f"{path}:{lineno}: control character {bad} (a NUL byte or another invisible "
                                "character); clean the file (valid and test lines are kept whole)")
            if counts is not None:
                if not counts.get("dropped_control"):
                    counts.first_control = f"{path}:{lineno}: {bad}"
                counts.add("dropped_control")
            break
        else:
            yield a[1], b[1]
            continue
        if counts is not None:
            counts.add("read")


# ---------------------------------------------------------------- steps 1-2
class Normalizer:
    def __init__(self, lang: str, moses: bool):
        self.moses = None
        if moses:
            from sacremoses import MosesPunctNormalizer
            self.moses = MosesPunctNormalizer(lang=lang)

    def __call__(self, text: str) -> str:
        if self.moses is not None:
            text = self.moses.normalize(text)
        return _WS.sub(" ", text).strip()


def length_ratio(a: str, b: str) -> float:
    """max/min of the whitespace word counts (characters for single-word lines)."""
    la, lb = len(a.split()), len(b.split())
    if la <= 1 and lb <= 1:
        la, lb = len(a), len(b)
    return max(la, lb) / max(1, min(la, lb))


class Counts(dict):
    first_control = None   # file:line of the first pair dropped for a control character

    def add(self, key, n=1):
        self[key] = self.get(key, 0) + n


def clean_split(pairs, out_src: Path, out_tgt: Path, norm_s: Normalizer, norm_t: Normalizer,
                train: bool, max_ratio: float, max_len: int, dedup: bool, counts: Counts,
                progress=None) -> int:
    seen = set()
    kept = 0
    with open(out_src, "w", encoding="utf-8") as fs, open(out_tgt, "w", encoding="utf-8") as ft:
        for a, b in pairs:
            counts.add("read")
            if progress is not None:
                progress.update(1)
            a, b = norm_s(a), norm_t(b)
            if train:
                if not a or not b:
                    counts.add("dropped_empty")
                    continue
                if max_ratio > 0 and length_ratio(a, b) > max_ratio:
                    counts.add("dropped_ratio")
                    continue
                if max_len > 0 and max(len(a.split()), len(b.split())) > max_len:
                    counts.add("dropped_length")
                    continue
                if dedup:
                    h = hashlib.blake2b(f"{a}\t{b}".encode(), digest_size=8).digest()
                    if h in seen:
                        counts.add("dropped_duplicate")
                        continue
                    seen.add(h)
            fs.write(a + "\n")
            ft.write(b + "\n")
            kept += 1
    counts.add("kept", kept)
    return kept


# ---------------------------------------------------------------- steps 3-4
def train_spm(inputs: List[Path], model_prefix: Path, vocab_size: int, coverage: float,
              sample: int, seed: int, threads: int) -> None:
    import sentencepiece as spm
    spm.set_random_generator_seed(seed)
    try:
        spm.SentencePieceTrainer.train(
            input=[str(p) for p in inputs], model_prefix=str(model_prefix),
            vocab_size=vocab_size, model_type="bpe", character_coverage=coverage,
            input_sentence_size=sample, shuffle_input_sentence=True,
            num_threads=threads, bos_id=-1, eos_id=-1, pad_id=-1, unk_id=0,
            hard_vocab_limit=False, minloglevel=2)
    except (RuntimeError, OSError) as exc:
        raise UserError(f"spm_train on {inputs[0]}: {str(exc).splitlines()[0]} "
                        "(try a smaller --bpe-size)") from None


_SP = None


def _init_worker(model_file: str):
    global _SP
    import sentencepiece as spm
    _SP = spm.SentencePieceProcessor(model_file=model_file)


def _encode_chunk(lines: List[str]) -> str:
    return "".join(" ".join(p) + "\n" for p in _SP.encode(lines, out_type=str))


def _chunks(path: Path, size: int) -> Iterator[List[str]]:
    buf = []
    with open(path, encoding="utf-8") as f:
        for line in f:
            buf.append(line.rstrip("\n"))
            if len(buf) == size:
                yield buf
                buf = []
    if buf:
        yield buf


def encode_files(jobs: List[Tuple[Path, Path]], model: Path, workers: int, chunk: int = 2000,
                 progress=None) -> None:
    """Encode each (input, output) in order; workers > 1 uses a process pool (imap keeps order)."""
    pool = None
    if workers > 1:
        pool = mp.get_context("fork" if sys.platform != "win32" else "spawn").Pool(
            workers, initializer=_init_worker, initargs=(str(model),))
    else:
        _init_worker(str(model))
    try:
        for src, dst in jobs:
            with open(dst, "w", encoding="utf-8") as out:
                chunks = _chunks(src, chunk)
                it = pool.imap(_encode_chunk, chunks, chunksize=1) if pool else map(_encode_chunk, chunks)
                for text in it:
                    out.write(text)
                    if progress is not None:
                        progress.update(text.count("\n"))
    finally:
        if pool is not None:
            pool.close()
            pool.join()


# ---------------------------------------------------------------- step 5
def binarize(src: str, tgt: str, spm_dir: Path, dest: Path, workers: int, splits: List[str]) -> None:
    fairseq_preprocess(dest, spm_dir / "train", spm_dir / "valid" if "valid" in splits else None,
                       [spm_dir / "test"] if "test" in splits else [], source_lang=src, target_lang=tgt,
                       workers=workers)


# ---------------------------------------------------------------- driver
def _progress(total: Optional[int], desc: str, enabled: bool):
    if not enabled:
        return None
    from tqdm import tqdm
    return tqdm(total=total, desc=desc, unit=" lines", file=sys.stderr, mininterval=1.0)


MARKER = ".nesyseq-prepare-wmt.json"   # "made by nesyseq prepare wmt", and which of OUT's files are its own
_TMP = ".prepare-wmt.tmp-"
_OLD = ".prepare-wmt.old-"


def _own_files(out_dir: Path) -> Optional[List[str]]:
    """The names in ``out_dir`` that an earlier ``prepare wmt`` wrote (its marker's list), or None
    when ``out_dir`` has no marker."""
    try:
        record = json.loads((out_dir / MARKER).read_text())
        return [str(n) for n in record["files"]]
    except FileNotFoundError:
        return None
    except (OSError, ValueError, KeyError, TypeError) as exc:
        raise UserError(f"{out_dir / MARKER}: unreadable ({exc}); remove it, or give another --out") from None


def _ours(name: str) -> bool:
    """The lock, and temporaries of runs that are gone: never a reason to call a folder the user's."""
    from nesyseq.common.out_folder import LOCK_NAME, is_stale

    return name == LOCK_NAME or (name.startswith((_TMP, _OLD)) and is_stale(name))


def _output_names(src: str, tgt: str) -> List[str]:
    """What prepare wmt writes at the top of OUT."""
    names = [f"dict.{src}.txt", f"dict.{tgt}.txt", "spm.model", "spm.vocab", "prepare.json", "preprocess.log",
             "raw", "ref", MARKER]
    for split in ("train", "valid", "test"):
        for lang in (src, tgt):
            names += [f"{split}.{src}-{tgt}.{lang}.bin", f"{split}.{src}-{tgt}.{lang}.idx"]
    return names


def check_out(out: str, src: str, tgt: str, inputs: List[Path], overwrite: bool) -> Path:
    """``--out`` before any work: a folder (not a file) that is new, empty, made by an earlier
    ``prepare wmt`` (its marker), or given with ``--overwrite``; and no input file is one of the
    outputs it would replace."""
    from nesyseq.common.out_folder import check_out_path

    check_out_path(out)
    out_dir = Path(out).resolve()
    own = _own_files(out_dir) if out_dir.is_dir() else None
    if out_dir.is_dir() and own is None and not overwrite:
        foreign = sorted(p.name for p in out_dir.iterdir() if not _ours(p.name))
        if foreign:
            raise UserError(f"--out {out}: a non-empty folder that `nesyseq prepare wmt` did not make (no {MARKER}; "
                            f"it holds {', '.join(foreign[:3])}{' ...' if len(foreign) > 3 else ''}); give a new or "
                            f"empty folder, or --overwrite to write into it (what else it holds is kept)")
    replaced = set(_output_names(src, tgt)) | set(own or ())
    for path in inputs:
        real = path.resolve()
        try:
            top = real.relative_to(out_dir).parts[0]
        except ValueError:
            continue
        if top in replaced:
            raise UserError(f"{path}: an input inside --out {out}, where prepare wmt writes {top}; move the "
                            "corpus, or give another --out")
    return out_dir


def _swap_in(tmp: Path, out_dir: Path) -> None:
    """Move every entry of ``tmp`` into ``out_dir``, replacing only prepare wmt's own files there
    (those its marker lists and those this run writes); everything else in ``out_dir`` stays.  The
    marker first says the swap is under way (with every name involved), and last that it is done."""
    from nesyseq.common.atomic import atomic_write_text

    new = sorted(p.name for p in tmp.iterdir() if p.name != MARKER)
    old_names = [n for n in (_own_files(out_dir) or []) if n != MARKER]
    involved = sorted(set(new) | set(old_names))
    atomic_write_text(out_dir / MARKER, json.dumps({"made_by": "nesyseq prepare wmt", "complete": False,
                                                    "files": involved}, indent=1) + "\n")
    old = out_dir / f"{_OLD}{os.getpid()}"
    old.mkdir()
    for name in involved:
        if os.path.lexists(out_dir / name):
            os.replace(out_dir / name, old / name)
    for name in new:
        os.replace(tmp / name, out_dir / name)
    atomic_write_text(out_dir / MARKER, json.dumps({"made_by": "nesyseq prepare wmt", "complete": True,
                                                    "files": new}, indent=1) + "\n")
    shutil.rmtree(old)
    shutil.rmtree(tmp)


def prepare_wmt(src: str, tgt: str, train: List[str], valid: str, test: str, out: str,
                bpe_size: int = 32000, coverage: float = 1.0, workers: int = 1,
                moses_norm: bool = False, max_ratio: float = 3.0, max_len: int = 250,
                dedup: bool = False, spm_sample: int = 1_000_000, seed: int = 1,
                progress: bool = True, keep_ref: bool = True, overwrite: bool = False) -> dict:
    """Run the five steps; returns the prepare.json record.  See the module docstring."""
    from nesyseq.common.out_folder import FolderLock

    if src == tgt:
        raise UserError(f"--src-lang and --tgt-lang are both {src!r}")
    if workers < 1:
        raise UserError(f"--workers must be >= 1, got {workers}")
    for name, value in (("--bpe-size", bpe_size), ("--spm-sample", spm_sample)):
        if value < 1:
            raise UserError(f"{name} must be >= 1, got {value}")
    if not 0.0 < coverage <= 1.0:
        raise UserError(f"--character-coverage must be in (0, 1], got {coverage}")
    if max_ratio < 0 or max_len < 0:
        raise UserError(f"--max-ratio and --max-len must be >= 0 (0: keep all), got {max_ratio} and {max_len}")
    splits = {"train": list(train), "valid": [valid], "test": [test]}
    files = {k: [(resolve(p, src), resolve(p, tgt)) for p in v] for k, v in splits.items()}
    for pairs in files.values():  # unreadable files fail before any work
        for pair in pairs:
            for p in pair:
                if not os.access(p, os.R_OK):
                    raise UserError(f"{p}: cannot read (permission denied)")
    out_dir = check_out(out, src, tgt, [p for pairs in files.values() for pair in pairs for p in pair], overwrite)
    with FolderLock(out_dir, "nesyseq prepare wmt"):
        for leftover in out_dir.iterdir():   # temporaries of runs killed before they finished
            if leftover.name.startswith((_TMP, _OLD)) and _ours(leftover.name):
                shutil.rmtree(leftover, ignore_errors=True)
        tmp = out_dir / f"{_TMP}{os.getpid()}"
        shutil.rmtree(tmp, ignore_errors=True)
        (tmp / "raw").mkdir(parents=True)
        (tmp / "spm").mkdir()
        try:
            record = _build(src, tgt, files, tmp, bpe_size, coverage, workers, moses_norm, max_ratio, max_len,
                            dedup, spm_sample, seed, progress, keep_ref)
            _swap_in(tmp, out_dir)
        except BaseException:
            shutil.rmtree(tmp, ignore_errors=True)
            raise
    return record


def _build(src, tgt, files, tmp: Path, bpe_size, coverage, workers, moses_norm, max_ratio, max_len, dedup,
           spm_sample, seed, progress, keep_ref) -> dict:
    """Every output of prepare wmt, written into ``tmp``."""
    t0 = time.time()
    record = {"src_lang": src, "tgt_lang": tgt, "bpe_size": bpe_size, "character_coverage": coverage,
              "moses_norm": moses_norm, "max_ratio": max_ratio, "max_len": max_len, "dedup": dedup,
              "spm_sample": spm_sample, "seed": seed,
              "inputs": {k: [[str(a), str(b)] for a, b in v] for k, v in files.items()},
              "counts": {}}
    norm_s, norm_t = Normalizer(src, moses_norm), Normalizer(tgt, moses_norm)
    for split, pairs in files.items():
        counts = Counts()
        bar = _progress(None, f"clean {split}", progress)

        def stream():
            for a, b in pairs:
                yield from read_pairs(a, b, drop_control=split == "train", counts=counts)
        kept = clean_split(stream(), tmp / "raw" / f"{split}.{src}", tmp / "raw" / f"{split}.{tgt}",
                           norm_s, norm_t, split == "train", max_ratio, max_len, dedup, counts, bar)
        if bar is not None:
            bar.close()
        if kept == 0:
            names = ", ".join(str(a) for a, _ in pairs)
            raise UserError(f"{names}: the {split} split is empty"
                            + (" after cleaning" if counts.get("read") else ""))
        if counts.get("dropped_control"):
            print(f"nesyseq: warning: {split}: dropped {counts['dropped_control']} pair(s) with control "
                  f"characters (first: {counts.first_control})", file=sys.stderr)
        record["counts"][split] = dict(counts)
        if split == "test" and keep_ref:  # untouched references for sacrebleu
            (tmp / "ref").mkdir(exist_ok=True)
            for lang, path in ((src, pairs[0][0]), (tgt, pairs[0][1])):
                with open(tmp / "ref" / f"test.{lang}", "w", encoding="utf-8") as f:
                    for _, line in read_lines(path):
                        f.write(line + "\n")
    train_spm([tmp / "raw" / f"train.{src}", tmp / "raw" / f"train.{tgt}"], tmp / "spm",
              bpe_size, coverage, spm_sample, seed, workers)
    jobs = [(tmp / "raw" / f"{s}.{lang}", tmp / "spm" / f"{s}.{lang}")
            for s in files for lang in (src, tgt)]
    total = sum(record["counts"][s]["kept"] for s in files) * 2
    bar = _progress(total, "encode", progress)
    encode_files(jobs, tmp / "spm.model", workers, progress=bar)
    if bar is not None:
        bar.close()
    binarize(src, tgt, tmp / "spm", tmp, workers, list(files))
    shutil.rmtree(tmp / "spm")
    record["seconds"] = round(time.time() - t0, 2)
    atomic_write_bytes(str(tmp / "prepare.json"), (json.dumps(record, indent=2) + "\n").encode())
    return record


def summary(record: dict) -> str:
    lines = []
    for split, c in record["counts"].items():
        dropped = {k[len("dropped_"):]: v for k, v in c.items() if k.startswith("dropped_")}
        extra = ", ".join(f"{k} {v}" for k, v in sorted(dropped.items())) or "none"
        lines.append(f"{split:5s}: read {c.get('read', 0)}, kept {c.get('kept', 0)}, dropped: {extra}")
    return "\n".join(lines)


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--src-lang", default="en", help="source language suffix of the files")
    parser.add_argument("--tgt-lang", default="de", help="target language suffix of the files")
    parser.add_argument("--train", nargs="+", required=True, metavar="PREFIX",
                        help="train prefixes (PREFIX.en/PREFIX.de, or .gz); concatenated")
    parser.add_argument("--valid", required=True, metavar="PREFIX", help="validation prefix (kept whole)")
    parser.add_argument("--test", required=True, metavar="PREFIX", help="test prefix (kept whole; its files are the references)")
    parser.add_argument("--out", required=True, help="output directory (fairseq data dir): new, empty, or made by "
                                                      "an earlier prepare wmt (its files replaced, nothing else)")
    parser.add_argument("--overwrite", action="store_true",
                        help="write into a non-empty --out that prepare wmt did not make: the files and folders "
                             "it writes replace any of the same name there, everything else is kept")
    parser.add_argument("--bpe-size", type=int, default=32000, help="joint SentencePiece vocabulary")
    parser.add_argument("--character-coverage", type=float, default=1.0, help="SentencePiece character coverage")
    parser.add_argument("--workers", type=int, default=1, help="processes for encoding, spm_train and fairseq-preprocess")
    parser.add_argument("--moses-norm", action="store_true",
                        help="Moses punctuation normalisation (sacremoses) before everything")
    parser.add_argument("--max-ratio", type=float, default=3.0,
                        help="drop train pairs whose word-length ratio exceeds this (0: keep all)")
    parser.add_argument("--max-len", type=int, default=250,
                        help="drop train pairs longer than this many words (0: keep all)")
    parser.add_argument("--dedup", action="store_true", help="drop repeated train pairs")
    parser.add_argument("--spm-sample", type=int, default=1_000_000,
                        help="sentences SentencePiece trains on (a seeded random sample)")
    parser.add_argument("--seed", type=int, default=1, help="seed of the SentencePiece sample")
    parser.add_argument("--no-progress", action="store_true", help="no progress bars")


def run(args) -> int:
    record = prepare_wmt(args.src_lang, args.tgt_lang, args.train, args.valid, args.test, args.out,
                         bpe_size=args.bpe_size, coverage=args.character_coverage,
                         workers=args.workers, moses_norm=args.moses_norm, max_ratio=args.max_ratio,
                         max_len=args.max_len, dedup=args.dedup, spm_sample=args.spm_sample,
                         seed=args.seed, progress=not args.no_progress, overwrite=args.overwrite)
    print(summary(record))
    print(f"wrote {args.out} ({record['seconds']} s)")
    return 0
