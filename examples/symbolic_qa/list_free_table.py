"""The list-free tables of README.md from the committed per-run reports.

    python examples/symbolic_qa/list_free_table.py results/list_free      # markdown, one row per recipe and task
    python examples/symbolic_qa/list_free_table.py results/list_free --csv > results/list_free/per_seed.csv

Each run is ``RESULTS/t{TASK}/{RECIPE}/s{SEED}/qa_external.csv``, the report of
``nesyseq evaluate qa --babi-file ...``.  A file's column is its kind: the released test
(``original``), its zero-shot renamings (``rooms``, ``objects``, ``people``, ``all``) and, on task 2,
the generated all-new files ``gen_p4_q5`` (bAbI's shape) and ``gen_p8_q13`` (twice the people and
the length).  Mean ± population std over the seeds, as the other tables of README.md.
"""
import csv
import pathlib
import statistics
import sys

COLUMNS = ("original", "rooms", "objects", "people", "all", "gen_p4_q5", "gen_p8_q13")
TARGETS = {"original": 0.5, "rooms": 1.0, "objects": 2.0, "people": 2.0, "all": 2.0}   # the acceptance columns


def column(path: str) -> str:
    for gen in ("gen_p4_q5", "gen_p8_q13"):
        if f"/{gen}/" in path:
            return gen
    stem = path.rsplit("/", 1)[-1][: -len(".txt")]
    return next((k for k in ("rooms", "objects", "people", "all") if stem.endswith("_" + k)), "original")


def runs(root: pathlib.Path):
    """(task, recipe, seed, {column: error}) of every run under ``root``."""
    for report in sorted(root.glob("t*/*/s*/qa_external.csv")):
        seed_dir, recipe_dir, task_dir = report.parent, report.parent.parent, report.parent.parent.parent
        with open(report, encoding="utf-8") as f:
            errors = {column(r["file"]): float(r["error"]) for r in csv.DictReader(f)}
        yield int(task_dir.name[1:]), recipe_dir.name, int(seed_dir.name[1:]), errors


def main(argv) -> None:
    root = pathlib.Path(argv[0])
    rows = list(runs(root))
    if not rows:
        raise SystemExit(f"{root}: no t*/RECIPE/s*/qa_external.csv")
    if "--csv" in argv:
        out = csv.writer(sys.stdout, lineterminator="\n")
        out.writerow(["task", "recipe", "seed", *COLUMNS, "every_target"])
        for task, recipe, seed, e in rows:
            hit = all(e[c] <= t for c, t in TARGETS.items() if c in e)
            out.writerow([task, recipe, seed, *[e.get(c, "") for c in COLUMNS], "yes" if hit else "no"])
        return
    print("| task | recipe | seeds | " + " | ".join(COLUMNS) + " |")
    print("|---|---|---|" + "---|" * len(COLUMNS))
    groups = {}
    for task, recipe, seed, e in rows:
        groups.setdefault((task, recipe), []).append((seed, e))
    for (task, recipe), members in sorted(groups.items()):
        cells = []
        for c in COLUMNS:
            vals = [e[c] for _, e in members if c in e]
            cells.append("–" if not vals else f"{statistics.mean(vals):.2f} ± {statistics.pstdev(vals):.2f}")
        seeds = ",".join(str(s) for s, _ in sorted(members, key=lambda m: m[0]))
        print(f"| {task} | {recipe} | {seeds} | " + " | ".join(cells) + " |")


if __name__ == "__main__":
    main(sys.argv[1:])
