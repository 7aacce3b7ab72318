#!/usr/bin/env bash
# Generator seed 0 with the curriculum and 64 relative buckets (docs/qa.md, "The curriculum as one
# command", bullet "Generator seed 0 with 64 buckets"; 2026-11-27, twenty-second session, code
# b88269a, CPU, one thread per seed, the three seeds at once beside other trainings on the 2-core
# box). The one command; its task-2 stage was stopped by hand for the end of the session (below),
# so the test errors are of each seed's checkpoint_best at that point, not at the budget.
set -euo pipefail
OUT=${1:?OUT}
HERE=$(cd "$(dirname "$0")" && pwd)
REL=$HERE/../tp_babi_rel
T2_RELATIVE=keep T2_UPDATES=20000 BUCKETS=64 configs/qa_tp_babi_curriculum.sh "$OUT" "0 1 2" 0 > "$OUT/run.log" 2>&1 || true   # stopped by hand
for s in 0 1 2; do
  "$REL/test_error.sh" "$OUT" t1_s$s "$OUT/data/bin/task1"   # no report: the run was stopped
  "$REL/keep_curriculum_seed.sh" "$OUT" "$s" "$HERE"
done
