#!/usr/bin/env bash
# The best measured recipe, on the starts it had not been run from: generator seed 1, seeds 0 and 1,
# `BUCKETS=64 T2_RELATIVE=zero T2_UPDATES=30000` in one go (docs/qa.md, "Which part of the start";
# 2026-11-28, twenty-eighth session, code 9b896ca, CPU, one thread per seed, the two at once).
# Task 1 is trained again from scratch (the twenty-first session's checkpoints are gone); its valid
# losses equal ../t1_s0_valid.txt and ../t1_s1_valid.txt to the digit (only the wps column differs).
#   commands.sh DATA NEW_OUT     DATA: ../commands.sh's data folder (generator seed 1)
set -euo pipefail
DATA=${1:?DATA}; OUT=${2:?NEW_OUT: a new folder}
HERE=$(cd "$(dirname "$0")" && pwd)
mkdir -p "$OUT"
ln -sfn "$DATA" "$OUT/data"
BUCKETS=64 T2_RELATIVE=zero T2_UPDATES=30000 configs/qa_tp_babi_curriculum.sh "$OUT" "0 1" 1 > "$OUT/run.log" 2>&1
for s in 0 1; do
  "$HERE/../../../tp_babi_rel/keep_curriculum_seed.sh" "$OUT" "$s" "$HERE"
  cp "$OUT/ck/t1_s$s.to_task2.log" "$HERE/"
done
cut -d, -f1-9,12 "$OUT/report/qa_results.csv" > "$HERE/qa_results.csv"   # without the scratch paths
