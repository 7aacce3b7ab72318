#!/usr/bin/env bash
# memnet / smn with the MemN2N training recipe of Sukhbaatar et al. (2015) as their code runs it
# (facebookarchive/MemNN MemN2N-babi-matlab; docs/qa.md "MemN2N recipe"):
#   linear start 20 epochs + random noise 0.1 (the *_babi presets), SGD without momentum,
#   lr 0.005 with LS, halved every 25 epochs after the 20 LS epochs, 120 epochs in all.
# The reference sums the loss over the batch (build_model.m: loss.size_average = false) and
# clips each weight's gradient at norm 40 (nn/Weight.m); fairseq averages (--sentence-avg: per
# question) and clips the global norm, so lr = 0.005 x 32 = 0.16 and clip = 40 / 32 = 1.25.
#   configs/qa_memn2n_recipe.sh OUT "memnet smn" "0 1 2" [TASK]   (MODELS "" = prepare the data only)
# Data: the Table 2 set of configs/qa_zero_shot_sweep.sh (2,000 train stories, seed 0).
set -euo pipefail
OUT=$1; MODELS=${2-"memnet smn"}; SEEDS=${3:-"0"}; TASK=${4:-2}
EPOCHS=${EPOCHS:-120}; LS_EPOCHS=${LS_EPOCHS:-20}; LR=${LR:-0.16}; CLIP=${CLIP:-1.25}
read -r -a EXTRA_ARGS <<< "${EXTRA:-}"
export OMP_NUM_THREADS=${OMP_NUM_THREADS:-1}
HERE=$(cd "$(dirname "$0")/.." && pwd)
PY=${PYTHON:-python}
data=$OUT/data
if [ ! -f "$data/.done" ]; then
  $PY -m nesyseq.cli.main prepare qa --generate --out "$data" --tasks "$TASK" \
      --zero-shot rooms,objects,people --num-names 4 --train-stories 2000 --test-stories 200 --seed 0 >/dev/null
  touch "$data/.done"
fi
mkdir -p "$OUT/ck"
for m in $MODELS; do for s in $SEEDS; do
  ck=$OUT/ck/${m}_t${TASK}_s$s
  [ -f "$ck/checkpoint_last.pt" ] && grep -q "done training" "$ck.log" 2>/dev/null && continue
  fairseq-train "$data/bin/task$TASK" --user-dir "$HERE/user_dir" --task babi_qa --arch "${m}_babi" \
      --embed-dim 50 --hops 3 --max-story 50 --linear-start-epochs "$LS_EPOCHS" \
      --criterion cross_entropy --sentence-avg --optimizer sgd --momentum 0.0 --lr "$LR" --clip-norm "$CLIP" \
      --batch-size 32 --lr-scheduler memn2n_step --constant-epochs "$LS_EPOCHS" --lr-decay-epochs 25 \
      --lr-shrink 0.5 --max-epoch "$EPOCHS" --save-dir "$ck" --no-epoch-checkpoints --num-workers 0 --cpu \
      --seed "$s" --log-format simple --log-interval 1000 ${EXTRA_ARGS[@]+"${EXTRA_ARGS[@]}"} > "$ck.log" 2>&1
done; done
