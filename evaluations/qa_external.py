"""Evaluate a trained babi_qa checkpoint on a bAbI-format file it never saw.

    nesyseq evaluate qa --checkpoint CKPT --babi-file FILE.txt [--babi-file ...] [--data BIN] [--out DIR]

No retraining, no ``prepare qa``, no binarising: the file is parsed (file:line errors), its words
are looked up in the checkpoint's dictionary (``dict.src.txt`` of ``--data``, default the
checkpoint's training data folder) and every word that is not there gets a **new id** appended
to the dictionary, never ``<unk>``.  The model is rebuilt for the larger vocabulary and the
checkpoint's weights are copied in; the new rows of every vocabulary-sized parameter are zero
(semantic embedding, output row, α logit at its init 0, biases), and the model's ``set_unseen``
marks them together with the training ``unseen.txt`` words, so their semantic embedding and
output rows read as zero: the paper's protocol for words unseen in training (the same
treatment ``prepare qa`` gives test words when the test file is prepared with the training
file).  A symbolic model still sees them through their context slot φ(x).

The report gives the error and how many words of the file (types and tokens, source and
answers) were unseen in training: new to the dictionary, or in it only from a non-train split.
"""
from __future__ import annotations

import json
from pathlib import Path
from typing import Dict, List, Optional

from nesyseq.evaluations.seed_stats import aggregate
from nesyseq.common.atomic import atomic_write_bytes
from nesyseq.common.errors import UserError


def _load_state(ckpt: str):
    """``ckpt`` read by evaluations/checkpoints.py (safe load, one-line errors), a babi_qa checkpoint."""
    from nesyseq.evaluations import checkpoints

    state = checkpoints.read(ckpt)
    checkpoints.require_task(state, ckpt, ("babi_qa",), "evaluate qa --babi-file")
    return state


def extend_state_dict(old: Dict, new_model) -> Dict:
    """``old`` with every tensor whose first axis grew in ``new_model`` padded with zero rows."""
    import torch

    target = new_model.state_dict()
    out = {}
    for k, v in old.items():
        t = target.get(k)
        if t is not None and torch.is_tensor(v) and v.dim() >= 1 and t.shape[0] > v.shape[0] \
                and tuple(t.shape[1:]) == tuple(v.shape[1:]):
            pad = torch.zeros((t.shape[0] - v.shape[0],) + tuple(v.shape[1:]), dtype=v.dtype)
            v = torch.cat([v, pad], 0)
        out[k] = v
    return out


def load_with_words(ckpt: str, words: List[str], data: Optional[str] = None):
    """(model, task, new_words, train_unseen): the checkpoint's model with ``words`` that are
    not in its dictionary appended as new, unseen-in-training entries."""
    from nesyseq.evaluations import checkpoints

    state = _load_state(ckpt)
    cfg = state["cfg"]
    trained_on = checkpoints.training_data(state)
    data = data or trained_on
    if not data or not (Path(data) / "dict.src.txt").is_file():
        raise UserError(f"{ckpt}: its dictionary {data}/dict.src.txt is not there; "
                        "pass --data with the folder that holds the training dict.src.txt")
    task = checkpoints.setup_task(state, data, ckpt)
    checkpoints.check_dictionaries(state, task, ckpt, data, trained_on)   # before any word is added
    src, tgt = task.source_dictionary, task.target_dictionary
    if [src[i] for i in range(len(src))] != [tgt[i] for i in range(len(tgt))]:
        raise UserError(f"{data}: source and target dictionaries differ (babi_qa needs the joined one)")
    old_size = len(src)
    new_words = []
    for w in words:
        if src.index(w) == src.unk() and w != src.unk_word and w not in new_words:
            new_words.append(w)
    for w in new_words:
        src.add_symbol(w)
        if tgt is not src:
            tgt.add_symbol(w)
    model = task.build_model(cfg.model)
    weights = extend_state_dict(state["model"], model) if new_words else state["model"]
    model.load_state_dict(weights, strict=True, model_cfg=cfg.model)
    unseen_ids = sorted(set(task.unseen_ids) | set(range(old_size, len(src))))
    if hasattr(model, "set_unseen") and unseen_ids:
        model.set_unseen(unseen_ids)
    elif new_words:
        raise UserError(f"{ckpt}: model {type(model).__name__} has no set_unseen, so the "
                        f"{len(new_words)} new word(s) cannot be given zero embeddings")
    return model.eval(), task, new_words, set(task.unseen_words)


