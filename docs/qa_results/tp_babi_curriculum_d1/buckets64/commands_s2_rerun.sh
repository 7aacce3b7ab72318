#!/usr/bin/env bash
# Seed 2 of commands.sh, run again from scratch to its budget (2026-11-27, twenty-second session,
# code b88269a, CPU, one thread, beside other trainings on the 2-core box). The first run was
# stopped by hand at 11,256 task-2 updates and its checkpoints were not kept (a new machine), so
# the whole command ran again: generator seed 1 (data made afresh by the script: the same files),
# model seed 2, BUCKETS=64. Its valid losses equal the first run's to the digit through 11,256
# task-2 updates (t1_s2_valid.txt, t2_s2_valid.txt; only the wps column differs).
set -euo pipefail
OUT=${1:?OUT}
HERE=$(cd "$(dirname "$0")" && pwd)
REL=$HERE/../../tp_babi_rel
T2_RELATIVE=keep T2_UPDATES=20000 BUCKETS=64 configs/qa_tp_babi_curriculum.sh "$OUT" 2 1 > "$OUT.log" 2>&1
"$REL/keep_curriculum_seed.sh" "$OUT" 2 "$HERE"
cut -d, -f1-9 "$OUT/report/qa_results.csv" > "$HERE/qa_results_s2.csv"   # without the scratch paths
