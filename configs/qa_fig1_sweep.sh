#!/usr/bin/env bash
# Fig. 1 protocol sweep (bAbI-style task 1, train+test regenerated at each name count;
# TASK=2 runs the same protocol on task 2, TEST_STORIES sets the test size):
#   configs/qa_fig1_sweep.sh OUT "memnet smn" "10 100 1000" "0 1 2" [MAX_UPDATE]
#   configs/qa_fig1_sweep.sh OUT "tp_transformer_tiny tp_transformer_tiny_sym" ...
# Models: memnet, smn (d=50, K=3); tp_transformer_tiny without / with (_sym)
# --symbolic-embeddings --symbolic-output, the same model otherwise.
# Writes OUT/report/{qa_table.md,qa_results.csv,qa_names_curve.png} via `nesyseq evaluate qa`.
# Paper set-up: batch 32, Adam, clip 5.0, 10% of train held out (prepare qa), lr halving
# (--lr-scheduler reduce_lr_on_plateau --lr-shrink 0.5); lr and update count are set here.
set -euo pipefail
OUT=$1; MODELS=${2:-"memnet smn"}; NAMES=${3:-"10 100 1000"}; SEEDS=${4:-"0 1 2"}; MAXUP=${5:-2000}
LR=${LR:-0.005}; STORIES=${STORIES:-200}; LR_PATIENCE=${LR_PATIENCE:-0}
TEST_STORIES=${TEST_STORIES:-$STORIES}   # test stories (default: as many as train)
TASK=${TASK:-1}                          # bAbI-style task (Fig. 1 uses 1)
# EXTRA: more fairseq-train options for every run, e.g. EXTRA="--dropout 0.1"
read -r -a EXTRA_ARGS <<< "${EXTRA:-}"
export OMP_NUM_THREADS=${OMP_NUM_THREADS:-1}
HERE=$(cd "$(dirname "$0")/.." && pwd)
PY=${PYTHON:-python}
# shellcheck source=configs/qa_train.sh
source "$HERE/configs/qa_train.sh"
RUNS=()
for n in $NAMES; do
  data=$OUT/data_n$n
  [ -d "$data/bin/task$TASK" ] || $PY -m nesyseq.cli.main prepare qa --generate --out "$data" --tasks "$TASK" \
      --num-names "$n" --train-stories "$STORIES" --test-stories "$TEST_STORIES" --seed 0 >/dev/null
  for m in $MODELS; do for s in $SEEDS; do
    ck=$OUT/ck/${m}_n${n}_s$s
    case $m in
      memnet|smn) MODEL_ARGS=(--arch "${m}_babi" --embed-dim 50 --hops 3 --max-story 50) ;;
      tp_transformer_tiny) MODEL_ARGS=(--arch tp_transformer_tiny) ;;
      tp_transformer_tiny_sym) MODEL_ARGS=(--arch tp_transformer_tiny --symbolic-embeddings --symbolic-output) ;;
      *) echo "qa_fig1_sweep.sh: unknown model '$m'" >&2; exit 2 ;;
    esac
    mkdir -p "$OUT/ck"
    qa_train "$data/bin/task$TASK" "$ck" "$s" "$MAXUP" "${MODEL_ARGS[@]}" ${EXTRA_ARGS[@]+"${EXTRA_ARGS[@]}"}
    RUNS+=(--run "model=$m,task=$TASK,seed=$s,names=$n,ckpt=$ck/checkpoint_best.pt,data=$data/bin/task$TASK")
  done; done
done
$PY -m nesyseq.cli.main evaluate qa --out "$OUT/report" "${RUNS[@]}"
