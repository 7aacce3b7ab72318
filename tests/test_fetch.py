"""nesyseq fetch (data_prep/fetch.py): a file is used only when its sha256 matches the table,
extraction goes through a temporary folder, and any failure leaves nothing in --out.  No network:
the sources are file:// URLs and --from copies of small archives made here, with the table
replaced by one that names their sha256 (computed by hashlib here, independently of fetch)."""
import hashlib
import io
import json
import re
import subprocess
import sys
import tarfile
from pathlib import Path

import pytest

from nesyseq.data_prep import fetch as F
from nesyseq.common.errors import UserError

REPO = Path(__file__).resolve().parents[1]
FILES = {"tasks/en/qa1_single_train.txt": b"1 Mary went to the kitchen.\n2 Where is Mary?\tkitchen\t1\n",
         "tasks/en/qa1_single_test.txt": b"1 John went to the garden.\n2 Where is John?\tgarden\t1\n"}


def _archive(path, files=FILES, evil=None):
    with tarfile.open(path, "w:gz") as tar:
        for name, data in files.items():
            info = tarfile.TarInfo(name)
            info.size = len(data)
            tar.addfile(info, io.BytesIO(data))
        if evil:
            info = tarfile.TarInfo(evil)
            info.size = 3
            tar.addfile(info, io.BytesIO(b"bad"))
    return path


def _sha(path):
    return hashlib.sha256(Path(path).read_bytes()).hexdigest()


def _table(archive, sha, name="toy.tar.gz", extract=True):
    src = F.Source(name, (Path(archive).resolve().as_uri(),), sha, extract=extract)
    return {"toy": F.Dataset("toy", "v1", "https://example.org", "CC0", (src,))}


def _left(out):
    return sorted(p.name for p in Path(out).iterdir()) if Path(out).exists() else []


def test_download_verify_extract_and_record(tmp_path):
    arc = _archive(tmp_path / "toy.tar.gz")
    out = tmp_path / "out"
    rec = F.fetch("toy", out, datasets=_table(arc, _sha(arc)))
    for name, data in FILES.items():
        assert (out / name).read_bytes() == data
    record = json.loads(rec.read_text())
    assert record["files"]["toy.tar.gz"]["sha256"] == _sha(arc) and record["files"]["toy.tar.gz"]["source"].startswith("file://")
    assert _left(out) == ["fetch_toy.json", "tasks"]            # no temporary folder, no archive left
    # fetched again: nothing to do, nothing rewritten
    mtime = rec.stat().st_mtime_ns
    F.fetch("toy", out, datasets=_table(arc, _sha(arc)))
    assert rec.stat().st_mtime_ns == mtime


def test_a_mismatch_names_the_file_and_both_checksums_and_writes_nothing(tmp_path):
    arc = _archive(tmp_path / "toy.tar.gz")
    wrong = "0" * 64
    out = tmp_path / "out"
    with pytest.raises(UserError) as err:
        F.fetch("toy", out, datasets=_table(arc, wrong))
    msg = str(err.value)
    assert "toy.tar.gz" in msg and _sha(arc) in msg and wrong in msg and "\n" not in msg
    assert _left(out) == []
    # the same through --from: the copy is verified, not trusted
    with pytest.raises(UserError, match=re.escape(_sha(arc))):
        F.fetch("toy", out, [str(arc)], datasets=_table(arc, wrong))
    assert _left(out) == [] and arc.exists()


def test_from_a_local_copy(tmp_path):
    arc = _archive(tmp_path / "downloaded under another name.tgz")
    table = _table(tmp_path / "nowhere.tar.gz", _sha(arc))   # the URL would fail: --from is used, not it
    out = tmp_path / "out"
    F.fetch("toy", out, [str(arc)], datasets=table)
    assert (out / "tasks/en/qa1_single_test.txt").read_bytes() == FILES["tasks/en/qa1_single_test.txt"]
    with pytest.raises(UserError, match=r"nowhere\.tar\.gz: .*--from FILE"):   # without it, the dead URL is an error
        F.fetch("toy", tmp_path / "out2", datasets=table)
    assert _left(tmp_path / "out2") == []


