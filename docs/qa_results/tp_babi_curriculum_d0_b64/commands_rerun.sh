#!/usr/bin/env bash
# The task-2 stage of commands.sh, run again to its budget (2026-11-27, twenty-third session, code
# 3d4f2b7 = b88269a for everything this runs; CPU, one thread per seed, the three seeds at once,
# nothing else training on the 2-core box). Same machine as the first run, so its data and task-1
# stage (OUT/ck/t1_sN, .done, .to_task2.pt) were kept and are skipped by the script. The stopped
# task-2 stage has no checkpoint_last.pt to resume from (qa_train), so its folders were moved away
# (the script refuses an interrupted stage) and task 2 ran from the same warm start again.
set -euo pipefail
OUT=${1:?OUT: the folder of the first run}
HERE=$(cd "$(dirname "$0")" && pwd)
mkdir -p "$OUT/stopped_11256"
mv "$OUT"/ck/t2_s[012] "$OUT"/ck/t2_s[012].log "$OUT"/ck/t2_s[012].gen "$OUT/run.log" "$OUT/stopped_11256/"
T2_RELATIVE=keep T2_UPDATES=20000 BUCKETS=64 configs/qa_tp_babi_curriculum.sh "$OUT" "0 1 2" 0 > "$OUT/run.log" 2>&1
for s in 0 1 2; do "$HERE/../tp_babi_rel/keep_curriculum_seed.sh" "$OUT" "$s" "$HERE"; done
cut -d, -f1-9 "$OUT/report/qa_results.csv" > "$HERE/qa_results.csv"   # without the scratch paths
cp "$OUT/report/qa_table.md" "$HERE/qa_table.md"
