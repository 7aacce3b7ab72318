"""``nesyseq prepare entailment``: Evans et al. (2018)'s logical entailment files, or our generator.

    nesyseq prepare entailment --source DIR --out data/entail     # their train.txt, validate.txt, test_*.txt
    nesyseq prepare entailment --source logical-entailment-dataset.zip --out data/entail   # the repository's archive
    nesyseq prepare entailment --generate --out data/entail --train-size 20000 --test-size 2000 --seed 0

Writes DIR/{split}.txt (``A,B,E``, read by ``--task entailment_pairs``) and DIR/heuristics.md, the
accuracy of the heuristic baselines H1-H4 and of their joint pattern (data_prep/entailment_data.py) on
every split.  The generator makes train, validate and test_easy/hard/big/massive; test_exam (Evans et
al.'s 100 textbook pairs) is only read from --source.
"""
import argparse


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--out", metavar="DIR", required=True, help="output directory")
    src = parser.add_mutually_exclusive_group(required=True)
    src.add_argument("--source", metavar="DIR|ARCHIVE",
                     help="Evans et al.'s train, validate, test_easy, test_hard, test_big, test_massive, test_exam "
                          "files (.txt optional): a folder holding them, their repository (data/), or a tar / zip "
                          "archive of either; missing test files are skipped")
    src.add_argument("--generate", action="store_true", help="generate the splits with our own generator")
    parser.add_argument("--seed", type=int, default=0, help="generator seed (same seed, same files)")
    parser.add_argument("--train-size", type=int, default=20000, help="generated training pairs")
    parser.add_argument("--valid-size", type=int, default=2000, help="generated validation pairs")
    parser.add_argument("--test-size", type=int, default=2000, help="generated pairs per test split")


def source_files(source: str, tmp: str) -> dict:
    """{split: path} of Evans et al.'s files in ``source``: a folder holding them (``.txt``
    optional), their repository (the files under ``data/``), or an archive of either (tar or zip:
    the members are copied to ``tmp``).  train and validate must be there (a missing one is an error
    naming it); the test files are optional.  A file whose sha256 is published (data_prep/fetch.py,
    docs/tpru.md) and differs gets a note on stderr: not the released file."""
    import hashlib
    import os
    import sys
    import tarfile
    import zipfile

    from nesyseq.data_prep.entailment_data import SPLITS
    from nesyseq.data_prep.fetch import DATASETS, UNKNOWN
    from nesyseq.common.errors import UserError

    published = {s.name: s.sha256 for s in DATASETS["entailment"].sources if s.sha256 != UNKNOWN}
    found = {}
    if os.path.isdir(source):
        folder = source
        if not any(os.path.isfile(os.path.join(source, n)) for sp in SPLITS for n in (sp, sp + ".txt")) \
                and os.path.isdir(os.path.join(source, "data")):
            folder = os.path.join(source, "data")
        for split in SPLITS:
            for name in (split + ".txt", split):
                if os.path.isfile(os.path.join(folder, name)):
                    found[split] = os.path.join(folder, name)
                    break
    elif os.path.isfile(source):
        try:
            if zipfile.is_zipfile(source):
                with zipfile.ZipFile(source) as z:
                    members = {m: (lambda m=m: z.read(m)) for m in z.namelist() if not m.endswith("/")}
                    found = _from_members(members, source, tmp, SPLITS)
            else:
                with tarfile.open(source) as tar:
                    members = {m.name: (lambda m=m: tar.extractfile(m).read()) for m in tar.getmembers() if m.isfile()}
                    found = _from_members(members, source, tmp, SPLITS)
        except (tarfile.TarError, zipfile.BadZipFile, OSError, EOFError) as exc:
            raise UserError(f"--source {source}: neither a folder nor a readable tar or zip archive ({exc})") from None
        folder = source
    else:
        raise UserError(f"--source {source}: no such file or folder")
    for need in ("train", "validate"):
        if need not in found:
            raise UserError(f"{os.path.join(folder, need + '.txt')}: no such file (prepare entailment needs train "
                            "and validate; the test files are optional)")
    for split, path in found.items():
        want = published.get(split + ".txt")
        if want:
            with open(path, "rb") as f:
                got = hashlib.sha256(f.read()).hexdigest()
            if got != want:
                print(f"note: {path}: sha256 {got} is not the published {split}.txt's {want}: not the released file",
                      file=sys.stderr)
    return found


def _from_members(members, archive: str, tmp: str, splits) -> dict:
    """The split files among an archive's ``members`` ({name: read()}), the ones under a ``data/``
    folder first, copied to ``tmp``."""
    import os
    from pathlib import PurePosixPath

    found = {}
    for name in sorted(members, key=lambda n: (PurePosixPath(n).parent.name != "data", n)):
        base = PurePosixPath(name).name
        split = base[:-4] if base.endswith(".txt") else base
        if split in splits and split not in found:
            path = os.path.join(tmp, split + ".txt")
            with open(path, "wb") as f:
                f.write(members[name]())
            found[split] = f"{path}"
    return found


def _table(rows) -> str:
    from nesyseq.data_prep.entailment_data import HEURISTICS

    lines = ["| split | pairs | entailed % | " + " | ".join(HEURISTICS) + " | H1-H4 joint (fit on train) |",
             "|---|---|---|" + "---|" * (len(HEURISTICS) + 1)]
    for split, exs, h, joint in rows:
        pos = 100.0 * sum(e.label for e in exs) / max(len(exs), 1)
        lines.append(f"| {split} | {len(exs)} | {pos:.1f} | " + " | ".join(f"{x:.1f}" for x in h)
                     + f" | {joint:.1f} |")
    return "\n".join(lines) + "\n"


def run(args) -> int:
    import dataclasses
    import os

    from nesyseq.data_prep.entailment_data import (DEFAULT_SPECS, FormulaError, generate_splits,
                                           heuristic_accuracy, joint_heuristic_accuracy, read_file,
                                           write_file)
    from nesyseq.common.atomic import atomic_write_bytes
    from nesyseq.common.errors import UserError

    if args.generate:
        sizes = {"train": args.train_size, "validate": args.valid_size}
        specs = {k: dataclasses.replace(v, size=sizes.get(k, args.test_size)) for k, v in DEFAULT_SPECS.items()}
        for name in ("train_size", "valid_size", "test_size"):
            if getattr(args, name) < 2:
                raise UserError(f"--{name.replace('_', '-')} must be at least 2")
        splits = generate_splits(specs, seed=args.seed)
    else:
        import tempfile

        splits = {}
        with tempfile.TemporaryDirectory(prefix="nesyseq-entailment-") as tmp:
            for split, path in source_files(args.source, tmp).items():
                try:
                    splits[split] = read_file(path)
                except FormulaError as err:
                    raise UserError(str(err)) from None
    os.makedirs(args.out, exist_ok=True)
    rows = []
    for split, exs in splits.items():
        write_file(os.path.join(args.out, f"{split}.txt"), exs)
        rows.append((split, exs, heuristic_accuracy(exs), joint_heuristic_accuracy(splits["train"], exs)))
    table = _table(rows)
    atomic_write_bytes(os.path.join(args.out, "heuristics.md"), table.encode("utf-8"))
    print(table, end="")
    print(f"wrote {', '.join(f'{s}.txt' for s in splits)} to {args.out}")
    return 0
