#!/usr/bin/env bash
# The symbolic transformer on bAbI-style tasks 1 and 2 with our curriculum (docs/qa.md, "Task 2:
# a task-1 start and a third encoder layer"), one command per data seed:
#   configs/qa_tp_babi_curriculum.sh OUT [SEEDS] [DATA_SEED]
#   configs/qa_tp_babi_curriculum.sh out/tp_curriculum "0 1 2" 1
# 1. data: `prepare qa --generate`, tasks 1 and 2, 10 names (NAMES), 10,000 train stories
#    (TRAIN_STORIES; 10% held out as valid) and 1,000 test stories (TEST_STORIES), generator seed
#    DATA_SEED (default 0);
# 2. task 1: tp_transformer_tiny --symbolic-embeddings --symbolic-output
#    --encoder-relative-buckets BUCKETS (default 32), dropout 0.1, Adam lr 1e-3, batch 32, clip 5,
#    plateau halving with patience 3, up to T1_UPDATES (30000);
# 3. `nesyseq convert warm-start`: the task-1 model re-indexed to task 2's dictionary (objects and
#    take/drop verbs get fresh rows) and its encoder grown to T2_LAYERS layers (default 3; the top
#    layer copied); T2_RELATIVE=zero resets its relative-position table to zeros, zero-near only
#    the exact buckets' rows (default keep; docs/qa.md, "Which part of the start");
# 4. task 2 from it (--finetune-from-model: fresh optimiser and schedule), up to T2_UPDATES (20000);
# 5. `nesyseq evaluate qa`: test error of both stages -> OUT/report/qa_table.md, qa_results.csv
#    (with more than one seed, the table also names the seed of lowest validation loss per stage).
# Each training stage also stops once a saved checkpoint's valid loss is <= STOP_BITS bits per
# token (default 0.008; STOP_BITS="" trains to the budget). The seeds run at once (one thread
# each). A finished stage leaves OUT/ck/NAME.done and is skipped when called again; a stage
# interrupted before continues from its checkpoint_last.pt (configs/qa_train.sh); one with a
# checkpoint_best.pt but neither (an older qa_train's) is refused, not silently used.
set -euo pipefail
OUT=$1; SEEDS=${2:-"0 1 2"}; DATA_SEED=${3:-0}
NAMES=${NAMES:-10}; T1_UPDATES=${T1_UPDATES:-30000}; T2_UPDATES=${T2_UPDATES:-20000}
TRAIN_STORIES=${TRAIN_STORIES:-10000}; TEST_STORIES=${TEST_STORIES:-1000}
STOP_BITS=${STOP_BITS-0.008}; BUCKETS=${BUCKETS:-32}; T2_LAYERS=${T2_LAYERS:-3}
T2_RELATIVE=${T2_RELATIVE:-keep}
LR=${LR:-0.001}; LR_PATIENCE=${LR_PATIENCE:-3}
export OMP_NUM_THREADS=${OMP_NUM_THREADS:-1}
HERE=$(cd "$(dirname "$0")/.." && pwd)
PY=${PYTHON:-python}
# shellcheck source=configs/qa_train.sh
source "$HERE/configs/qa_train.sh"
MODEL_ARGS=(--arch tp_transformer_tiny --symbolic-embeddings --symbolic-output --encoder-relative-buckets "$BUCKETS"
            --dropout 0.1)
data=$OUT/data
if [ ! -f "$data/.done" ]; then
  $PY -m nesyseq_cli.main prepare qa --generate --out "$data" --tasks 1,2 --num-names "$NAMES" \
      --train-stories "$TRAIN_STORIES" --test-stories "$TEST_STORIES" --seed "$DATA_SEED" >/dev/null
  touch "$data/.done"
fi
T1=$data/bin/task1 T2=$data/bin/task2
mkdir -p "$OUT/ck"

