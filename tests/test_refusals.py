"""Nothing a user owns is lost, and nothing wrong passes silently: each bad input below is refused
before any work, in one line, with a non-zero exit and the folders it names left as they were
(tests/refusal_helpers.py checks all of that the same way for every case)."""
import json
import os
import shutil
import sys
from pathlib import Path

import pytest
import torch

from refusal_helpers import refused, tree

REPO = Path(__file__).resolve().parents[1]
OLD = REPO / "tests" / "fixtures" / "old_checkpoint"     # a tiny math checkpoint (translation, src-tgt)
BABI = REPO / "tests" / "fixtures" / "babi" / "envalid"


def write_pair(d: Path, prefix: str, en, de) -> str:
    (d / f"{prefix}.en").write_text("".join(x + "\n" for x in en), encoding="utf-8")
    (d / f"{prefix}.de").write_text("".join(x + "\n" for x in de), encoding="utf-8")
    return str(d / prefix)


def tiny_corpus(d: Path):
    d.mkdir(parents=True, exist_ok=True)
    en = ["the cat sees the dog", "a small house", "my friend likes water", "the green street today"]
    de = ["die Katze sieht den Hund", "ein kleines Haus", "meine Freundin mag Wasser", "die grüne Straße heute"]
    train = write_pair(d, "train", en * 3, de * 3)
    dev = write_pair(d, "dev", en[:2], de[:2])
    return train, dev


def wmt_argv(train, dev, out, *extra):
    return ["prepare", "wmt", "--train", train, "--valid", dev, "--test", dev, "--out", str(out),
            "--bpe-size", "30", "--workers", "1", "--no-progress", *extra]


# ---------------------------------------------------------------- prepare wmt: the user's folder
def test_prepare_wmt_refuses_a_folder_it_did_not_make(tmp_path):
    train, dev = tiny_corpus(tmp_path / "w")
    out = tmp_path / "out"
    (out / "sub").mkdir(parents=True)
    (out / "thesis.txt").write_text("x\n")
    (out / "sub" / "notes.txt").write_text("y\n")
    refused(wmt_argv(train, dev, out), out, "--out", str(out), "--overwrite", "thesis.txt")


def test_prepare_wmt_into_the_corpus_folder_keeps_the_corpus(tmp_path):
    train, dev = tiny_corpus(tmp_path / "w")
    refused(wmt_argv(train, dev, tmp_path / "w"), tmp_path / "w", "--out", "--overwrite")
    # with --overwrite an input where an output goes (raw/, the dictionaries, ...) is still refused
    (tmp_path / "w" / "raw").mkdir()
    shutil.copy(tmp_path / "w" / "train.en", tmp_path / "w" / "raw" / "train.en")
    shutil.copy(tmp_path / "w" / "train.de", tmp_path / "w" / "raw" / "train.de")
    refused(wmt_argv(str(tmp_path / "w" / "raw" / "train"), dev, tmp_path / "w", "--overwrite"), tmp_path / "w",
            "raw/train.en", "inside --out")


def test_prepare_wmt_and_math_refuse_a_regular_file_as_out(tmp_path):
    train, dev = tiny_corpus(tmp_path / "w")
    f = tmp_path / "results.txt"
    f.write_text("mine\n")
    refused(wmt_argv(train, dev, f), tmp_path, "--out", "a file, not a folder")
    refused(["prepare", "math", "--out", f, "--per-module", "3", "--no-progress"], tmp_path, "a file, not a folder")
    refused(["prepare", "math", "--out", f / "sub", "--per-module", "3"], tmp_path, "is a file, not a folder")


@pytest.mark.skipif(os.geteuid() == 0, reason="root writes into read-only folders")
def test_prepare_math_refuses_a_read_only_folder(tmp_path):
    ro = tmp_path / "ro"
    ro.mkdir()
    ro.chmod(0o555)
    try:
        refused(["prepare", "math", "--out", ro / "data", "--per-module", "3"], tmp_path, "not writable")
    finally:
        ro.chmod(0o755)


