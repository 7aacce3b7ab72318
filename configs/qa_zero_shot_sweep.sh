#!/usr/bin/env bash
# Table 2 protocol (bAbI-style tasks 2 and 5): train once on the original task, test on the
# original test and on the zero-shot test sets with unseen rooms / objects / people.
#   configs/qa_zero_shot_sweep.sh OUT "memnet smn tpr_rnn stpr" "0 1 2" [MAX_UPDATE]
# Environment: TASKS ("2 5"), STORIES (2000), LR, LR_PATIENCE, KINDS (zero-shot splits), EXTRA
# (more fairseq-train options, e.g. "--entity-dropout 0.2"), TRAIN_ONLY, RESTORE (continue: the
# OUT/ck of an earlier sweep; each run starts from that sweep's checkpoint_best.pt of the same
# model, task and seed, with its optimiser, lr schedule and update count, up to MAX_UPDATE).
# Data: `prepare qa --generate --tasks $TASKS --zero-shot rooms,objects,people`, $STORIES train
# stories (2000 = 9,000 train + 1,000 valid questions, the size of bAbI 10k) and 200 test
# stories (1,000 questions) per test set, generator seed 0.
# Paper set-up (appendix D): batch 32, Adam lr 1e-3, clip 5.0, 10% of train held out for early
# stopping (checkpoint_best), lr halving on plateau. TPR/STPR: Adam betas (0.9, 0.99) as the
# TPR-RNN-Torch code the paper adapted (configs/config_2.json:21-24, train.py:71-72); the paper's
# (0.6, 0.4) gave NaN gradients within 300 updates here (docs/qa.md).
# Writes OUT/report/{qa_table.md,qa_results.csv,*.png} via `nesyseq evaluate qa`.
set -euo pipefail
OUT=$1; MODELS=${2:-"memnet smn tpr_rnn stpr"}; SEEDS=${3:-"0 1 2"}; MAXUP=${4:-5000}
TASKS=${TASKS:-"2 5"}; STORIES=${STORIES:-2000}; LR=${LR:-0.001}; LR_PATIENCE=${LR_PATIENCE:-3}
KINDS=${KINDS:-"rooms objects people"}   # add "all" for the split with every entity new (ours)
TRAIN_ONLY=${TRAIN_ONLY:-0}   # 1: train (skip finished runs) but do not write the report
read -r -a EXTRA_ARGS <<< "${EXTRA:-}"
export OMP_NUM_THREADS=${OMP_NUM_THREADS:-1}
HERE=$(cd "$(dirname "$0")/.." && pwd)
PY=${PYTHON:-python}
# shellcheck source=configs/qa_train.sh
source "$HERE/configs/qa_train.sh"
data=$OUT/data
if [ ! -f "$data/.done" ]; then
  $PY -m nesyseq.cli.main prepare qa --generate --out "$data" --tasks "${TASKS// /,}" \
      --zero-shot "${KINDS// /,}" --num-names 4 --train-stories "$STORIES" --test-stories 200 --seed 0 >/dev/null
  touch "$data/.done"
fi
mkdir -p "$OUT/ck"
RUNS=()
for t in $TASKS; do for m in $MODELS; do for s in $SEEDS; do
  ck=$OUT/ck/${m}_t${t}_s$s
  case $m in
    memnet|smn) MODEL_ARGS=(--arch "${m}_babi" --embed-dim 50 --hops 3 --max-story 50) ;;
    tpr_rnn|stpr) MODEL_ARGS=(--arch "${m}_babi" --adam-betas "(0.9,0.99)") ;;
    *) echo "qa_zero_shot_sweep.sh: unknown model '$m'" >&2; exit 2 ;;
  esac
  RESTORE_ARGS=()
  [ -z "${RESTORE:-}" ] || qa_restore_args "$RESTORE/${m}_t${t}_s$s/checkpoint_best.pt" qa_zero_shot_sweep.sh
  qa_train "$data/bin/task$t" "$ck" "$s" "$MAXUP" "${MODEL_ARGS[@]}" ${RESTORE_ARGS[@]+"${RESTORE_ARGS[@]}"} \
      ${EXTRA_ARGS[@]+"${EXTRA_ARGS[@]}"}
  for split in original $KINDS; do
    sub=test; [ "$split" = original ] || sub=test_$split
    RUNS+=(--run "model=$m,task=$t,seed=$s,split=$split,subset=$sub,ckpt=$ck/checkpoint_best.pt,data=$data/bin/task$t")
  done
done; done; done
[ "$TRAIN_ONLY" = 1 ] || $PY -m nesyseq.cli.main evaluate qa --out "$OUT/report" "${RUNS[@]}"