def test_unknown_checksum_is_refused_unless_accepted(tmp_path, capsys):
    arc = _archive(tmp_path / "toy.tar.gz")
    out = tmp_path / "out"
    with pytest.raises(UserError) as err:
        F.fetch("toy", out, datasets=_table(arc, F.UNKNOWN))
    assert _sha(arc) in str(err.value) and "--accept-checksum" in str(err.value)
    assert _left(out) == []
    F.fetch("toy", out, accept_checksum=True, datasets=_table(arc, F.UNKNOWN))
    assert _sha(arc) in capsys.readouterr().err
    assert (out / "tasks/en/qa1_single_train.txt").exists()


def test_an_archive_that_writes_outside_is_refused_whole(tmp_path):
    arc = _archive(tmp_path / "toy.tar.gz", evil="../escaped.txt")
    out = tmp_path / "out"
    with pytest.raises(UserError, match="cannot extract"):
        F.fetch("toy", out, datasets=_table(arc, _sha(arc)))
    assert _left(out) == [] and not (tmp_path / "escaped.txt").exists()


def test_an_existing_entry_is_not_overwritten(tmp_path):
    arc = _archive(tmp_path / "toy.tar.gz")
    out = tmp_path / "out"
    (out / "tasks").mkdir(parents=True)
    (out / "tasks" / "mine.txt").write_text("keep")
    with pytest.raises(UserError, match="exists already"):
        F.fetch("toy", out, datasets=_table(arc, _sha(arc)))
    assert _left(out) == ["tasks"] and _left(out / "tasks") == ["mine.txt"]


def test_the_table_names_a_source_version_and_checksum_for_every_file():
    assert set(F.DATASETS) == {"babi", "entailment", "wmt14_en_de"}
    for ds in F.DATASETS.values():
        assert ds.version and ds.homepage.startswith("https://")
        for s in ds.sources:
            assert s.urls and all(u.startswith(("https://", "http://")) for u in s.urls)
            assert s.sha256 == F.UNKNOWN or re.fullmatch(r"[0-9a-f]{64}", s.sha256), (ds.name, s.name)
    assert F.DATASETS["babi"].sources[0].name == "tasks_1-20_v1-2.tar.gz"


def test_cli_list_and_bad_name():
    r = subprocess.run([sys.executable, "-m", "nesyseq.cli.main", "fetch", "--list"], cwd=REPO,
                       capture_output=True, text=True, timeout=60)
    assert r.returncode == 0 and "tasks_1-20_v1-2.tar.gz" in r.stdout and "newstest" in r.stdout
    r = subprocess.run([sys.executable, "-m", "nesyseq.cli.main", "fetch", "babl", "--out", "x"], cwd=REPO,
                       capture_output=True, text=True, timeout=60)
    assert r.returncode == 2 and "no such dataset" in r.stderr and "babi" in r.stderr


def test_a_plain_file_is_verified_and_placed(tmp_path):
    plain = tmp_path / "validate.txt"
    plain.write_bytes(b"(a&b),a,1,1,1,1\n")
    out = tmp_path / "out"
    F.fetch("toy", out, datasets=_table(plain, _sha(plain), name="validate.txt", extract=False))
    assert (out / "validate.txt").read_bytes() == plain.read_bytes() and plain.exists()
    assert _left(out) == ["fetch_toy.json", "validate.txt"]


def test_a_mirror_with_another_file_is_skipped_for_the_next_url(tmp_path):
    good = _archive(tmp_path / "good.tar.gz")
    other = _archive(tmp_path / "other.tar.gz", files={"x.txt": b"another release\n"})
    src = F.Source("toy.tar.gz", (other.resolve().as_uri(), good.resolve().as_uri()), _sha(good))
    table = {"toy": F.Dataset("toy", "v1", "https://example.org", "CC0", (src,))}
    rec = F.fetch("toy", tmp_path / "out", datasets=table)
    assert json.loads(rec.read_text())["files"]["toy.tar.gz"]["source"] == good.resolve().as_uri()
    assert not (tmp_path / "out" / "x.txt").exists() and (tmp_path / "out" / "tasks").is_dir()
    # only the other file: refused, naming the file and both checksums
    src = F.Source("toy.tar.gz", (other.resolve().as_uri(),), _sha(good))
    with pytest.raises(UserError) as err:
        F.fetch("toy", tmp_path / "out2", datasets={"toy": F.Dataset("toy", "v1", "https://e.org", "CC0", (src,))})
    assert "toy.tar.gz" in str(err.value) and _sha(other) in str(err.value) and _sha(good) in str(err.value)
    assert _left(tmp_path / "out2") == []