@pytest.mark.slow  # two real prepare wmt runs (SentencePiece, fairseq-preprocess) on 12 lines
def test_prepare_wmt_writes_into_its_own_folder_and_replaces_only_its_files(tmp_path, capsys):
    """--overwrite into a user's folder keeps the user's files; the marker then says the folder is
    prepare wmt's, a second run needs no --overwrite, keeps a file added since, and removes the
    first run's files that the second one does not write (here ref/, after a test split with a NUL
    byte was refused and a train pair with one dropped)."""
    from nesyseq.cli.main import main
    from nesyseq.data_prep.wmt_prepare import MARKER

    train, dev = tiny_corpus(tmp_path / "w")
    out = tmp_path / "out"
    (out / "sub").mkdir(parents=True)
    (out / "thesis.txt").write_text("x\n")
    assert main(wmt_argv(train, dev, out, "--overwrite")) == 0
    assert (out / "thesis.txt").read_text() == "x\n" and (out / "sub").is_dir()
    marker = json.loads((out / MARKER).read_text())
    assert marker["complete"] and "dict.en.txt" in marker["files"] and "thesis.txt" not in marker["files"]
    assert sorted(p.name for p in out.iterdir() if p.name.startswith(".prepare-wmt")) == []

    (out / "later.txt").write_text("z\n")
    nul = write_pair(tmp_path / "w", "nul", ["a b", "c\x00d"], ["e f", "g h"])
    line = refused(wmt_argv(train, nul, out), out, "nul.en:2", "U+0000")
    assert "control character" in line
    # a train pair with a control character is dropped and counted, the run goes on
    dirty = write_pair(tmp_path / "w", "dirty", ["a\x1bb c"] + ["the cat"] * 4, ["x y"] + ["die Katze"] * 4)
    (out / "ref" / "stale.txt").write_text("old\n")
    capsys.readouterr()
    assert main(wmt_argv(dirty, dev, out)) == 0
    assert "dropped 1 pair(s) with control characters (first: " in capsys.readouterr().err
    rec = json.loads((out / "prepare.json").read_text())
    assert rec["counts"]["train"]["dropped_control"] == 1 and rec["counts"]["train"]["read"] == 5
    assert (out / "thesis.txt").read_text() == "x\n" and (out / "later.txt").read_text() == "z\n"
    assert not (out / "ref" / "stale.txt").exists()      # ref/ is prepare wmt's: replaced whole
    assert "\x1b" not in (out / "dict.en.txt").read_text()


# ---------------------------------------------------------------- one writer per folder
@pytest.mark.parametrize("spec, words", [("seed=1,1", "'1' is given twice"), ("seed=1,,2", "value 2 is empty"),
                                         ("seed=a/b,a_b", "share the folder")])
def test_launch_refuses_an_array_that_points_two_jobs_at_one_folder(tmp_path, spec, words):
    run_dir = tmp_path / "run"
    refused(["launch", "math", "--executor", "local", "--run-dir", run_dir, "--dry-run", "--array", spec],
            tmp_path, words)


def test_a_second_prepare_math_is_refused_and_deletes_nothing(tmp_path):
    """While one prepare math holds OUT's lock, another one into OUT is refused in one line, and
    the first one's temporary folders (live pid in their names) are never swept."""
    from nesyseq.common.out_folder import FolderLock
    from nesyseq.data_prep.math_generate import _remove_stale_tmp

    out = tmp_path / "math"
    live = os.getppid()                        # a process that is alive and not this one
    (out / f"text.tmp-{live}").mkdir(parents=True)
    (out / f"text.tmp-{live}" / "train.src").write_text("1 + 1\n")
    with FolderLock(out, "nesyseq prepare math"):
        refused(["prepare", "math", "--out", out, "--per-module", "3", "--no-progress"], out,
                "another `nesyseq prepare math`", f"pid {os.getpid()}")
    # the sweeps of both steps keep a live run's temporaries and remove a dead one's
    raw = tmp_path / "raw" / "train-easy"
    raw.mkdir(parents=True)
    (raw / f"m.txt.tmp-{live}-abcd1234").write_text("q\n")
    (raw / "m.txt.tmp-999999999-abcd1234").write_text("q\n")
    assert _remove_stale_tmp(str(tmp_path / "raw")) == 1
    assert sorted(p.name for p in raw.iterdir()) == [f"m.txt.tmp-{live}-abcd1234"]


