"""bAbI / bAbI-style files -> text pairs -> fairseq binaries (see :mod:`data_prep.qa_cli`)."""
from __future__ import annotations

import json
import os
import pathlib
import random
import shutil
from collections import Counter
from typing import Dict, List, Optional

from nesyseq.data_prep.fairseq_binarize import fairseq_preprocess
from nesyseq.data_prep.qa_babi import MAX_POSITIONS, QAExample, parse_babi_lines, read_babi_lines
from nesyseq.common.atomic import atomic_write_bytes
from nesyseq.data_prep.qa_word_classes import format_classes, word_classes
from nesyseq.common.errors import UserError


def _valid_split(examples: List[QAExample], fraction: float, seed: int, task) -> tuple:
    if not 0 <= fraction < 1:
        raise UserError(f"--valid-fraction must be in [0, 1), got {fraction}")
    order = list(range(len(examples)))
    random.Random(f"{seed}|valid|{task}").shuffle(order)
    n_valid = max(1, int(round(fraction * len(examples)))) if fraction > 0 else 0
    held = set(order[:n_valid])
    return ([e for i, e in enumerate(examples) if i not in held],
            [e for i, e in enumerate(examples) if i in held])


def write_text(examples: List[QAExample], prefix: pathlib.Path) -> None:
    src = "".join(" ".join(e.source_tokens()) + "\n" for e in examples)
    tgt = "".join(e.answer + "\n" for e in examples)
    atomic_write_bytes(str(prefix) + ".src", src.encode())
    atomic_write_bytes(str(prefix) + ".tgt", tgt.encode())


def _dictionary(splits: Dict[str, List[QAExample]], path: pathlib.Path) -> List[str]:
    """fairseq dict over all splits (train counts first); returns words absent from train."""
    counts = {name: Counter() for name in splits}
    for name, exs in splits.items():
        for e in exs:
            counts[name].update(e.source_tokens())
            counts[name][e.answer] += 1
    train = counts["train"]
    every = Counter()
    for c in counts.values():
        every.update(c)
    words = sorted(every, key=lambda w: (-train[w], -every[w], w))
    atomic_write_bytes(str(path), "".join(f"{w} {max(1, train[w])}\n" for w in words).encode())
    return sorted(w for w in every if train[w] == 0)


def _binarize(text_dir: pathlib.Path, dest: pathlib.Path, dict_path: pathlib.Path,
              extra_tests: List[str] = ()) -> None:
    """fairseq-preprocess train/valid/test plus ``extra_tests`` (e.g. test_rooms), which
    fairseq writes as test1, test2, ... and we rename to their own subset names."""
    fairseq_preprocess(dest, text_dir / "train", text_dir / "valid", [text_dir / t for t in ["test", *extra_tests]],
                       srcdict=dict_path)
    for k, name in enumerate(extra_tests, start=1):
        for f in dest.glob(f"test{k}.*"):
            os.replace(f, dest / (name + f.name[len(f"test{k}"):]))