def _file_tokens(babi_file: str) -> List[str]:
    """Words of a (parsed, so well-formed) bAbI file, each line once: text, and answer on question lines."""
    from nesyseq.data_prep.qa_babi import read_babi_lines, tokenize

    out = []
    for line in read_babi_lines(babi_file):
        if not line.strip():
            continue
        fields = line.split(" ", 1)[1].split("\t")
        out += tokenize(fields[0])
        if len(fields) > 1:
            out.append(fields[1].strip().lower())
    return out


def evaluate_babi_file(ckpt: str, babi_file: str, data: Optional[str] = None, memory_size: Optional[int] = None,
                       batch_size: int = 256, predictions: bool = False, progress=None) -> Dict:
    """The report of one checkpoint on one bAbI-format file; with ``predictions``, also the
    model's answer word to each question, in file order (key "predictions").  ``progress``, if
    given, is called with (questions answered, questions) after each batch."""
    import torch
    from fairseq.data import LanguagePairDataset

    from nesyseq.data_prep.qa_babi import parse_babi_file

    if memory_size is None:
        from nesyseq.evaluations import checkpoints

        meta = Path(data or checkpoints.training_data(_load_state(ckpt)) or "") / "qa_meta.json"
        memory_size = json.loads(meta.read_text())["memory_size"] if meta.is_file() else 50
    examples = parse_babi_file(babi_file, memory_size)
    if not examples:
        raise UserError(f"{babi_file}: no questions")
    words = []
    for e in examples:
        words.extend(e.source_tokens())
        words.append(e.answer)
    model, task, new_words, train_unseen = load_with_words(ckpt, list(dict.fromkeys(words)), data)
    d = task.source_dictionary
    unseen = set(new_words) | train_unseen
    content = _file_tokens(babi_file)                 # each statement once, questions, answers
    src = [d.encode_line(" ".join(e.source_tokens()), add_if_not_exist=False, append_eos=True).long()
           for e in examples]
    tgt = [d.encode_line(e.answer, add_if_not_exist=False, append_eos=True).long() for e in examples]
    assert all(int(t.eq(d.unk()).sum()) == 0 for t in src + tgt), "a word fell back to <unk>"
    ds = LanguagePairDataset(src, torch.tensor([len(s) for s in src]), d, tgt, torch.tensor([len(t) for t in tgt]),
                             d, left_pad_source=False, left_pad_target=False)
    wrong = 0
    answered = []
    with torch.no_grad():
        for start in range(0, len(ds), batch_size):
            sample = ds.collater([ds[i] for i in range(start, min(len(ds), start + batch_size))])
            out = model(**sample["net_input"])
            pred = model.get_normalized_probs(out, log_probs=True)[:, 0].argmax(-1)
            wrong += int(pred.ne(sample["target"][:, 0]).sum())
            if predictions:                     # the collater sorts by length: back to file order
                answered += [(int(i), d[int(p)]) for i, p in zip(sample["id"], pred)]
            if progress is not None:
                progress(min(len(ds), start + batch_size), len(ds))
    extra = {"predictions": [w for _, w in sorted(answered)]} if predictions else {}
    return {**extra, "file": str(babi_file), "checkpoint": str(ckpt), "questions": len(examples),
            "error": 100.0 * wrong / len(examples), "memory_size": memory_size,
            "unseen_types": len({w for w in content if w in unseen}), "types": len(set(content)),
            "unseen_tokens": sum(1 for w in content if w in unseen), "tokens": len(content),
            "new_to_dictionary": sorted(new_words),
            "unseen_words": sorted({w for w in content if w in unseen})}


def external_table(results: List[Dict]) -> str:
    """One row per file: error % (mean ± population std over the checkpoints, as ``evaluate qa``
    aggregates seeds), each checkpoint's error, and the unseen-word counts (the first checkpoint's
    dictionary; checkpoints trained on the same data share it)."""
    agg = aggregate([{"file": r["file"], "error": r["error"]} for r in results], ["file"])
    lines = ["| file | test | questions | error (%) | per checkpoint (%) | unseen types | unseen tokens |",
             "|---|---|---|---|---|---|---|"]
    for f in dict.fromkeys(r["file"] for r in results):
        rs = [r for r in results if r["file"] == f]
        a, r = agg[(f,)], rs[0]
        err = f"{a['mean']:.2f}" if a["n"] == 1 else f"{a['mean']:.2f} ± {a['std']:.2f} (n={a['n']})"
        lines.append(f"| {f} | {_test_label(f)} | {r['questions']} | {err} | {' / '.join('%.1f' % x['error'] for x in rs)} "
                     f"| {r['unseen_types']} / {r['types']} | {r['unseen_tokens']} / {r['tokens']} |")
    return "\n".join(lines) + "\n"