def test_prepare_math_checks_its_options_before_generating(tmp_path):
    out = tmp_path / "math"
    refused(["prepare", "math", "--out", out, "--per-module", "3", "--valid-fraction", "1.5", "--no-progress"],
            tmp_path, "--valid-fraction", "1.5")
    refused(["prepare", "math", "--out", out, "--per-module", "3", "--workers", "0"], tmp_path, "--workers")
    assert not out.exists()


def test_a_prepare_math_stopped_midway_leaves_no_bin_of_the_old_raw_files(tmp_path, monkeypatch):
    """A new --seed changes raw/: the text/ and bin/ made from the old raw files go first, so a run
    stopped during generation never leaves raw/ of the new seed beside bin/ of the old one."""
    from nesyseq.data_prep import math_pipeline

    out = tmp_path / "math"
    (out / "bin").mkdir(parents=True)
    (out / "bin" / "prepare_stats.json").write_text("{}\n")
    (out / "text").mkdir()
    (out / "text" / "train.src").write_text("old\n")

    def stopped(raw, before_changes=None, **kw):
        before_changes()
        raise KeyboardInterrupt   # killed while generating

    monkeypatch.setattr(math_pipeline, "generate_math", stopped)
    with pytest.raises(KeyboardInterrupt):
        math_pipeline.prepare_math(out, modules="algebra__linear_1d", per_module=3, seed=1, progress=False)
    assert not (out / "bin").exists() and not (out / "text").exists()


# ---------------------------------------------------------------- evaluators: the checkpoint fits the data
def fake_wmt_data(d: Path, src="en", tgt="de", dicts=True) -> Path:
    """A data folder as prepare wmt writes it, with the math fixture's dictionaries (same sizes)."""
    d.mkdir(parents=True)
    (d / "prepare.json").write_text(json.dumps({"src_lang": src, "tgt_lang": tgt}))
    (d / "ref").mkdir()
    (d / "ref" / f"test.{tgt}").write_text("a\n")
    if dicts:
        for lang in (src, tgt):
            shutil.copy(OLD / "bin" / "dict.src.txt", d / f"dict.{lang}.txt")
    return d


def test_evaluate_wmt_refuses_a_math_checkpoint_on_en_de_data(tmp_path):
    data = fake_wmt_data(tmp_path / "ende")
    line = refused(["evaluate", "wmt", "--checkpoint", OLD / "checkpoint_best.pt", "--data", data, "--out",
                    tmp_path / "eval", "--cpu"], tmp_path, "checkpoint_best.pt", str(data), "src-tgt", "en-de")
    assert not (tmp_path / "eval").exists(), line


def test_evaluate_wmt_refuses_data_whose_prepare_stopped_midway(tmp_path):
    from nesyseq.data_prep.wmt_prepare import MARKER

    data = fake_wmt_data(tmp_path / "ende")
    (data / MARKER).write_text(json.dumps({"made_by": "nesyseq prepare wmt", "complete": False, "files": []}))
    refused(["evaluate", "wmt", "--checkpoint", OLD / "checkpoint_best.pt", "--data", data, "--out",
             tmp_path / "eval", "--cpu"], tmp_path, "stopped while moving", "run it again")


def test_evaluate_wmt_with_a_missing_dictionary_is_one_line_and_no_result_file(tmp_path):
    data = fake_wmt_data(tmp_path / "d", "src", "tgt", dicts=False)
    refused(["evaluate", "wmt", "--checkpoint", OLD / "checkpoint_best.pt", "--data", data, "--out",
             tmp_path / "eval", "--cpu"], tmp_path, "dict.src.txt is missing", str(data))


def recorded_checkpoint(tmp_path: Path, training_data=None) -> Path:
    """The math fixture with the dictionary record training writes (plugins/patches/dictionary_record.py),
    or, with ``training_data``, without a record and its cfg.task.data pointing there."""
    from fairseq.data import Dictionary

    from nesyseq.common.dictionaries import RECORD_KEY, fingerprint
    from nesyseq.plugins import checkpoint_safety  # noqa: F401

    state = torch.load(OLD / "checkpoint_best.pt", weights_only=True)
    if training_data is None:
        d = Dictionary.load(str(OLD / "bin" / "dict.src.txt"))
        state["extra_state"][RECORD_KEY] = {"source": fingerprint(d.symbols), "target": fingerprint(d.symbols)}
    else:
        state["cfg"]["task"]["data"] = str(training_data)
    path = tmp_path / ("recorded.pt" if training_data is None else "trained_here.pt")
    torch.save(state, path)
    return path


