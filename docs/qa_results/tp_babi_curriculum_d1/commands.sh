#!/usr/bin/env bash
# The runs of docs/qa.md "The curriculum as one command, on another generator seed"
# (2026-11-26, sixteenth session, CPU, the three seeds at once on the 2-core box, one thread each).
# OUT is any scratch folder; the repository root is the working directory.
set -euo pipefail
OUT=${1:?OUT}
HERE=$(cd "$(dirname "$0")" && pwd)
REL=$HERE/../tp_babi_rel
# generator seed 1 (every earlier transformer run used 0); model seeds 0, 1, 2; the defaults:
# 10 names, 10,000 train / 1,000 test stories, task 1 up to 30,000 updates, task 2 up to 20,000,
# each stage stopped once a saved checkpoint's valid loss is <= 0.008 bits
BUCKETS=32 T2_RELATIVE=keep T2_UPDATES=20000 configs/qa_tp_babi_curriculum.sh "$OUT" "0 1 2" 1
# kept here: each stage's per-epoch valid lines, and what the task-2 answers are
for s in 0 1 2; do "$REL/keep_curriculum_seed.sh" "$OUT" "$s" "$HERE"; done
cp "$OUT/report/qa_table.md" "$HERE/"
cut -d, -f1-9 "$OUT/report/qa_results.csv" > "$HERE/qa_results.csv"   # without the scratch paths
