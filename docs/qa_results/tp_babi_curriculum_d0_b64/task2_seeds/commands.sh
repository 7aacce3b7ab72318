#!/usr/bin/env bash
# Is the second plateau fixed by the task-1 start? Three new task-2 seeds (10, 11, 12) from the
# stuck seed 1's own task-1 checkpoint and warm start (docs/qa.md, "The curriculum as one
# command", bullet "Three task-2 seeds from one stuck start"; 2026-11-28, twenty-fifth session,
# code a330bc1, CPU, one thread per seed, the three seeds at once on the 2-core box).
# The one command with BUCKETS=64 and 3 task-2 layers (the default), on the 3-layer run's data and
# its seed-1 task-1 checkpoint (../commands_rerun.sh), linked under each new seed's name with its
# .done marker and its warm-start file (copied with its time, so the script does not remake it):
# only task 2's seed differs from the stuck run t2_s1.
#   commands.sh FIRST_OUT NEW_OUT
set -euo pipefail
FIRST=${1:?FIRST_OUT: the folder of the 3-layer run}
OUT=${2:?NEW_OUT: a new folder}
HERE=$(cd "$(dirname "$0")" && pwd)
mkdir -p "$OUT/ck"
ln -s "$FIRST/data" "$OUT/data"
for s in 10 11 12; do
  ln -s "$FIRST/ck/t1_s1" "$OUT/ck/t1_s$s"
  for f in done log to_task2.pt to_task2.log; do cp -p "$FIRST/ck/t1_s1.$f" "$OUT/ck/t1_s$s.$f"; done
done
T2_RELATIVE=keep T2_UPDATES=20000 BUCKETS=64 configs/qa_tp_babi_curriculum.sh "$OUT" "10 11 12" 0 > "$OUT/run.log" 2>&1
for s in 10 11 12; do "$HERE/../../tp_babi_rel/keep_curriculum_seed.sh" "$OUT" "$s" "$HERE"; done
rm "$HERE"/t1_s1[012]_valid.txt   # task 1 is the first run's seed 1: ../t1_s1_valid.txt
# the table again with the code that records each checkpoint's valid loss (ed50a9f), task 2 only
RUNS=()
for s in 10 11 12; do RUNS+=(--run "model=tp_transformer_tiny_sym,task=2,seed=$s,ckpt=$OUT/ck/t2_s$s/checkpoint_best.pt,data=$OUT/data/bin/task2"); done
python -m nesyseq.cli.main evaluate qa --out "$OUT/report2" --label "bAbI-style, data seed 0, task-1 start of seed 1" "${RUNS[@]}"
cut -d, -f1-9,12 "$OUT/report2/qa_results.csv" > "$HERE/qa_results.csv"   # without the scratch paths
cp "$OUT/report2/qa_table.md" "$HERE/qa_table.md"
