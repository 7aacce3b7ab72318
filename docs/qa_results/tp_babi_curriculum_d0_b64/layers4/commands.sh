#!/usr/bin/env bash
# Task 2 with 4 encoder layers instead of 3, on generator seed 0 with 64 relative buckets (docs/qa.md,
# "The curriculum as one command", bullet "Four encoder layers"; 2026-11-27, twenty-fourth
# session, code f99c5c7, CPU, one thread per seed, the three seeds at once on the 2-core box).
# Paired with the 3-layer run of ../commands_rerun.sh: the same data and the same task-1
# checkpoints (its OUT/data and OUT/ck/t1_sN, linked, with their .done markers), so only the warm
# start (grown 2 -> 4 layers) and task 2 are new.
#   commands.sh FIRST_OUT NEW_OUT
set -euo pipefail
FIRST=${1:?FIRST_OUT: the folder of the 3-layer run}
OUT=${2:?NEW_OUT: a new folder}
HERE=$(cd "$(dirname "$0")" && pwd)
mkdir -p "$OUT/ck"
ln -s "$FIRST/data" "$OUT/data"
for s in 0 1 2; do
  ln -s "$FIRST/ck/t1_s$s" "$OUT/ck/t1_s$s"
  cp -p "$FIRST/ck/t1_s$s.done" "$FIRST/ck/t1_s$s.log" "$OUT/ck/"
done
T2_RELATIVE=keep T2_UPDATES=20000 T2_LAYERS=4 BUCKETS=64 configs/qa_tp_babi_curriculum.sh "$OUT" "0 1 2" 0 > "$OUT/run.log" 2>&1
for s in 0 1 2; do "$HERE/../../tp_babi_rel/keep_curriculum_seed.sh" "$OUT" "$s" "$HERE"; done
rm "$HERE"/t1_s[012]_valid.txt   # task 1 is the first run's: ../t1_sN_valid.txt
cut -d, -f1-9 "$OUT/report/qa_results.csv" > "$HERE/qa_results.csv"   # without the scratch paths
cp "$OUT/report/qa_table.md" "$HERE/qa_table.md"