def shuffled_copy(src: Path, dest: Path) -> Path:
    """``src``'s data with two dictionary lines swapped: the same size, other contents."""
    shutil.copytree(src, dest)
    for name in ("dict.src.txt", "dict.tgt.txt"):
        lines = (dest / name).read_text().splitlines()
        lines[3], lines[4] = lines[4], lines[3]
        (dest / name).write_text("\n".join(lines) + "\n")
    return dest


@pytest.mark.parametrize("how", ["record", "training folder"])
def test_dictionaries_of_the_same_size_but_other_contents_are_refused(tmp_path, how):
    training = None if how == "record" else shutil.copytree(OLD / "bin", tmp_path / "train_bin")
    ckpt = recorded_checkpoint(tmp_path, training)
    data = shuffled_copy(OLD / "bin", tmp_path / "other")
    words = ("sha256",) if how == "record" else ("train_bin", "id ")
    refused(["evaluate", "math", "--checkpoint", ckpt, "--data", data, "--out", tmp_path / "eval", "--cpu"],
            tmp_path, str(ckpt), str(data), "dictionary", *words)
    # the data it was trained on passes the check (nothing decoded here)
    from nesyseq.evaluations import checkpoints

    checkpoints.checked(ckpt, OLD / "bin", ("translation",), "evaluate math", pair=("src", "tgt"))


def test_evaluate_qa_refuses_a_math_checkpoint(tmp_path):
    (tmp_path / "data").mkdir()
    refused(["evaluate", "qa", "--out", tmp_path / "out", "--cpu", "--checkpoint", OLD / "checkpoint_best.pt",
             "--data", tmp_path / "data", "--model", "m", "--seed", "0", "--task", "1"],
            tmp_path, "'translation'", "'babi_qa'", "checkpoint_best.pt")


class _Exploit:
    def __init__(self, marker):
        self.marker = marker

    def __reduce__(self):
        return (os.system, (f"touch {self.marker}",))


def test_a_malicious_checkpoint_is_one_line_everywhere(tmp_path):
    marker = tmp_path / "pwned"
    evil = tmp_path / "ck" / "evil.pt"
    evil.parent.mkdir()
    torch.save({"model": {}, "args": _Exploit(marker)}, evil)
    (tmp_path / "data").mkdir()
    for argv in (["evaluate", "qa", "--out", tmp_path / "out", "--cpu", "--checkpoint", evil, "--data",
                  tmp_path / "data", "--model", "m", "--seed", "0", "--task", "1"],
                 ["choose-arm", "--arms", "evil", "--checkpoint", tmp_path / "ck" / "{arm}.pt", "--out", tmp_path / "c"],
                 ["analyze", "roles", "--checkpoint", evil, "--data", tmp_path / "data", "--out", tmp_path / "r.png"],
                 ["evaluate", "math", "--checkpoint", evil, "--data", OLD / "bin", "--out", tmp_path / "e"],
                 ["convert", "export", "--checkpoint", evil, "--out", tmp_path / "x.pt"]):
        refused(argv, tmp_path, "evil.pt", "refused", "system")
    assert not marker.exists(), "the payload ran"


def test_a_failed_decode_leaves_no_empty_result_file(tmp_path, monkeypatch):
    """fairseq-generate writes generate-SUBSET.txt first; when it fails, that (empty) file goes."""
    from nesyseq.common import fairseq_cli

    fake = tmp_path / "fake-generate"
    fake.write_text(f"#!{sys.executable}\nimport sys, pathlib\n"
                    "out = sys.argv[sys.argv.index('--results-path') + 1]\n"
                    "pathlib.Path(out, 'generate-test.txt').write_text('')\n"
                    "print('RuntimeError: something broke'); sys.exit(1)\n")
    fake.chmod(0o755)
    monkeypatch.setattr(fairseq_cli, "fairseq_bin", lambda name: str(fake))
    out = tmp_path / "eval"
    out.mkdir()
    line = refused(lambda: fairseq_cli.fairseq_generate(["--results-path", out], out, "test", True, "x.pt"),
                   tmp_path / "nothing", "fairseq-generate failed on x.pt", "something broke")
    assert not (out / "generate-test.txt").exists() and "generate-test.log" in line


