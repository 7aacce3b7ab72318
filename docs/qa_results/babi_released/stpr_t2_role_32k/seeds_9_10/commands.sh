#!/usr/bin/env bash
# Task 2, the one command with per-role rows, seeds 9 and 10 (2026-11-27, twenty-third session,
# code 8f72ad1; CPU, the two at once, one thread each, nothing else training): the command of
# ../seeds_4_5_padfix/ with a fresh OUT per seed (the data folder made again by the script).
#   commands.sh BABI_EN10K_DIR OUT_ROOT
set -euo pipefail
B=${1:?the released en-10k folder}; O=${2:?OUT_ROOT}
HERE=$(cd "$(dirname "$0")" && pwd)
for s in 9 10; do
  SYM_POSITIONS=role ENTITY_TYPE=0.3 configs/qa_babi_table2.sh "$B" "$O/s$s" stpr "$s" 2 32000 > "$O/run_s$s.out" 2>&1 &
done
wait
{ echo "run,beta,best_valid_loss,lr_at_end,train_loss_at_end,updates"
  for s in 9 10; do "$HERE/../keep_run.sh" "$O/s$s" "$s" "$HERE/seed$s" "$HERE"; done
} > "$HERE/run_summary.csv"
