"""Data as researchers have it (data_prep/qa_source.py, data_prep/fetch.py, data_prep/entailment_cli.py):
the bAbI release as its archive, unpacked, or a folder holding only the requested task's files reads
the same bytes; only the requested tasks are checked; a missing requested file is one line naming
it; published md5s are checked (a note in prepare, a refusal in fetch).  The files are our
generator's (no released bAbI file here); the md5 table is replaced by one computed with hashlib
here, independently of the code under test."""
import hashlib
import io
import json
import tarfile
import zipfile
from pathlib import Path

import pytest

from nesyseq.common.errors import UserError
from nesyseq.data_prep import fetch as F
from nesyseq.data_prep import qa_source as S
from nesyseq.data_prep.qa_generate import generate_task

QA2 = "qa2_two-supporting-facts"


@pytest.fixture(scope="module")
def task2():
    data = generate_task("2", n_train=6, n_test=3, num_names=4, seed=1)
    return {"train": data["train"].encode(), "test": data["test"].encode()}


def _write(folder, task2, extra=True):
    folder.mkdir(parents=True, exist_ok=True)
    for split, data in task2.items():
        (folder / f"{QA2}_{split}.txt").write_bytes(data)
    if extra:   # other tasks, incomplete: not requested, so not checked
        (folder / "qa3_three-supporting-facts_test.txt").write_text("1 Mary went to the kitchen.\n")
        (folder / "qa5_three-arg-relations_train.txt").write_text("this is not bAbI at all\n")
        (folder / "qa4_train.txt").write_text("1 Mary went to the kitchen.\n")   # under both naming schemes
        (folder / "qa4_two-arg-relations_test.txt").write_text("1 Mary went to the kitchen.\n")
    return folder


def _tarball(path, task2, top="tasks_1-20_v1-2/en-10k"):
    with tarfile.open(path, "w:gz") as tar:
        for split, data in task2.items():
            info = tarfile.TarInfo(f"{top}/{QA2}_{split}.txt")
            info.size = len(data)
            tar.addfile(info, io.BytesIO(data))
    return path


def _md5(data):
    return hashlib.md5(data).hexdigest()


def test_archive_unpacked_copy_and_a_folder_of_one_task_read_the_same_bytes(tmp_path, task2):
    only = _write(tmp_path / "my-copy", task2)
    root = _write(tmp_path / "unpacked" / "tasks_1-20_v1-2" / "en-10k", task2, extra=False).parents[1]
    arc = _tarball(tmp_path / "tasks_1-20_v1-2.tar.gz", task2)
    for source in (only, root, root / "tasks_1-20_v1-2", root / "tasks_1-20_v1-2" / "en-10k", arc):
        files = S.babi_files(str(source), ["2"])
        assert list(files) == [2] and sorted(files[2]) == ["test", "train"], source
        assert {k: f.data for k, f in files[2].items()} == task2, source
    # the place in the release is known from the set folder or the archive, not from a folder of mine
    assert S.babi_files(str(arc), [2])[2]["train"].release_name == f"en-10k/{QA2}_train.txt"
    assert S.babi_files(str(only), [2])[2]["train"].release_name is None
    with pytest.raises(UserError, match=r"no en/ folder of bAbI files in the archive \(its sets: en-10k"):
        S.babi_files(str(arc), [2], babi_set="en")


def test_a_missing_requested_file_is_one_line_naming_it(tmp_path, task2):
    folder = _write(tmp_path / "copy", task2)
    for task, missing in ((3, "qa3_three-supporting-facts_train.txt"), (5, "qa5_three-arg-relations_test.txt"),
                          (7, "qa7_counting_train.txt")):
        with pytest.raises(UserError) as err:
            S.babi_files(str(folder), [task])
        assert str(err.value) == f"{folder / missing}: no such file (task {task}'s {missing.split('_')[-1][:-4]} file)"
    arc = _tarball(tmp_path / "t.tar.gz", task2)
    with pytest.raises(UserError, match=r"t\.tar\.gz:tasks_1-20_v1-2/en-10k/qa3_three-supporting-facts_train\.txt: no such"):
        S.babi_files(str(arc), [3])
    with pytest.raises(UserError, match="no bAbI files"):
        S.babi_files(str(tmp_path), [2])


def test_prepare_reads_only_the_requested_task_and_records_the_md5s(tmp_path, task2, monkeypatch, capsys):
    from nesyseq.data_prep.qa_pipeline import prepare_qa

    monkeypatch.setitem(S.RELEASE_MD5, f"en-10k/{QA2}_train.txt", _md5(task2["train"]))
    monkeypatch.setitem(S.RELEASE_MD5, f"en-10k/{QA2}_test.txt", _md5(b"another file"))
    src = _write(tmp_path / "en-10k", task2)
    prepare_qa(tmp_path / "out", source=str(src), tasks="2", binarize=False)
    raw = tmp_path / "out" / "raw"
    assert sorted(p.name for p in raw.iterdir()) == ["qa2_test.txt", "qa2_train.txt"]
    assert (raw / "qa2_test.txt").read_bytes() == task2["test"]
    err = capsys.readouterr().err   # the test file differs from its (here: made up) published md5
    assert f"{QA2}_test.txt: md5 {_md5(task2['test'])}, but bAbI v1.2's en-10k/{QA2}_test.txt has md5" in err
    assert "_train.txt: md5" not in err


