"""``nesyseq fetch NAME --out DIR``: an external dataset from its source, verified and extracted.

    nesyseq fetch --list                      # every dataset: version, URL, sha256
    nesyseq fetch babi --out data/babi        # -> data/babi/tasks_1-20_v1-2/en-10k/qa2_..._train.txt
    nesyseq fetch babi --out data/babi --from ~/Downloads/tasks_1-20_v1-2.tar.gz
    nesyseq fetch babi --out data/babi --from ~/babi/en-10k     # an unpacked copy, or only some tasks' files

Each file is downloaded to a temporary name inside ``--out``, its sha256 computed while it is
written and compared with the table below; only a matching file is used (a URL that fails or
serves another file is followed by the next one listed, if any).  An archive is
extracted into a temporary folder inside ``--out`` (tar's "data" filter: no absolute paths, no
``..``, no links out of the folder) and its top-level entries are then renamed into place; a plain
file is renamed into place.  A mismatch, a failed download or a bad archive is one line naming the
file (and, for a mismatch, both checksums) and leaves nothing behind in ``--out``.  ``--from FILE``
verifies a copy obtained another way (matched to the table by its file name; for a one-file
dataset any name) and extracts it the same way; files not given with ``--from`` are downloaded.
``--from DIR`` gives every file of the table that DIR holds by name (or DIR/data/, a repository's
layout: the entailment files, WMT's archives).  For bAbI, ``--from DIR`` may also be an unpacked
copy: the folder holding ``tasks_1-20_v1-2/``, that folder, one set's folder (``en-10k``), or a
folder holding only some tasks' files; they are copied to ``OUT/tasks_1-20_v1-2/SET/``, each file
whose md5 docs/qa.md publishes checked against it (a mismatch writes nothing), the md5 of every
file recorded.
Where no published checksum was found the table says ``unknown``: the sha256 computed is printed
and the file is refused unless ``--accept-checksum`` is given.  ``OUT/fetch_NAME.json`` records
what was fetched (URL or local file, sha256, size); a dataset already fetched into ``--out``
with the same checksums is left as it is.

Where each checksum comes from (published by others, not computed here):

* bAbI: ``datasets/babi_qa/dataset_infos.json`` of huggingface/datasets (``download_checksums``
  of ``tasks_1-20_v1-2.tar.gz``, 15,719,851 bytes; their copy is the one on Jason Weston's page,
  our first URL Facebook's mirror of the same release);
* logical entailment: the blobs of google-deepmind/logical-entailment-dataset at commit
  159e768 (the files the raw URLs serve); ``train.txt`` (about 100k lines) was not available to
  hash, so it is ``unknown``;
* WMT: the ``fetchurl`` stages of stagedml/stagedml (``stagedml/stages/fetchwmt.py``); the WMT'14
  ``test-full.tgz`` (newstest2014) has no published sha256 we found: ``unknown``.
"""
from __future__ import annotations

import argparse
import hashlib
import json
import os
import shutil
import sys
import tarfile
import tempfile
import time
import urllib.request
from dataclasses import dataclass, field
from pathlib import Path
from typing import Dict, List, Optional, Sequence, Tuple

from nesyseq.common.errors import UserError

UNKNOWN = "unknown"
CHUNK = 1 << 20


@dataclass(frozen=True)
class Source:
    name: str                  # the file's name (what --from FILE is matched on)
    urls: Tuple[str, ...]      # tried in order until one serves the file of this sha256
    sha256: str                # 64 hex digits, or UNKNOWN
    size: Optional[int] = None
    extract: bool = True       # an archive (extracted into --out) or a plain file (put in --out)


@dataclass(frozen=True)
class Dataset:
    name: str
    version: str
    homepage: str
    licence: str
    sources: Tuple[Source, ...]
    layout: str = ""           # what --out holds afterwards
    notes: List[str] = field(default_factory=list)


_ENTAILMENT_COMMIT = "159e76834434c0d29b3588ce8b94e6004697f455"
_ENTAILMENT_RAW = ("https://raw.githubusercontent.com/google-deepmind/logical-entailment-dataset/"
                   f"{_ENTAILMENT_COMMIT}/data/")
