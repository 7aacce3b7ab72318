#!/usr/bin/env bash
# The runs of docs/qa.md "The curriculum as one command, on another generator seed", 64 relative
# buckets (2026-11-27, twenty-first session, CPU, one thread each). The one command of the parent
# folder with BUCKETS=64, generator seed 1, on the same data folder (a link to the parent run's
# data; `prepare qa --generate --seed 1` makes the same files). Seed 0 ran alone; seeds 2 and 1
# were started together when it was at 18,000 task-2 updates, each into its own OUT.
set -euo pipefail
ROOT=${1:?ROOT}; DATA=${2:?the parent run OUT/data}
HERE=$(cd "$(dirname "$0")" && pwd)
REL=$HERE/../../tp_babi_rel
for s in 0 2 1; do
  O=$ROOT/s$s; mkdir -p "$O"; ln -sfn "$DATA" "$O/data"
  T2_RELATIVE=keep T2_UPDATES=20000 BUCKETS=64 configs/qa_tp_babi_curriculum.sh "$O" "$s" 1 > "$O/run.log" 2>&1 &
done
wait
for s in 0 1 2; do
  O=$ROOT/s$s
  "$REL/keep_curriculum_seed.sh" "$O" "$s" "$HERE"
  cut -d, -f1-9 "$O/report/qa_results.csv" > "$HERE/qa_results_s$s.csv"   # without the scratch paths
done
