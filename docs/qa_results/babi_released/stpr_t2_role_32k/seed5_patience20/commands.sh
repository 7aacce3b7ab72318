#!/usr/bin/env bash
# Seed 5 of the per-role task-2 command again with LR_PATIENCE=20 (the plateau rule waits 20
# epochs instead of 10 before halving) (2026-11-28, thirty-first session, code 0b46bae; CPU, one
# thread, three runs at once with the Fig. 1 10,000-name runs). OUT's data folder is a link to the
# one of ../seeds_11_12/ (the same prepare call).
#   commands.sh BABI_EN10K_DIR OUT
set -euo pipefail
B=${1:?the released en-10k folder}; O=${2:?OUT}
HERE=$(cd "$(dirname "$0")" && pwd)
SYM_POSITIONS=role ENTITY_TYPE=0.3 LR_PATIENCE=20 configs/qa_babi_table2.sh "$B" "$O" stpr 5 2 32000 > "$O/run_s5.out" 2>&1
cp "$O/report/stpr/seeds_5/qa_external".{md,json} "$HERE/"
L=$O/ck/stpr_t2_s5.log
sed -n 's/.* | INFO | train | //p' "$L" > "$HERE/stpr_t2_s5_train.txt"
sed -n 's/.* | INFO | valid | //p' "$L" > "$HERE/stpr_t2_s5_valid.txt"
{ echo "run,beta,best_valid_loss,lr_at_end,train_loss_at_end,updates"
  PYTHONPATH=. python "$HERE/../../run_summary.py" "$O/ck/stpr_t2_s5" | tail -1
} > "$HERE/run_summary.csv"