def _test_label(path: str) -> str:
    """The report's ``test`` column: ``original`` for the task's own test file, ``zero-shot KIND``
    for its renamings (data_prep/qa_zero_shot.test_kind, by the file's name), else ``-``."""
    from nesyseq.data_prep.qa_zero_shot import test_kind

    kind = test_kind(path)
    return {"": "-", "original": "original"}.get(kind, f"zero-shot {kind}")


CSV_COLUMNS = ("file", "test", "questions", "error", "unseen_types", "types", "unseen_tokens", "tokens")


def external_csv(results: List[Dict]) -> str:
    """One row per (checkpoint, file): the file and its numbers, no checkpoint column, so that
    ``nesyseq collect`` matches the rows of the seeds of a launch array on the file alone."""
    import csv
    import io

    buf = io.StringIO(newline="")
    w = csv.writer(buf)
    w.writerow(CSV_COLUMNS)
    for r in results:
        w.writerow([r["file"], _test_label(r["file"]), r["questions"], f"{r['error']:.4f}"]
                   + [r[k] for k in CSV_COLUMNS[4:]])
    return buf.getvalue()


class FileProgress:
    """``evaluate qa``'s progress on stderr (stdout keeps the table): one line per file when it is
    done, and, on a file that takes longer, a line at most every ``every`` seconds."""

    def __init__(self, label: str, every: float = 5.0, stream=None):
        import sys
        import time

        self.label, self.every, self.stream = label, every, stream or sys.stderr
        self.t0 = self.last = time.monotonic()

    def __call__(self, done: int, total: int) -> None:
        import time

        now = time.monotonic()
        if done < total and now - self.last >= self.every:
            self.last = now
            print(f"evaluate qa: {self.label}: {done}/{total} questions, {now - self.t0:.0f} s", file=self.stream,
                  flush=True)

    def done(self, r: Dict) -> None:
        import time

        print(f"evaluate qa: {self.label}: {r['questions']} questions, error {r['error']:.2f}% "
              f"({time.monotonic() - self.t0:.0f} s)", file=self.stream, flush=True)


UNSEEN_SHOWN = 40


def unseen_words_line(r, kept_in=None, shown: int = UNSEEN_SHOWN) -> str:
    """One line naming a file's words unseen in training: the first ``shown`` of them and how many
    more (a 10,000-name test file has thousands); the whole list is in ``kept_in`` when given."""
    words = r["unseen_words"]
    text = " ".join(words[:shown]) or "(none)"
    if len(words) > shown:
        where = f"all {len(words)} in {kept_in}" if kept_in else f"{len(words)} in all; --out keeps the list"
        text += f" ... and {len(words) - shown} more ({where})"
    return f"{r['file']}: words unseen in training: {text}"


def run_external(args) -> int:
    if not args.checkpoint:
        raise UserError("--babi-file needs --checkpoint")
    results = []
    pairs = [(ck, f) for ck in args.checkpoint for f in args.babi_file]
    for k, (ck, f) in enumerate(pairs, 1):
        show = FileProgress(f"[{k}/{len(pairs)}] {Path(f).name}" + (f" ({ck})" if len(args.checkpoint) > 1 else ""))
        r = evaluate_babi_file(ck, f, args.data, args.memory_size, args.batch_size, progress=show)
        show.done(r)
        results.append(r)
    text = external_table(results)
    print(text, end="")
    for r in results[:len(args.babi_file)]:
        print(unseen_words_line(r, kept_in="qa_external.json" if args.out else None))
    if args.out:
        out = Path(args.out)
        out.mkdir(parents=True, exist_ok=True)
        atomic_write_bytes(str(out / "qa_external.md"), text.encode())
        atomic_write_bytes(str(out / "qa_external.json"), (json.dumps(results, indent=1) + "\n").encode())
        atomic_write_bytes(str(out / "qa_external.csv"), external_csv(results).encode())
        for name in ("qa_external.md", "qa_external.json", "qa_external.csv"):
            print(out / name)
    return 0
