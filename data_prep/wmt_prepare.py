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
sample (``--spm-sample`` sentences).  All output is built in ``OUT.tmp-<pid>`` and
renamed into place only when every step succeeded: bad input leaves no partial OUT.
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
import subprocess
import sys
import time
from pathlib import Path
from typing import Iterator, List, Optional, Tuple

from nesyseq.common.atomic import atomic_write_bytes
from nesyseq.common.errors import UserError
from nesyseq.common.fairseq_cli import fairseq_bin, small_cpu_env

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


def read_pairs(src: Path, tgt: Path) -> Iterator[Tuple[str, str]]:
    """Zip two files line by line; different line counts are an error naming both."""
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
        yield a[1], b[1]


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
    cmd = [fairseq_bin("fairseq-preprocess"), "--source-lang", src, "--target-lang", tgt,
           "--joined-dictionary", "--destdir", str(dest), "--workers", str(workers),
           "--dataset-impl", "mmap"]
    for split in splits:
        cmd += [f"--{split}pref", str(spm_dir / split)]
    proc = subprocess.run(cmd, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
                          env=small_cpu_env(True))
    if proc.returncode != 0:
        tail = "\n".join(proc.stdout.strip().splitlines()[-3:])
        raise UserError(f"fairseq-preprocess failed for {dest}:\n{tail}")


# ---------------------------------------------------------------- driver
def _progress(total: Optional[int], desc: str, enabled: bool):
    if not enabled:
        return None
    from tqdm import tqdm
    return tqdm(total=total, desc=desc, unit=" lines", file=sys.stderr, mininterval=1.0)


def prepare_wmt(src: str, tgt: str, train: List[str], valid: str, test: str, out: str,
                bpe_size: int = 32000, coverage: float = 1.0, workers: int = 1,
                moses_norm: bool = False, max_ratio: float = 3.0, max_len: int = 250,
                dedup: bool = False, spm_sample: int = 1_000_000, seed: int = 1,
                progress: bool = True, keep_ref: bool = True) -> dict:
    """Run the five steps; returns the prepare.json record.  See the module docstring."""
    if src == tgt:
        raise UserError(f"--src-lang and --tgt-lang are both {src!r}")
    if workers < 1:
        raise UserError(f"--workers must be >= 1, got {workers}")
    splits = {"train": list(train), "valid": [valid], "test": [test]}
    files = {k: [(resolve(p, src), resolve(p, tgt)) for p in v] for k, v in splits.items()}
    for pairs in files.values():  # unreadable files fail before any work
        for pair in pairs:
            for p in pair:
                if not os.access(p, os.R_OK):
                    raise UserError(f"{p}: cannot read (permission denied)")
    out_dir = Path(out).resolve()
    tmp = out_dir.parent / f"{out_dir.name}.tmp-{os.getpid()}"
    shutil.rmtree(tmp, ignore_errors=True)
    (tmp / "raw").mkdir(parents=True)
    (tmp / "spm").mkdir()
    t0 = time.time()
    record = {"src_lang": src, "tgt_lang": tgt, "bpe_size": bpe_size, "character_coverage": coverage,
              "moses_norm": moses_norm, "max_ratio": max_ratio, "max_len": max_len, "dedup": dedup,
              "spm_sample": spm_sample, "seed": seed,
              "inputs": {k: [[str(a), str(b)] for a, b in v] for k, v in files.items()},
              "counts": {}}
    try:
        norm_s, norm_t = Normalizer(src, moses_norm), Normalizer(tgt, moses_norm)
        for split, pairs in files.items():
            counts = Counts()
            bar = _progress(None, f"clean {split}", progress)

            def stream():
                for a, b in pairs:
                    yield from read_pairs(a, b)
            kept = clean_split(stream(), tmp / "raw" / f"{split}.{src}", tmp / "raw" / f"{split}.{tgt}",
                               norm_s, norm_t, split == "train", max_ratio, max_len, dedup, counts, bar)
            if bar is not None:
                bar.close()
            if kept == 0:
                names = ", ".join(str(a) for a, _ in pairs)
                raise UserError(f"{names}: the {split} split is empty"
                                + (" after cleaning" if counts.get("read") else ""))
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
        if out_dir.exists():
            old = out_dir.parent / f"{out_dir.name}.old-{os.getpid()}"
            os.replace(out_dir, old)
            os.replace(tmp, out_dir)
            shutil.rmtree(old)
        else:
            os.replace(tmp, out_dir)
    except BaseException:
        shutil.rmtree(tmp, ignore_errors=True)
        raise
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
    parser.add_argument("--out", required=True, help="output directory (fairseq data dir)")
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
    for name in ("bpe_size", "spm_sample"):
        if getattr(args, name) < 1:
            raise UserError(f"--{name.replace('_', '-')} must be >= 1")
    record = prepare_wmt(args.src_lang, args.tgt_lang, args.train, args.valid, args.test, args.out,
                         bpe_size=args.bpe_size, coverage=args.character_coverage,
                         workers=args.workers, moses_norm=args.moses_norm, max_ratio=args.max_ratio,
                         max_len=args.max_len, dedup=args.dedup, spm_sample=args.spm_sample,
                         seed=args.seed, progress=not args.no_progress)
    print(summary(record))
    print(f"wrote {args.out} ({record['seconds']} s)")
    return 0
