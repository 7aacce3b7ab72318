#!/usr/bin/env bash
# Seed 5 of the per-role task-2 command with one schedule variable changed, and its record kept in
# DEST: the report, the fairseq train / valid lines and run_summary.csv. Called by
# seed5_valid_dropout/commands.sh and seed5_patience20/commands.sh (thirty-first session).
#   seed5_variant.sh VAR=VALUE BABI_EN10K_DIR OUT DEST     (run from the repository root)
set -euo pipefail
VAR=${1:?VAR=VALUE, e.g. LR_PATIENCE=20}; B=${2:?the released en-10k folder}; O=${3:?OUT}; DEST=${4:?DEST}
HERE=$(cd "$(dirname "$0")" && pwd)
env "$VAR" SYM_POSITIONS=role ENTITY_TYPE=0.3 configs/qa_babi_table2.sh "$B" "$O" stpr 5 2 32000 > "$O/run_s5.out" 2>&1
{ echo "run,beta,best_valid_loss,lr_at_end,train_loss_at_end,updates"; "$HERE/keep_run.sh" "$O" 5 "$DEST" "$DEST"; } > "$DEST/run_summary.csv"