def prepare_qa(out, source: Optional[str] = None, generate: bool = False, tasks: Optional[str] = None,
               memory_size: int = 50, valid_fraction: float = 0.1, seed: int = 0, num_names: int = 4,
               zero_shot: Optional[str] = None, k: int = 10, train_stories: int = 200,
               test_stories: int = 200, binarize: bool = True, train_file: Optional[str] = None,
               valid_file: Optional[str] = None, test_file: Optional[str] = None,
               babi_set: str = "en-10k", max_positions: int = MAX_POSITIONS,
               people_per_story: Optional[int] = None, questions_per_story: int = 5,
               wording: str = "ours") -> List[str]:
    """Prepare every selected task; returns the ``bin/task{N}`` directories.  Every option is
    checked before any work; a bAbI line longer than ``max_positions`` tokens is refused."""
    from nesyseq.common.out_folder import check_out_path

    check_out_path(out)
    out = pathlib.Path(out)
    if not 0 <= valid_fraction < 1:
        raise UserError(f"--valid-fraction must be in [0, 1), got {valid_fraction}")
    if memory_size < 1:
        raise UserError(f"--memory-size must be >= 1, got {memory_size}")
    if max_positions < 2:
        raise UserError(f"--max-positions must be >= 2, got {max_positions}")
    if generate and (train_stories < 1 or test_stories < 1):
        raise UserError(f"--train-stories and --test-stories must be >= 1, got {train_stories} and {test_stories}")
    if sum(map(bool, (source, generate, train_file))) != 1:
        raise UserError("give exactly one of --source DIR, --generate and --train FILE")
    if (valid_file or test_file) and not train_file:
        raise UserError("--test / --valid FILE go with --train FILE (--source DIR finds its own files)")
    wanted = None if tasks is None else [t.strip().lower() for t in tasks.split(",") if t.strip()]
    meta = {"seed": seed, "memory_size": memory_size, "valid_fraction": valid_fraction}
    origin: Dict[str, str] = {}   # a raw/ copy -> the file it was copied from: reading errors name that one
    contents: Dict[str, bytes] = {}   # a raw/ copy -> its bytes, written once every file has parsed
    if generate:
        from nesyseq.data_prep.qa_generate import generate_task

        wanted = wanted or ["1"]
        raw = out / "raw"
        raw.mkdir(parents=True, exist_ok=True)
        files = {}
        for t in wanted:
            data = generate_task(t, n_train=train_stories, n_test=test_stories, num_names=num_names,
                                 zero_shot=zero_shot, k=k, seed=seed, people_per_story=people_per_story,
                                 questions_per_story=questions_per_story, wording=wording)
            files[t] = {}
            for split, text in data.items():
                p = raw / f"qa{t}_{split}.txt"
                atomic_write_bytes(str(p), text.encode())
                files[t][split] = str(p)
        meta.update({"source": "bAbI-style generator (nesyseq data_prep/qa_generate.py)",
                     "num_names": num_names, "zero_shot": zero_shot, "k": k,
                     "train_stories": train_stories, "test_stories": test_stories,
                     "people_per_story": people_per_story, "questions_per_story": questions_per_story,
                     "wording": wording})
    elif train_file:
        if not test_file:
            raise UserError("--train FILE needs --test FILE")
        if not wanted or len(wanted) != 1 or not wanted[0].isdigit() or int(wanted[0]) < 1:
            raise UserError("--train FILE: name the task with --tasks N (one positive number, e.g. the "
                            f"bAbI task's; got {tasks!r}); the output is bin/taskN")
        wanted = [str(int(wanted[0]))]          # 02 -> 2: the folder and held-out split of --source
        named = {"train": train_file, "test": test_file, **({"valid": valid_file} if valid_file else {})}
        for split, path in named.items():
            if not os.path.isfile(path):
                raise UserError(f"--{split} {path}: no such file")
        files = {wanted[0]: named}
        meta["source"] = "bAbI-format files " + ", ".join(f"{k}={os.path.abspath(v)}" for k, v in named.items())
    else:
        from nesyseq.data_prep.qa_source import babi_files, md5_check

        # only the requested tasks are read: the folder may hold just them (data_prep/qa_source.py)
        found = babi_files(source, wanted, babi_set)
        raw = out / "raw"
        files, checked = {}, {}
        for t, splits in found.items():
            files[str(t)] = {}
            for split, f in splits.items():
                checked[f"qa{t}_{split}"] = md5_check(f, strict=False)
                p = raw / f"qa{t}_{split}.txt"   # the generator's names: every route's raw/ reads alike
                contents[str(p)] = f.data        # written to raw/ once every file has parsed
                files[str(t)][split] = str(p)
                origin[str(p)] = f.where
        meta["source"] = (f"bAbI {'archive' if os.path.isfile(source) else 'folder'} {os.path.abspath(source)}"
                          + (f" (set {babi_set})" if os.path.isfile(source) else ""))
        meta["source_files"] = checked

    def parse(path):
        if path in contents:
            try:
                lines = contents[path].decode("utf-8-sig").splitlines()
            except UnicodeDecodeError as exc:
                raise UserError(f"{origin.get(path, path)}: not UTF-8 text ({exc.reason} at byte {exc.start})") from None
        else:
            lines = read_babi_lines(path)
        return parse_babi_lines(lines, origin.get(path, path), memory_size, max_positions)

    # every file parses (a bad line is refused) before anything is written
    parsed = {}
    for t, paths in files.items():
        train = parse(paths["train"])
        if "valid" in paths:
            valid = parse(paths["valid"])
        else:
            train, valid = _valid_split(train, valid_fraction, seed, t)
        test = parse(paths["test"])
        if not train or not test:
            raise UserError(f"task {t}: empty train or test split ({paths})")
        splits = {"train": train, "valid": valid, "test": test}
        extra = sorted(n for n in paths if n.startswith("test_"))
        for n in extra:
            splits[n] = parse(paths[n])
        parsed[t] = (train, valid, test, splits, extra)
    for path, data in contents.items():
        pathlib.Path(path).parent.mkdir(parents=True, exist_ok=True)
        atomic_write_bytes(path, data)

    results = []
    for t, paths in files.items():
        train, valid, test, splits, extra = parsed[t]
        text_dir = out / "text" / f"task{t}"
        text_dir.mkdir(parents=True, exist_ok=True)
        for name, exs in splits.items():
            write_text(exs, text_dir / name)
        unseen = _dictionary(splits, text_dir / "dict.txt")
        dest = out / "bin" / f"task{t}"
        if binarize:
            tmp = out / "bin" / f".task{t}.tmp-{os.getpid()}"
            shutil.rmtree(tmp, ignore_errors=True)
            tmp.mkdir(parents=True)
            _binarize(text_dir, tmp, text_dir / "dict.txt", extra)
            atomic_write_bytes(str(tmp / "unseen.txt"), "".join(w + "\n" for w in unseen).encode())
            classes = word_classes(train)         # entity dropout without a word list (qa_word_classes.py)
            atomic_write_bytes(str(tmp / "word_classes.txt"), format_classes(classes).encode())
            info = dict(meta, task=t, examples={n: len(e) for n, e in splits.items()},
                        unseen_words=len(unseen), word_classes=len(classes), max_story=max(len(e.story) for e in train + valid + test))
            atomic_write_bytes(str(tmp / "qa_meta.json"), (json.dumps(info, indent=1) + "\n").encode())
            if dest.exists():
                shutil.rmtree(dest)
            os.replace(tmp, dest)
        results.append(str(dest))
    return results