# ---------------------------------------------------------------- training: checkpoint files
def test_a_damaged_checkpoint_last_on_resume_is_one_line_naming_it(tmp_path):
    from fairseq.trainer import Trainer

    from nesyseq.plugins.patches import checkpoint_files

    checkpoint_files.apply()
    torch.save({"model": {"w": torch.ones(100)}}, tmp_path / "whole.pt")
    whole = (tmp_path / "whole.pt").read_bytes()
    for name, data in (("empty", b""), ("truncated", whole[: len(whole) // 2])):
        save_dir = tmp_path / name
        save_dir.mkdir()
        last = save_dir / "checkpoint_last.pt"
        last.write_bytes(data)
        refused(lambda: Trainer.load_checkpoint(object(), str(last)), save_dir,
                str(last), "damaged checkpoint", "--restore-file", "--reset-", "remove it")


def test_a_failed_save_is_one_line_and_leaves_no_temporary(tmp_path, monkeypatch):
    from fairseq import checkpoint_utils

    from nesyseq.plugins.patches import checkpoint_files

    checkpoint_files.apply()
    best = tmp_path / "checkpoint_best.pt"
    best.write_bytes(b"the previous checkpoint")
    def disk_full(obj, f, *a, **kw):          # what fits of a checkpoint, then the disk is full
        if hasattr(f, "write"):
            f.write(b"PK\x03\x04 the first bytes")
        else:
            Path(f).write_bytes(b"PK\x03\x04 the first bytes")
        raise OSError(28, "No space left on device")

    monkeypatch.setattr(torch, "save", disk_full)
    refused(lambda: checkpoint_utils.torch_persistent_save({"model": {"w": torch.ones(1000)}}, str(best)),
            tmp_path, str(best), "No space left on device", "intact")


def test_checkpoints_record_their_dictionaries(monkeypatch):
    """The record (plugins/patches/dictionary_record.py) is the size and sha256 of each dictionary's
    symbols, in id order: the same symbols give the same record, one swap another."""
    import fairseq.trainer
    from fairseq.data import Dictionary

    from nesyseq.common.dictionaries import fingerprint
    from nesyseq.plugins.patches import dictionary_record

    d = Dictionary.load(str(OLD / "bin" / "dict.src.txt"))

    class Task:
        source_dictionary = target_dictionary = d

    class Trainer:
        task = Task()

        def state_dict(self):
            return {"model": {}, "extra_state": {"metrics": {}}}

    monkeypatch.setattr(fairseq.trainer, "Trainer", Trainer)
    dictionary_record._install()
    record = Trainer().state_dict()["extra_state"]["dictionaries"]
    import hashlib
    assert record["source"] == {"size": len(d), "sha256": hashlib.sha256("\n".join(d.symbols).encode()).hexdigest()}
    swapped = list(d.symbols)
    swapped[5], swapped[6] = swapped[6], swapped[5]
    assert fingerprint(swapped)["sha256"] != record["source"]["sha256"] and record["target"] == record["source"]


# ---------------------------------------------------------------- prepare qa: bAbI lines
@pytest.mark.parametrize("line, words", [("1 Mary\x00 went to the office.", ["qa8_train.txt:1", "U+0000"]),
                                         ("1 " + "Mary went " * 600 + "home.", ["qa8_train.txt:1", "1202 tokens",
                                                                                 "1024 positions"])],
                         ids=["nul", "long"])
def test_prepare_qa_refuses_a_bad_babi_line(tmp_path, line, words):
    src = tmp_path / "babi"
    shutil.copytree(BABI, src)
    text = (src / "qa8_train.txt").read_text().splitlines()
    (src / "qa8_train.txt").write_text("\n".join([line] + text[1:]) + "\n")
    out = tmp_path / "out"
    refused(["prepare", "qa", "--source", src, "--out", out], tmp_path, *words)
    assert not out.exists()
