#!/usr/bin/env bash
# Does a zeroed relative-position table at the warm start take every start off the second plateau?
# (docs/qa.md, "Which part of the start"; 2026-11-28, twenty-sixth session, CPU, one thread per
# run, the three at once on the 2-core box.) The one command with BUCKETS=64 and 3 task-2 layers
# on the 3-layer run's data and task-1 checkpoints (../commands_rerun.sh), each warm-start file
# made as the run made it and then given a zero table by ../start_swap/swap_table.py --zero:
#   seed 0:  seed 0's start (left the plateau with its table kept), task-2 seed 0;
#   seed 2:  seed 2's start (stuck with its table kept), task-2 seed 2;
#   seed 10: seed 1's start (stuck with its table kept for task-2 seeds 1, 10, 11, 12; left it
#            with a zero table for task-2 seed 1, ../start_swap/), task-2 seed 10.
#   commands.sh FIRST_OUT NEW_OUT
set -euo pipefail
FIRST=${1:?FIRST_OUT: the folder of the 3-layer run}
OUT=${2:?NEW_OUT: a new folder}
HERE=$(cd "$(dirname "$0")" && pwd)
mkdir -p "$OUT/ck"
ln -s "$FIRST/data" "$OUT/data"
for pair in 0:0 2:2 10:1; do
  s=${pair%%:*} from=${pair##*:}
  ln -s "$FIRST/ck/t1_s$from" "$OUT/ck/t1_s$s"
  cp -p "$FIRST/ck/t1_s$from.done" "$FIRST/ck/t1_s$from.log" "$OUT/ck/"
  [ "$s" = "$from" ] || for f in done log; do mv "$OUT/ck/t1_s$from.$f" "$OUT/ck/t1_s$s.$f"; done
  python "$HERE/../start_swap/swap_table.py" "$FIRST/ck/t1_s$from.to_task2.pt" "$OUT/ck/t1_s$s.to_task2.pt" --zero
done
T2_RELATIVE=keep T2_UPDATES=20000 BUCKETS=64 configs/qa_tp_babi_curriculum.sh "$OUT" "0 2 10" 0 > "$OUT/run.log" 2>&1
for s in 0 2 10; do "$HERE/../../tp_babi_rel/keep_curriculum_seed.sh" "$OUT" "$s" "$HERE"; done
rm -f "$HERE"/t1_s*_valid.txt   # task 1 is the first run's: ../t1_sN_valid.txt
cut -d, -f1-9,12 "$OUT/report/qa_results.csv" > "$HERE/qa_results.csv"   # without the scratch paths
cp "$OUT/report/qa_table.md" "$HERE/qa_table.md"
