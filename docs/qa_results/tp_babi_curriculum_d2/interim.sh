#!/usr/bin/env bash
# One start's test error read before the other starts finished (the curriculum script evaluates
# only once every seed is done): nesyseq evaluate qa on both task-2 arms, the lower valid loss kept.
#   interim.sh OUT SEED      (OUT: the folder of commands.sh) -> interim_sSEED/
set -euo pipefail
OUT=${1:?OUT} S=${2:?SEED}
HERE=$(cd "$(dirname "$0")" && pwd)
mkdir -p "$HERE/interim_s$S"
python -m nesyseq.cli.main evaluate qa --out "$OUT/interim_s$S" \
  --run "model=tp_transformer_tiny_sym,task=2,seed=$S,arms=keep zero,ckpt=$OUT/ck/t2_s${S}_{arm}/checkpoint_best.pt,data=$OUT/data/bin/task2"
cut -d, -f1-9,12 "$OUT/interim_s$S/qa_results.csv" > "$HERE/interim_s$S/qa_results.csv"   # without the scratch paths
cp "$OUT/interim_s$S/qa_table.md" "$HERE/interim_s$S/"
cp "$OUT/ck/t2_s$S.choice" "$HERE/"
for rel in keep zero; do "$HERE/../valid_lines.sh" "$OUT/ck/t2_s${S}_$rel.log" "$HERE/t2_s${S}_${rel}_valid.txt"; done