_ENTAILMENT_FILES = (
    ("train.txt", UNKNOWN, None),
    ("validate.txt", "ca97676797f3abd89376561038fb3005af3eda252025d2175ac44fda6bd40061", 318010),
    ("test_easy.txt", "63e9e05e11c124c26c13489a3db22c418d3d88d74e558787ce50f94016d6c014", 320089),
    ("test_hard.txt", "2f8af9b70c9b96597e06ad271c97eea1e0223c6bebc6e97cdf7b6f09e9a94d26", 715803),
    ("test_big.txt", "9e581ae741318e5cf363fe0693bc62006dda1443a9e9584a7e59863f864df2f3", 272084),
    ("test_massive.txt", "a336406241e82d29ce88650a5b64c40f0320fa37f84244d144727fcc24221d2e", 439304),
    ("test_exam.txt", "0ea9cdc5ed7df91a805c78f2eeaa620626d0e1a054065f2e7beb48acbe5f6383", 2655),
)

DATASETS: Dict[str, Dataset] = {
    "babi": Dataset(
        name="babi", version="bAbI tasks 1-20 v1.2 (tasks_1-20_v1-2)",
        homepage="https://research.facebook.com/downloads/babi/", licence="CC BY 3.0",
        sources=(Source("tasks_1-20_v1-2.tar.gz",
                        ("https://dl.fbaipublicfiles.com/babi/tasks_1-20_v1-2.tar.gz",
                         "http://www.thespermwhale.com/jaseweston/babi/tasks_1-20_v1-2.tar.gz"),
                        "0364ebde659f14d11bc21744516c5ec49d3d06cb692733f66680771244998898", 15719851),),
        layout="OUT/tasks_1-20_v1-2/{en,en-10k,...}/qa{N}_*_{train,test}.txt (nesyseq prepare qa --source)"),
    "entailment": Dataset(
        name="entailment", version=f"google-deepmind/logical-entailment-dataset at {_ENTAILMENT_COMMIT[:7]} (2018-04-16)",
        homepage="https://github.com/google-deepmind/logical-entailment-dataset",
        licence="see the repository (no licence file at that commit)",
        sources=tuple(Source(f, (_ENTAILMENT_RAW + f,), sha, size, extract=False) for f, sha, size in _ENTAILMENT_FILES),
        layout="OUT/{train,validate,test_easy,test_hard,test_big,test_massive,test_exam}.txt "
               "(nesyseq prepare entailment --source)"),
    "wmt14_en_de": Dataset(
        name="wmt14_en_de", version="WMT'14 en-de: Europarl v7, Common Crawl, News Commentary v12, "
                                    "newstest2013 (dev), newstest2014 (test)",
        homepage="https://www.statmt.org/wmt14/translation-task.html", licence="research use (see the WMT pages)",
        sources=(
            Source("training-parallel-europarl-v7.tgz", ("http://www.statmt.org/wmt13/training-parallel-europarl-v7.tgz",),
                   "0224c7c710c8a063dfd893b0cc0830202d61f4c75c17eb8e31836103d27d96e7"),
            Source("training-parallel-commoncrawl.tgz", ("http://www.statmt.org/wmt13/training-parallel-commoncrawl.tgz",),
                   "c7a74e2ea01ac6c920123108627e35278d4ccb5701e15428ffa34de86fa3a9e5"),
            Source("training-parallel-nc-v12.tgz",
                   ("http://data.statmt.org/wmt17/translation-task/training-parallel-nc-v12.tgz",),
                   "2b45f30ef1d550d302fd17dd3a5cbe19134ccc4c2cf50c2dae534aee600101a2"),
            Source("dev.tgz", ("http://data.statmt.org/wmt17/translation-task/dev.tgz",),
                   "9d5ff04a28496b7796904ea65e50e3837bab14dbdca88b1e063105f17513dca9"),
            Source("test-full.tgz", ("http://statmt.org/wmt14/test-full.tgz",), UNKNOWN),
        ),
        layout="OUT/training/{europarl-v7,news-commentary-v12}.de-en.{en,de}, OUT/commoncrawl.de-en.{en,de}, "
               "OUT/dev/newstest2013.{en,de}, OUT/test-full/newstest2014-deen-{src,ref}.*.sgm "
               "(nesyseq prepare wmt --train ... --valid ... --test ...)"),
}


# -- verification and extraction -----------------------------------------------------------------

def sha256_of(path: Path) -> str:
    h = hashlib.sha256()
    with open(path, "rb") as f:
        while block := f.read(CHUNK):
            h.update(block)
    return h.hexdigest()


