#!/usr/bin/env bash
# The curriculum with task 2 from both warm-start tables and the lower valid loss kept, end to end
# on a generator seed no recipe was chosen on (generator seed 2; docs/qa.md, "Which part of the
# start", bullet "Both, and the lower valid loss kept"): `BUCKETS=64 T2_RELATIVE="keep zero"
# T2_UPDATES=30000 configs/qa_tp_babi_curriculum.sh OUT "0 1 2" 2` (started 2026-11-28,
# twenty-eighth session, code 7cc47ba, CPU, one thread per run: three task-1 runs, then six task-2 runs at once).
# Called again it continues: finished stages are skipped and interrupted ones resume.
#   commands.sh OUT
set -euo pipefail
OUT=${1:?OUT}
HERE=$(cd "$(dirname "$0")" && pwd)
mkdir -p "$OUT"
BUCKETS=64 T2_RELATIVE="keep zero" T2_UPDATES=30000 configs/qa_tp_babi_curriculum.sh "$OUT" "0 1 2" 2 >> "$OUT/run.log" 2>&1   # appends: a rerun keeps the earlier log
for s in 0 1 2; do
  "$HERE/../tp_babi_rel/keep_curriculum_seed.sh" "$OUT" "$s" "$HERE"   # t2_sS: the chosen arm
  for rel in keep zero; do "$HERE/../valid_lines.sh" "$OUT/ck/t2_s${s}_$rel.log" "$HERE/t2_s${s}_${rel}_valid.txt"; done
  cp "$OUT/ck/t2_s$s.choice" "$OUT/ck/t1_s$s.to_task2_zero.log" "$HERE/"
done
cut -d, -f1-9,12 "$OUT/report/qa_results.csv" > "$HERE/qa_results.csv"   # without the scratch paths
cp "$OUT/report/qa_table.md" "$HERE/"
