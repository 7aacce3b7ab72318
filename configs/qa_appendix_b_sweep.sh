#!/usr/bin/env bash
# Appendix B task (paper Fig. 7): 10 assignments "x_j is v_j" per story, |V1| = |V2| = k,
# 10K train / 1K test stories (10% of train held out), memnet vs smn.
#   configs/qa_appendix_b_sweep.sh OUT "10 100 1000" "memnet smn" "0 1 2" [MAX_UPDATE]
# Set-up as the other QA sweeps: d = 50, K = 3 hops, batch 32, Adam, clip 5.0, lr halving on
# plateau (--lr-patience 3); LR (default 0.005) and MAX_UPDATE (default 1500, about 5 epochs)
# are set here. Writes OUT/report/ via `nesyseq evaluate qa` (task column "b-k{K}").
set -euo pipefail
OUT=$1; KS=${2:-"10 100 1000"}; MODELS=${3:-"memnet smn"}; SEEDS=${4:-"0 1 2"}; MAXUP=${5:-1500}
LR=${LR:-0.005}; LR_PATIENCE=${LR_PATIENCE:-3}
export OMP_NUM_THREADS=${OMP_NUM_THREADS:-1}
HERE=$(cd "$(dirname "$0")/.." && pwd)
PY=${PYTHON:-python}
# shellcheck source=configs/qa_train.sh
source "$HERE/configs/qa_train.sh"
mkdir -p "$OUT/ck"
RUNS=()
for k in $KS; do
  data=$OUT/data_k$k
  [ -d "$data/bin/taskb" ] || $PY -m nesyseq.cli.main prepare qa --generate --out "$data" --tasks b --k "$k" \
      --train-stories 10000 --test-stories 1000 --seed 0 >/dev/null
  for m in $MODELS; do for s in $SEEDS; do
    case $m in
      memnet|smn) ;;
      *) echo "qa_appendix_b_sweep.sh: unknown model '$m'" >&2; exit 2 ;;
    esac
    ck=$OUT/ck/${m}_k${k}_s$s
    qa_train "$data/bin/taskb" "$ck" "$s" "$MAXUP" --arch "${m}_babi" --embed-dim 50 --hops 3 --max-story 50
    RUNS+=(--run "model=$m,task=b-k$k,seed=$s,ckpt=$ck/checkpoint_best.pt,data=$data/bin/taskb")
  done; done
done
$PY -m nesyseq.cli.main evaluate qa --out "$OUT/report" "${RUNS[@]}"