def _download(url: str, dest: Path) -> str:
    """``url`` streamed to ``dest``; returns its sha256."""
    h = hashlib.sha256()
    with urllib.request.urlopen(url, timeout=60) as resp, open(dest, "wb") as out:
        while block := resp.read(CHUNK):
            h.update(block)
            out.write(block)
    return h.hexdigest()


def _download_verified(source: Source, dest: Path) -> Tuple[str, str]:
    """The first URL of ``source`` whose file matches its sha256 (any file, for UNKNOWN), in
    ``dest``; returns (url, sha256).  A failed download or another file tries the next URL."""
    problems = []
    for url in source.urls:
        try:
            got = _download(url, dest)
        except (OSError, ValueError) as exc:   # URLError and HTTPError are OSErrors
            problems.append(f"{url}: {exc}")
            continue
        if source.sha256 in (UNKNOWN, got):
            return url, got
        problems.append(f"{url}: sha256 {got} does not match the expected {source.sha256}")
        dest.unlink()
    raise UserError(f"{source.name}: {'; '.join(problems)}; nothing written "
                    f"(a copy obtained another way: --from FILE)")


def _check(source: Source, got: str, where: str, accept_unknown: bool) -> None:
    if source.sha256 == UNKNOWN:
        if not accept_unknown:
            raise UserError(f"{source.name} ({where}): sha256 {got}; no published checksum to compare it "
                            f"with, so it is not used (check it yourself, then rerun with --accept-checksum)")
        print(f"{source.name}: sha256 {got} accepted without a published checksum (--accept-checksum)",
              file=sys.stderr)
    elif got != source.sha256:
        raise UserError(f"{source.name} ({where}): sha256 {got} does not match the expected {source.sha256}; "
                        "nothing written")


def _extract(archive: Path, into: Path) -> None:
    try:
        with tarfile.open(archive) as tar:
            if hasattr(tarfile, "data_filter"):
                tar.extractall(into, filter="data")
            else:   # Python without extraction filters: refuse what the data filter refuses
                for m in tar.getmembers():
                    target = (into / m.name).resolve()
                    if (os.path.isabs(m.name) or not str(target).startswith(str(into.resolve()) + os.sep)
                            or m.issym() or m.islnk() or m.isdev()):
                        raise tarfile.TarError(f"unsafe member {m.name!r}")
                tar.extractall(into)
    except (tarfile.TarError, OSError, EOFError) as exc:
        raise UserError(f"{archive.name}: cannot extract ({exc}); nothing written") from None


def _place(staging: Path, out: Path) -> List[str]:
    """Rename every top-level entry of ``staging`` into ``out``; an entry already there is refused
    (before anything is moved)."""
    entries = sorted(staging.iterdir())
    clash = [e.name for e in entries if (out / e.name).exists() or (out / e.name).is_symlink()]
    if clash:
        raise UserError(f"{out / clash[0]} exists already; remove it or choose another --out (nothing written)")
    for e in entries:
        os.replace(e, out / e.name)
    return [e.name for e in entries]


def _record_path(out: Path, name: str) -> Path:
    return out / f"fetch_{name}.json"


