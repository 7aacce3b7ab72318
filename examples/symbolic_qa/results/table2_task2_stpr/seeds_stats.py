"""Every seed of the per-role task-2 command (SYM_POSITIONS=role ENTITY_TYPE=0.3, 32,000 updates,
checkpoint_best) read from the reports kept in this folder: per-seed error % per file, mean ±
population std per file, and how many seeds meet every issue-23 part-1 target at once.
Usage (from anywhere): python seeds_stats.py > seeds_0_12.md; python seeds_stats.py --csv > per_seed.csv"""
import json
import os
import statistics
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
# report -> the seeds its checkpoints are, in the report's order (at_32k_6seeds_padfix reads the
# checkpoints of seeds 0, 1, 2, 3, 7, 8 in that order)
REPORTS = [
    ("seeds_0_1_2_3_7_8/qa_external.json", [0, 1, 2, 3, 7, 8]),
    ("seed4/qa_external.json", [4]),
    ("seed5/qa_external.json", [5]),
    ("seed6/qa_external.json", [6]),
    ("seed9/qa_external.json", [9]),
    ("seed10/qa_external.json", [10]),
    ("seed11/qa_external.json", [11]),
    ("seed12/qa_external.json", [12]),
]
KINDS = ["original", "rooms", "objects", "people", "all"]
TARGETS = {"original": 0.5, "rooms": 1.0, "objects": 22.8, "people": 18.9, "all": 5.0}


def kind_of(path: str) -> str:
    stem = os.path.basename(path)[: -len(".txt")]
    for k in KINDS[1:]:
        if stem.endswith("_" + k):
            return k
    return "original"


def read(report: str, seeds):
    rows = json.load(open(os.path.join(HERE, report)))
    checkpoints = list(dict.fromkeys(r["checkpoint"] for r in rows))
    if len(checkpoints) != len(seeds):
        raise SystemExit(f"{report}: {len(checkpoints)} checkpoints, but {len(seeds)} seeds listed for it")
    out = {s: {} for s in seeds}
    for r in rows:
        out[seeds[checkpoints.index(r["checkpoint"])]][kind_of(r["file"])] = r["error"]
    for s in seeds:
        if set(out[s]) != set(KINDS):
            raise SystemExit(f"{report}: seed {s} has files {sorted(out[s])}, expected {KINDS}")
    return out


def main():
    per_seed = {}
    for report, seeds in REPORTS:
        per_seed.update(read(report, seeds))
    seeds = sorted(per_seed)
    if "--csv" in sys.argv[1:]:
        print("seed," + ",".join(KINDS) + ",every_target")
        for s in seeds:
            ok = all(per_seed[s][k] <= TARGETS[k] for k in KINDS)
            print(f"{s}," + ",".join(f"{per_seed[s][k]:.1f}" for k in KINDS) + f",{'yes' if ok else 'no'}")
        return
    print("| seed | " + " | ".join(KINDS) + " | every target |")
    print("|---" * (len(KINDS) + 2) + "|")
    met = 0
    for s in seeds:
        ok = all(per_seed[s][k] <= TARGETS[k] for k in KINDS)
        met += ok
        print(f"| {s} | " + " | ".join(f"{per_seed[s][k]:.1f}" for k in KINDS) + f" | {'yes' if ok else 'no'} |")
    print("| mean ± pop. std | " + " | ".join(
        f"{statistics.fmean(v):.2f} ± {statistics.pstdev(v):.2f}"
        for v in ([per_seed[s][k] for s in seeds] for k in KINDS)) + f" | {met} of {len(seeds)} |")
    print("| target | " + " | ".join(f"≤ {TARGETS[k]}" for k in KINDS) + " | |")


if __name__ == "__main__":
    main()
