#!/usr/bin/env bash
# Which part of the MemN2N recipe takes memnet off the task-2 plateau (docs/qa.md "MemN2N recipe",
# ablation, 2026-11-26).  Each variant is configs/qa_memn2n_recipe.sh with one part removed, same
# data (its generator seed 0, regenerated per variant folder), task 2, memnet, seeds in SEEDS:
#   no_ls: no linear start; the reference's schedule without it (config_babi.m: lr 0.01, halved
#          every 25 epochs, 100 epochs), i.e. LR = 0.01 x 32 = 0.32 with --sentence-avg
#   no_rn: --random-noise 0 (linear start and the schedule kept)
# The full recipe is docs/qa_results/memn2n_recipe/full_120_epochs/.
#   commands.sh OUT [SEEDS]
set -euo pipefail
OUT=${1:?OUT}; SEEDS=${2:-"0 1 2"}
HERE=$(cd "$(dirname "$0")" && pwd); ROOT=$(cd "$HERE/../../../.." && pwd)
for s in $SEEDS; do
  LS_EPOCHS=0 LR=0.32 EPOCHS=100 "$ROOT/configs/qa_memn2n_recipe.sh" "$OUT/no_ls" memnet "$s" 2
  EXTRA="--random-noise 0" "$ROOT/configs/qa_memn2n_recipe.sh" "$OUT/no_rn" memnet "$s" 2
done
for v in no_ls no_rn; do
  runs=()
  for s in $SEEDS; do
    runs+=(--run "model=memnet,task=2,seed=$s,ckpt=$OUT/$v/ck/memnet_t2_s$s/checkpoint_best.pt,data=$OUT/$v/data/bin/task2,split=original,subset=test")
  done
  ${PYTHON:-python} -m nesyseq_cli.main evaluate qa "${runs[@]}" --out "$OUT/$v/report"
  cp "$OUT/$v/report/qa_results.csv" "$HERE/${v}_qa_results.csv"
  for s in $SEEDS; do grep "valid on" "$OUT/$v/ck/memnet_t2_s$s.log" | sed 's/^.*| INFO | valid | //' \
      > "$HERE/${v}_memnet_t2_s${s}_valid.txt"; done
done
