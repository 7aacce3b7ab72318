#!/usr/bin/env bash
# Seed 2's test error read before seeds 0 and 1 finished (the curriculum script evaluates only
# once every seed is done): nesyseq evaluate qa on both task-2 arms, the lower valid loss kept.
#   interim_s2/commands.sh OUT      (OUT: the folder of ../commands.sh)
set -euo pipefail
OUT=${1:?OUT}
HERE=$(cd "$(dirname "$0")" && pwd)
python -m nesyseq_cli.main evaluate qa --out "$OUT/interim_s2" \
  --run "model=tp_transformer_tiny_sym,task=2,seed=2,arms=keep zero,ckpt=$OUT/ck/t2_s2_{arm}/checkpoint_best.pt,data=$OUT/data/bin/task2"
cut -d, -f1-9,12 "$OUT/interim_s2/qa_results.csv" > "$HERE/qa_results.csv"   # without the scratch paths
cp "$OUT/interim_s2/qa_table.md" "$HERE/"
