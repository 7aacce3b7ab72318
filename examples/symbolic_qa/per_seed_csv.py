"""One CSV row per (seed, test file) from a `nesyseq evaluate qa --babi-file` report.

    python per_seed_csv.py results/table2_task5_stpr/qa_external.json > results/table2_task5_stpr/per_seed.csv

The seed is read from the checkpoint's folder name (`..._sN/checkpoint_best.pt`); the kind of test
file (original, rooms, objects, people, all) from its name (`..._test_rooms.txt`, ...)."""
import csv
import json
import re
import sys

KINDS = ("rooms", "objects", "people", "all")


def kind_of(path: str) -> str:
    stem = path.rsplit("/", 1)[-1][: -len(".txt")]
    return next((k for k in KINDS if stem.endswith("_" + k)), "original")


def main(report: str) -> None:
    rows = json.load(open(report, encoding="utf-8"))
    out = csv.writer(sys.stdout, lineterminator="\n")
    out.writerow(["seed", "file", "questions", "error"])
    for r in rows:
        seed = re.search(r"_s(\d+)/[^/]*$", r["checkpoint"])
        if seed is None:
            raise SystemExit(f"{report}: no _sN seed in checkpoint path {r['checkpoint']!r}")
        out.writerow([int(seed.group(1)), kind_of(r["file"]), r["questions"], r["error"]])


if __name__ == "__main__":
    main(sys.argv[1])