# train_until DATA CK SEED MAXUP [options...]: qa_train, stopped once a saved checkpoint's valid
# loss is <= STOP_BITS (read from fairseq's "Saved checkpoint ... score S" lines in CK.log)
# (fairseq rounds the logged score to 3 decimals). NAME.done marks a finished stage.
train_until() {
  local ck=$2
  [ -f "$ck.done" ] && return 0
  if [ -f "$ck/checkpoint_best.pt" ] && [ ! -f "$ck/checkpoint_last.pt" ]; then
    echo "qa_tp_babi_curriculum.sh: $ck has a checkpoint_best.pt but no $ck.done and no checkpoint_last.pt" \
         "to resume from (an older qa_train's stage, finished or interrupted); move $ck away to train it again" >&2
    return 1
  fi
  qa_train "$@" &
  local pid=$! stopped=0
  while [ -n "$STOP_BITS" ] && kill -0 "$pid" 2>/dev/null; do
    sleep 10
    if [ -f "$ck.log" ] && sed -n 's/.*Saved checkpoint.*score \([0-9.]*\)).*/\1/p' "$ck.log" |
        awk -v s="$STOP_BITS" '$1 <= s { f = 1 } END { exit !f }'; then
      if pkill -TERM -P "$pid"; then
        stopped=1
        echo "qa_tp_babi_curriculum.sh: stopped, valid loss <= $STOP_BITS bits" >> "$ck.log"
      fi
      break
    fi
  done
  wait "$pid" || [ "$stopped" = 1 ] || { echo "qa_tp_babi_curriculum.sh: training failed, see $ck.log" >&2; return 1; }
  [ -f "$ck/checkpoint_best.pt" ] || { echo "qa_tp_babi_curriculum.sh: $ck has no checkpoint_best.pt (see $ck.log)" >&2; return 1; }
  touch "$ck.done"
}

one_seed() {
  local s=$1 t1=$OUT/ck/t1_s$1 t2=$OUT/ck/t2_s$1
  train_until "$T1" "$t1" "$s" "$T1_UPDATES" "${MODEL_ARGS[@]}"
  # the start is made again whenever task 1's checkpoint is newer than it, or its options changed
  # (NAME.to_task2.opts; a start from before that file is kept)
  local opts="--encoder-layers $T2_LAYERS --relative-table $T2_RELATIVE"
  if [ ! "$t1.to_task2.pt" -nt "$t1/checkpoint_best.pt" ] ||
     { [ -f "$t1.to_task2.opts" ] && [ "$(cat "$t1.to_task2.opts")" != "$opts" ]; }; then
    # shellcheck disable=SC2086  # opts: two options, word-split on purpose
    $PY -m nesyseq_cli.main convert warm-start --checkpoint "$t1/checkpoint_best.pt" \
        --from-data "$T1" --to-data "$T2" $opts --out "$t1.to_task2.pt" > "$t1.to_task2.log"
    echo "$opts" > "$t1.to_task2.opts"
  fi
  if [ ! -f "$t2.done" ] && [ -f "$t2/checkpoint_last.pt" ] && [ "$t1.to_task2.pt" -nt "$t2/checkpoint_last.pt" ]; then
    echo "qa_tp_babi_curriculum.sh: $t2 was interrupted, and its start $t1.to_task2.pt has been made again" \
         "since; move $t2 away to train it from the new start" >&2
    return 1
  fi
  train_until "$T2" "$t2" "$s" "$T2_UPDATES" "${MODEL_ARGS[@]}" --encoder-layers "$T2_LAYERS" \
      --finetune-from-model "$t1.to_task2.pt"
}

PIDS=()
for s in $SEEDS; do one_seed "$s" & PIDS+=($!); done
fail=0
for p in "${PIDS[@]}"; do wait "$p" || fail=1; done
[ "$fail" = 0 ] || { echo "qa_tp_babi_curriculum.sh: a seed failed (see $OUT/ck/*.log)" >&2; exit 1; }
RUNS=()
for s in $SEEDS; do
  RUNS+=(--run "model=tp_transformer_tiny_sym,task=1,seed=$s,ckpt=$OUT/ck/t1_s$s/checkpoint_best.pt,data=$T1")
  RUNS+=(--run "model=tp_transformer_tiny_sym,task=2,seed=$s,ckpt=$OUT/ck/t2_s$s/checkpoint_best.pt,data=$T2")
done
$PY -m nesyseq_cli.main evaluate qa --out "$OUT/report" --label "bAbI-style, data seed $DATA_SEED" "${RUNS[@]}"