def fetch(name: str, out, from_files: Sequence[str] = (), accept_checksum: bool = False,
          datasets: Optional[Dict[str, Dataset]] = None) -> Path:
    """Fetch dataset ``name`` into ``out``; returns the record file.  See the module docstring."""
    from nesyseq.common.atomic import atomic_write_text

    table = DATASETS if datasets is None else datasets
    if name not in table:
        raise UserError(f"fetch {name}: no such dataset (known: {', '.join(sorted(table))})")
    ds = table[name]
    out = Path(out).resolve()
    local, folders = _match_from(ds, from_files)
    record_file = _record_path(out, name)
    if folders:
        if local:
            raise UserError(f"--from: give the {ds.sources[0].name} archive or unpacked folders, not both")
        return _fetch_babi_folders(ds, folders, out, record_file)
    if record_file.is_file():
        old = json.loads(record_file.read_text())
        if all(old.get("files", {}).get(s.name, {}).get("sha256") not in (None, "") and
               (s.sha256 == UNKNOWN or old["files"][s.name]["sha256"] == s.sha256) for s in ds.sources):
            print(f"{name}: already fetched into {out} ({record_file.name}); nothing to do")
            return record_file
    out.mkdir(parents=True, exist_ok=True)
    work = Path(tempfile.mkdtemp(prefix=f".fetch-{name}-", dir=out))
    files = {}
    try:
        staging = work / "staging"
        staging.mkdir()
        for src in ds.sources:
            if src.name in local:
                path, where = Path(local[src.name]), f"--from {local[src.name]}"
                got, origin = sha256_of(path), str(Path(local[src.name]).resolve())
            else:
                path = work / src.name
                origin, got = _download_verified(src, path)
                where = origin
            _check(src, got, where, accept_checksum)
            if src.extract:
                _extract(path, staging)
            elif path.parent == work:
                os.replace(path, staging / src.name)
            else:
                shutil.copyfile(path, staging / src.name)
            files[src.name] = {"source": origin, "sha256": got, "expected_sha256": src.sha256,
                               "bytes": (path if path.exists() else staging / src.name).stat().st_size}
            if path.parent == work and path.exists():
                path.unlink()   # the archive itself is not kept
        placed = _place(staging, out)
        record = {"dataset": name, "version": ds.version, "homepage": ds.homepage, "licence": ds.licence,
                  "fetched": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()), "files": files, "placed": placed}
        atomic_write_text(record_file, json.dumps(record, indent=1) + "\n")
    finally:
        shutil.rmtree(work, ignore_errors=True)
    for p in placed:
        print(out / p)
    return record_file


def _match_from(ds: Dataset, from_files: Sequence[str]) -> Tuple[Dict[str, str], List[Path]]:
    """({source name: local file}, [unpacked bAbI folders]) of the ``--from`` arguments.  A folder
    gives each of the dataset's files it holds by name (also under ``data/``, a repository's
    layout); for bAbI a folder without the archive is an unpacked copy (:func:`_babi_folder_files`)."""
    local: Dict[str, str] = {}
    folders: List[Path] = []
    names = [s.name for s in ds.sources]

    def take(key, path, given):
        if key in local:
            raise UserError(f"--from {given}: {key} given twice")
        local[key] = str(path)

    for f in from_files or ():
        p = Path(f)
        if p.is_dir():
            hits = {}
            for n in names:
                for cand in (p / n, p / "data" / n):
                    if cand.is_file() and n not in hits:
                        hits[n] = cand
            if hits:
                for n, cand in hits.items():
                    take(n, cand, f)
            elif ds.name == "babi":
                folders.append(p)
            else:
                raise UserError(f"--from {f}: holds none of {ds.name}'s files ({', '.join(names)})")
            continue
        if not p.is_file():
            raise UserError(f"--from {f}: no such file or folder")
        key = names[0] if len(names) == 1 else p.name
        if key not in names:
            raise UserError(f"--from {f}: {ds.name} has no file named {p.name} (its files: {', '.join(names)})")
        take(key, f, f)
    return local, folders


def _babi_folder_files(folder: Path) -> Dict[str, Path]:
    """{SET/FILE: path} of the bAbI files of an unpacked copy: the folder holding
    ``tasks_1-20_v1-2/``, that folder itself, or one set's folder.  A folder of task files not named
    after a set is taken as ``en-10k`` only when one of its files has en-10k's published md5."""
    from nesyseq.data_prep.qa_source import RELEASE, RELEASE_MD5, SETS, _names_of_babi_files

    root = folder / RELEASE if (folder / RELEASE).is_dir() else folder
    pairs = [(s, root / s) for s in SETS if (root / s).is_dir()]
    if not pairs:
        if not _names_of_babi_files(os.listdir(folder)):
            raise UserError(f"--from {folder}: no bAbI files (qa{{N}}_*_{{train,test}}.txt), no {RELEASE}/ folder "
                            f"and no set folder ({', '.join(SETS)})")
        if folder.name in SETS:
            pairs = [(folder.name, folder)]
        elif any(RELEASE_MD5.get(f"en-10k/{n}") == hashlib.md5((folder / n).read_bytes()).hexdigest()
                 for n in os.listdir(folder) if f"en-10k/{n}" in RELEASE_MD5):
            pairs = [("en-10k", folder)]
        else:
            raise UserError(f"--from {folder}: which set of the bAbI release are its files? None has a published md5, "
                            f"so put them in a folder named after their set ({', '.join(SETS)})")
    files = {}
    for set_name, d in pairs:
        for n in sorted(os.listdir(d)):
            if _names_of_babi_files([n]) and (d / n).is_file():
                files[f"{set_name}/{n}"] = d / n
    if not files:
        raise UserError(f"--from {folder}: no bAbI files in {', '.join(str(d) for _, d in pairs)}")
    return files


