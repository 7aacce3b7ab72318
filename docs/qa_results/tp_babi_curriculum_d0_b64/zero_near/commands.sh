#!/usr/bin/env bash
# Do the short-offset rows of the task-1 relative-position table hold the stuck starts on task 2's
# second plateau? (docs/qa.md, "Which part of the start"; 2026-11-28, twenty-seventh session, CPU,
# one thread per run, the three at once on the 2-core box.) The one command with BUCKETS=64, 3
# task-2 layers and T2_RELATIVE=zero-near (the exact buckets, offsets |i - t| < 16, zeroed; the
# log-spaced ones kept) on the 3-layer run's data and task-1 checkpoints (../commands_rerun.sh):
# starts 0 (left the plateau with its table kept), 1 and 2 (stuck with it kept), task-2 seed =
# start seed, as in the kept-table run.
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
T2_UPDATES=20000 T2_RELATIVE=zero-near BUCKETS=64 configs/qa_tp_babi_curriculum.sh "$OUT" "0 1 2" 0 > "$OUT/run.log" 2>&1
for s in 0 1 2; do "$HERE/../../tp_babi_rel/keep_curriculum_seed.sh" "$OUT" "$s" "$HERE"; done
rm -f "$HERE"/t1_s*_valid.txt   # task 1 is the first run's: ../t1_sN_valid.txt
cut -d, -f1-9,12 "$OUT/report/qa_results.csv" > "$HERE/qa_results.csv"   # without the scratch paths
cp "$OUT/report/qa_table.md" "$HERE/qa_table.md"
