#!/usr/bin/env bash
# Task 2, the one command with per-role rows, seeds 11 and 12 (2026-11-28, thirty-first session,
# code 0b46bae; CPU, one thread each, three runs at once with ../seed5_valid_dropout/): the command
# of ../seeds_9_10/, one OUT for both seeds (its data folder made once before the two started).
#   commands.sh BABI_EN10K_DIR OUT
set -euo pipefail
B=${1:?the released en-10k folder}; O=${2:?OUT}
HERE=$(cd "$(dirname "$0")" && pwd)
python -m nesyseq.cli.main prepare qa --source "$B" --out "$O/data" --tasks 2 --seed 0 >/dev/null
touch "$O/data/.done"
for s in 11 12; do
  SYM_POSITIONS=role ENTITY_TYPE=0.3 configs/qa_babi_table2.sh "$B" "$O" stpr "$s" 2 32000 > "$O/run_s$s.out" 2>&1 &
done
wait
{ echo "run,beta,best_valid_loss,lr_at_end,train_loss_at_end,updates"
  for s in 11 12; do "$HERE/../keep_run.sh" "$O" "$s" "$HERE/seed$s" "$HERE"; done
} > "$HERE/run_summary.csv"
# every seed of the per-role command so far, 0-12: mean ± pop. std per file
python "$HERE/../seeds_stats.py" > "$HERE/seeds_0_12.md"
