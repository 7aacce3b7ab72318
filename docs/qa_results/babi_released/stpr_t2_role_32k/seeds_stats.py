"""Every seed of the per-role task-2 command (SYM_POSITIONS=role ENTITY_TYPE=0.3, 32,000 updates,
checkpoint_best) read from the reports kept in this folder: per-seed error % per file, mean ±
population std per file, and how many seeds meet every issue-23 part-1 target at once.
Usage (from the repository root or anywhere): python seeds_stats.py > seeds_0_12.md"""
import json
import os
import statistics

HERE = os.path.dirname(os.path.abspath(__file__))
# report -> the seeds its checkpoints are, in the report's order (at_32k_6seeds_padfix reads the
# snapshots s0-s5 = seeds 0, 1, 2, 3, 7, 8: README.md of this folder)
REPORTS = [
    ("at_32k_6seeds_padfix/qa_external.json", [0, 1, 2, 3, 7, 8]),
    ("seeds_4_5_padfix/seed4/qa_external.json", [4]),
    ("seeds_4_5_padfix/seed5/qa_external.json", [5]),
    ("seeds_4_5_padfix/seed6/qa_external.json", [6]),
    ("seeds_9_10/seed9/qa_external.json", [9]),
    ("seeds_9_10/seed10/qa_external.json", [10]),
    ("seeds_11_12/seed11/qa_external.json", [11]),
    ("seeds_11_12/seed12/qa_external.json", [12]),
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
    print("| target (issue 23 part 1) | " + " | ".join(f"≤ {TARGETS[k]}" for k in KINDS) + " | |")


if __name__ == "__main__":
    main()
