#!/usr/bin/env bash
# The zeroed relative table on the other generator seed: task 2 of generator seed 1, 64 buckets,
# 3 task-2 layers, from seed 2's task-1 checkpoint (which left the second plateau with its table
# kept: 0.32%), made by the one command with T2_RELATIVE=zero (docs/qa.md, "Which part of the
# start"; 2026-11-28, twenty-sixth session, CPU, one thread, beside a CI run for its first minutes).
#   commands.sh S2_OUT NEW_OUT      S2_OUT: ../commands.sh's ROOT/s2
set -euo pipefail
FIRST=${1:?S2_OUT}; OUT=${2:?NEW_OUT: a new folder}
HERE=$(cd "$(dirname "$0")" && pwd)
mkdir -p "$OUT/ck"
ln -s "$FIRST/data" "$OUT/data"
ln -s "$FIRST/ck/t1_s2" "$OUT/ck/t1_s2"
cp -p "$FIRST/ck/t1_s2.done" "$FIRST/ck/t1_s2.log" "$OUT/ck/"   # task 1 is done; its start is made here
T2_UPDATES=20000 BUCKETS=64 T2_RELATIVE=zero configs/qa_tp_babi_curriculum.sh "$OUT" 2 1 > "$OUT/run.log" 2>&1
"$HERE/../../../tp_babi_rel/keep_curriculum_seed.sh" "$OUT" 2 "$HERE"
rm "$HERE/t1_s2_valid.txt"   # task 1 is ../t1_s2_valid.txt
cp "$OUT/ck/t1_s2.to_task2.log" "$HERE/"
cut -d, -f1-9,12 "$OUT/report/qa_results.csv" > "$HERE/qa_results.csv"   # without the scratch paths