def test_fetch_from_unpacked_folders(tmp_path, task2, monkeypatch):
    monkeypatch.setattr(S, "RELEASE_MD5", {f"en-10k/{QA2}_train.txt": _md5(task2["train"])})
    out = tmp_path / "out"
    # a folder of my own: its set is told by the published md5 of its train file
    rec = F.fetch("babi", out, [str(_write(tmp_path / "mine", task2, extra=False))])
    dest = out / "tasks_1-20_v1-2" / "en-10k"
    assert sorted(p.name for p in dest.iterdir()) == [f"{QA2}_test.txt", f"{QA2}_train.txt"]
    files = json.loads(rec.read_text())["files"]
    assert files[f"tasks_1-20_v1-2/en-10k/{QA2}_train.txt"]["published_md5"] == _md5(task2["train"])
    assert files[f"tasks_1-20_v1-2/en-10k/{QA2}_test.txt"]["published_md5"] == "unknown"
    # a set's folder adds to it; the same bytes again are kept
    F.fetch("babi", out, [str(_write(tmp_path / "copy" / "en", task2, extra=False))])
    F.fetch("babi", out, [str(tmp_path / "mine")])
    assert (out / "tasks_1-20_v1-2" / "en" / f"{QA2}_test.txt").read_bytes() == task2["test"]
    # a file that differs from its published md5: refused, naming it and both md5s; nothing written
    bad = _write(tmp_path / "bad" / "en-10k", dict(task2, train=task2["train"] + b"1 Mary went to the garden.\n"))
    with pytest.raises(UserError) as err:
        F.fetch("babi", tmp_path / "out2", [str(bad)])
    assert f"{QA2}_train.txt: md5 " in str(err.value) and _md5(task2["train"]) in str(err.value)
    assert not (tmp_path / "out2").exists()
    # a folder of my own whose files have no published md5: its set must be named
    monkeypatch.delitem(S.RELEASE_MD5, f"en-10k/{QA2}_train.txt")
    with pytest.raises(UserError, match="put them in a folder named after their set"):
        F.fetch("babi", tmp_path / "out3", [str(tmp_path / "mine")])


def test_fetch_from_a_folder_takes_the_files_it_holds_by_name(tmp_path):
    """The entailment / WMT case: the files of the table that a folder holds (also under data/) are
    used, the others downloaded (here from file:// URLs)."""
    have, other = b"(a&b),a,1\n", b"a,(a|b),1\n"
    (tmp_path / "repo" / "data").mkdir(parents=True)
    (tmp_path / "repo" / "data" / "validate.txt").write_bytes(have)
    (tmp_path / "served.txt").write_bytes(other)
    sha = lambda b: hashlib.sha256(b).hexdigest()   # noqa: E731
    table = {"toy": F.Dataset("toy", "v1", "https://example.org", "CC0", (
        F.Source("validate.txt", ("file:///nowhere/validate.txt",), sha(have), extract=False),
        F.Source("test_easy.txt", ((tmp_path / "served.txt").as_uri(),), sha(other), extract=False)))}
    F.fetch("toy", tmp_path / "out", [str(tmp_path / "repo")], datasets=table)
    assert (tmp_path / "out" / "validate.txt").read_bytes() == have
    assert (tmp_path / "out" / "test_easy.txt").read_bytes() == other
    (tmp_path / "empty").mkdir()
    with pytest.raises(UserError, match="holds none of toy's files"):
        F.fetch("toy", tmp_path / "out2", [str(tmp_path / "empty")], datasets=table)


ENTAIL = {"train": "(a&b),a,1\na,(a&b),0\n", "validate": "(a|b),a,0\n", "test_easy": "a,(a|b),1\n"}


@pytest.mark.parametrize("form", ["folder", "repository", "tar", "zip"])
def test_prepare_entailment_reads_a_folder_its_repository_or_an_archive(tmp_path, form):
    from nesyseq.data_prep.entailment_cli import source_files

    root = tmp_path / "logical-entailment-dataset"
    data = root / "data" if form != "folder" else root
    data.mkdir(parents=True)
    for split, text in ENTAIL.items():
        (data / f"{split}.txt").write_text(text)
    source = root
    if form == "tar":
        source = tmp_path / "repo.tar.gz"
        with tarfile.open(source, "w:gz") as tar:
            tar.add(root, arcname=root.name)
    elif form == "zip":
        source = tmp_path / "repo.zip"
        with zipfile.ZipFile(source, "w") as z:
            for p in data.iterdir():
                z.write(p, f"{root.name}/data/{p.name}")
    tmp = tmp_path / "tmp"
    tmp.mkdir()
    found = source_files(str(source), str(tmp))
    assert sorted(found) == sorted(ENTAIL)
    assert {s: Path(p).read_text() for s, p in found.items()} == ENTAIL


def test_prepare_entailment_names_a_missing_file(tmp_path):
    from nesyseq.data_prep.entailment_cli import source_files

    (tmp_path / "train.txt").write_text(ENTAIL["train"])
    with pytest.raises(UserError) as err:
        source_files(str(tmp_path), str(tmp_path))
    assert str(err.value).startswith(f"{tmp_path / 'validate.txt'}: no such file")
