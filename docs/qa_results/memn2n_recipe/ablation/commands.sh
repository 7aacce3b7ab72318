#!/usr/bin/env bash
# Which part of the MemN2N recipe takes memnet off the task-2 plateau (docs/qa.md "MemN2N recipe",
# ablation, 2026-11-26).  Each variant is configs/qa_memn2n_recipe.sh with one part removed, same
# data (its generator seed 0, regenerated per variant folder), task 2, memnet, seeds in SEEDS:
#   no_ls: no linear start; the reference's schedule without it (config_babi.m: lr 0.01, halved
#          every 25 epochs, 100 epochs), i.e. LR = 0.01 x 32 = 0.32 with --sentence-avg
#   no_rn: --random-noise 0 (linear start and the schedule kept)
#   adam:  linear start and random noise kept (the memnet_babi preset), the optimiser of the
#          earlier runs instead of SGD + the step schedule: configs/qa_train.sh (Adam lr 1e-3, clip
#          5.0, lr halved on a valid plateau, patience 3), 120 epochs' worth of updates (33,840)
# The full recipe is docs/qa_results/memn2n_recipe/full_120_epochs/.
#   commands.sh OUT [SEEDS] [VARIANTS]
set -euo pipefail
OUT=${1:?OUT}; SEEDS=${2:-"0 1 2"}; VARIANTS=${3:-"no_ls no_rn adam"}
HERE=$(cd "$(dirname "$0")" && pwd); ROOT=$(cd "$HERE/../../../.." && pwd)
for s in $SEEDS; do for v in $VARIANTS; do
  case $v in
    no_ls) EXTRA="" LS_EPOCHS=0 LR=0.32 EPOCHS=100 "$ROOT/configs/qa_memn2n_recipe.sh" "$OUT/no_ls" memnet "$s" 2 ;;
    no_rn) EXTRA="--random-noise 0" "$ROOT/configs/qa_memn2n_recipe.sh" "$OUT/no_rn" memnet "$s" 2 ;;
    adam)  # the recipe script's data step only (no models), then qa_train
      "$ROOT/configs/qa_memn2n_recipe.sh" "$OUT/adam" "" "$s" 2
      ( HERE=$ROOT LR=0.001 LR_PATIENCE=3; source "$ROOT/configs/qa_train.sh"
        qa_train "$OUT/adam/data/bin/task2" "$OUT/adam/ck/memnet_t2_s$s" "$s" 33840 --arch memnet_babi \
            --embed-dim 50 --hops 3 --max-story 50 --linear-start-epochs 20 ) ;;
    *) echo "commands.sh: unknown variant '$v' (no_ls, no_rn, adam)" >&2; exit 2 ;;
  esac
done; done
# evaluate every seed trained so far (the script may run once per seed)
for v in no_ls no_rn adam; do
  runs=(); done_seeds=()
  for log in "$OUT/$v/ck"/memnet_t2_s*.log; do
    grep -qs "done training" "$log" || continue   # finished runs only (no match: the glob itself)
    s=${log##*_s}; s=${s%.log}
    done_seeds+=("$s")
    runs+=(--run "model=memnet,task=2,seed=$s,ckpt=$OUT/$v/ck/memnet_t2_s$s/checkpoint_best.pt,data=$OUT/$v/data/bin/task2,split=original,subset=test")
  done
  ${PYTHON:-python} -m nesyseq.cli.main evaluate qa "${runs[@]}" --out "$OUT/$v/report"
  cp "$OUT/$v/report/qa_results.csv" "$HERE/${v}_qa_results.csv"
  for s in "${done_seeds[@]}"; do grep "valid on" "$OUT/$v/ck/memnet_t2_s$s.log" | sed 's/^.*| INFO | valid | //' \
      > "$HERE/${v}_memnet_t2_s${s}_valid.txt"; done
done