def _fetch_babi_folders(ds: Dataset, folders: List[Path], out: Path, record_file: Path) -> Path:
    """Unpacked bAbI copies into ``OUT/tasks_1-20_v1-2/SET/``, each file with a published md5
    checked (a mismatch refuses them all: nothing written).  A file already there with the same
    bytes is kept; one with other bytes is refused.  The record lists every file and its md5."""
    from nesyseq.common.atomic import atomic_write_bytes, atomic_write_text
    from nesyseq.data_prep.qa_source import RELEASE, BabiFile, md5_check

    files: Dict[str, Tuple[Path, bytes, dict]] = {}
    for folder in folders:
        for rel, path in _babi_folder_files(folder).items():
            data = path.read_bytes()
            check = md5_check(BabiFile(0, "", str(path), rel, data), strict=True)
            if rel in files and files[rel][1] != data:
                raise UserError(f"--from: {rel} given twice with different contents ({files[rel][0]}, {path})")
            files[rel] = (path, data, check)
    todo = []
    for rel, (path, data, _) in files.items():
        dest = out / RELEASE / rel
        if dest.exists():
            if not dest.is_file() or dest.read_bytes() != data:
                raise UserError(f"{dest} exists already with other contents than {path}; remove it or choose "
                                "another --out (nothing written)")
            continue
        todo.append((dest, data))
    for dest, data in todo:
        dest.parent.mkdir(parents=True, exist_ok=True)
        atomic_write_bytes(dest, data)
    old = {}
    if record_file.is_file():
        try:
            old = json.loads(record_file.read_text()).get("files", {})
        except ValueError:
            old = {}
    record = {"dataset": ds.name, "version": ds.version, "homepage": ds.homepage, "licence": ds.licence,
              "fetched": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()),
              "from_folders": [str(f.resolve()) for f in folders],
              "files": dict(old, **{f"{RELEASE}/{rel}": {"source": str(path.resolve()), "md5": c["md5"],
                                                          "published_md5": c["published_md5"]}
                                    for rel, (path, _, c) in files.items()})}
    out.mkdir(parents=True, exist_ok=True)
    atomic_write_text(record_file, json.dumps(record, indent=1) + "\n")
    verified = sum(1 for *_, c in files.values() if c["verified"])
    sets = sorted({rel.split("/")[0] for rel in files})
    print(f"{len(files)} bAbI files ({len(todo)} new) in {', '.join(str(out / RELEASE / s) for s in sets)}: "
          f"{verified} checked against their published md5, {len(files) - verified} without one (md5 recorded "
          f"in {record_file.name})")
    return record_file


def listing(datasets: Optional[Dict[str, Dataset]] = None) -> str:
    table = DATASETS if datasets is None else datasets
    lines = []
    for ds in table.values():
        lines.append(f"{ds.name}: {ds.version}; {ds.homepage}; licence: {ds.licence}")
        for s in ds.sources:
            lines.append(f"  {s.name}  sha256 {s.sha256}  {' | '.join(s.urls)}")
        if ds.layout:
            lines.append(f"  -> {ds.layout}")
    return "\n".join(lines) + "\n"


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("name", nargs="?", help=f"the dataset: {', '.join(DATASETS)}")
    parser.add_argument("--out", metavar="DIR", help="where the files go")
    parser.add_argument("--from", dest="from_files", action="append", default=[], metavar="FILE|DIR",
                        help="a copy obtained another way: verified by its sha256, then extracted (repeatable); "
                             "a folder gives the files it holds by name, and for babi may be an unpacked copy "
                             "(the whole release, one set's folder, or only some tasks' files)")
    parser.add_argument("--accept-checksum", action="store_true",
                        help="use a file whose table entry has no published sha256 (the one computed is printed)")
    parser.add_argument("--list", action="store_true", help="print every dataset's version, URLs and sha256")


def run(args) -> int:
    if args.list:
        print(listing(), end="")
        return 0
    if not args.name or not args.out:
        raise UserError("fetch needs NAME and --out DIR (or --list)")
    fetch(args.name, args.out, args.from_files, args.accept_checksum)
    return 0
