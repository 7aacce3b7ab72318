#!/usr/bin/env bash
# Which part of stuck seed 1's task-1 start holds task 2 on the second plateau? Two task-2 runs
# (seed 1, as the stuck run) from seed 1's warm start with its relative-position table replaced:
# by seed 0's (a start that left the plateau) and by zeros (the table's initial value). 3 task-2
# layers, 64 buckets, generator seed 0 (docs/qa.md, "Which part of the start"; 2026-11-28,
# twenty-fifth session, code c0e7aea, CPU, one thread each, the two at once).
#   commands.sh FIRST_OUT NEW_OUT
set -euo pipefail
FIRST=${1:?FIRST_OUT: the folder of the 3-layer run}
OUT=${2:?NEW_OUT: a new folder}
HERE=$(cd "$(dirname "$0")" && pwd)
for v in from_s0 zero; do
  mkdir -p "$OUT/$v/ck"
  ln -s "$FIRST/data" "$OUT/$v/data"
  ln -s "$FIRST/ck/t1_s1" "$OUT/$v/ck/t1_s1"
  cp -p "$FIRST/ck/t1_s1.done" "$FIRST/ck/t1_s1.log" "$OUT/$v/ck/"
done
python "$HERE/swap_table.py" "$FIRST/ck/t1_s1.to_task2.pt" "$OUT/from_s0/ck/t1_s1.to_task2.pt" --from "$FIRST/ck/t1_s0.to_task2.pt"
python "$HERE/swap_table.py" "$FIRST/ck/t1_s1.to_task2.pt" "$OUT/zero/ck/t1_s1.to_task2.pt" --zero
for v in from_s0 zero; do
  T2_RELATIVE=keep T2_UPDATES=20000 BUCKETS=64 configs/qa_tp_babi_curriculum.sh "$OUT/$v" 1 0 > "$OUT/$v/run.log" 2>&1 &
done
wait
