#!/usr/bin/env bash
# Does a strongly negative relative bias at offset ±4 hold a stuck task-1 start on task 2's second
# plateau? (docs/qa.md, bullet "What holds a stuck start"; 2026-11-28, thirtieth session, CPU, one
# thread per run, the two at once on the 2-core box.) The two stuck starts of 64 buckets measured
# end to end with the kept table (generator seed 0's start 1, generator seed 2's start 1), each
# from its kept-table warm start with only the rows of offsets +4 and -4 set to 0, then task 2 with
# the one command (BUCKETS=64, T2_RELATIVE=keep: the start file is used as it is, having no .opts)
# and the kept arm's task-2 seed, 30,000 updates: paired with the kept arm, the two rows the only
# difference.
#   commands.sh D0_OUT D2_OUT NEW_OUT
#   D0_OUT: the folder of tp_babi_curriculum_d0_b64/commands_rerun.sh (t1_s1.to_task2.pt kept table)
#   D2_OUT: the folder of tp_babi_curriculum_d2/commands.sh (t1_s1.to_task2_keep.pt)
set -euo pipefail
D0=${1:?D0_OUT} D2=${2:?D2_OUT} OUT=${3:?NEW_OUT}
HERE=$(cd "$(dirname "$0")" && pwd)
cd "$HERE/../../.."
PY=${PY:-python}
# run FIRST START DATA_SEED NEW: task 1 linked from FIRST, the start with offsets ±4 zeroed, task 2
run() {
  local first=$1 start=$2 dseed=$3 new=$4
  mkdir -p "$new/ck"
  ln -sfn "$first/data" "$new/data"
  ln -sfn "$first/ck/t1_s1" "$new/ck/t1_s1"
  cp -p "$first/ck/t1_s1.done" "$first/ck/t1_s1.log" "$new/ck/"
  [ -f "$new/ck/t1_s1.to_task2.pt" ] ||
    PYTHONPATH=. $PY "$HERE/zero_offsets.py" "$start" "$new/ck/t1_s1.to_task2.pt" 4 > "$new/ck/t1_s1.to_task2.log"
  BUCKETS=64 T2_RELATIVE=keep T2_UPDATES=30000 configs/qa_tp_babi_curriculum.sh "$new" 1 "$dseed" >> "$new/run.log" 2>&1
}
run "$D0" "$D0/ck/t1_s1.to_task2.pt" 0 "$OUT/d0" &
p0=$!
run "$D2" "$D2/ck/t1_s1.to_task2_keep.pt" 2 "$OUT/d2" &
p2=$!
wait "$p0"; wait "$p2"
for g in 0 2; do
  "$HERE/../valid_lines.sh" "$OUT/d$g/ck/t2_s1.log" "$HERE/d${g}_t2_s1_valid.txt"
  cp "$OUT/d$g/ck/t1_s1.to_task2.log" "$HERE/d${g}_zeroed_rows.txt"
  cut -d, -f1-9,12 "$OUT/d$g/report/qa_results.csv" > "$HERE/d${g}_qa_results.csv"   # without the scratch paths
done
