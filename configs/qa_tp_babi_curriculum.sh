#!/usr/bin/env bash
# The symbolic transformer on bAbI-style tasks 1 and 2 with our curriculum (docs/qa.md, "Task 2:
# a task-1 start and a third encoder layer"), one command per data seed:
#   configs/qa_tp_babi_curriculum.sh OUT [SEEDS] [DATA_SEED]
#   configs/qa_tp_babi_curriculum.sh out/tp_curriculum "0 1 2" 1
# 1. data: `prepare qa --generate`, tasks 1 and 2, 10 names (NAMES), 10,000 train stories
#    (TRAIN_STORIES; 10% held out as valid) and 1,000 test stories (TEST_STORIES), generator seed
#    DATA_SEED (default 0);
# 2. task 1: tp_transformer_tiny --symbolic-embeddings --symbolic-output
#    --encoder-relative-buckets BUCKETS (default 64), dropout 0.1, Adam lr 1e-3, batch 32, clip 5,
#    plateau halving with patience 3, up to T1_UPDATES (30000);
# 3. `nesyseq convert warm-start`: the task-1 model re-indexed to task 2's dictionary (objects and
#    take/drop verbs get fresh rows) and its encoder grown to T2_LAYERS layers (default 3; the top
#    layer copied); T2_RELATIVE=zero resets its relative-position table to zeros, zero-near only
#    the exact buckets' rows, keep leaves it (docs/qa.md, "Which part of the start");
# 4. task 2 from it (--finetune-from-model: fresh optimiser and schedule), up to T2_UPDATES (30000).
#    T2_RELATIVE may list tables (the default, "keep zero"): then each seed trains task 2 once per table, at
#    once (ck/t2_sS_REL from ck/t1_sS.to_task2_REL.pt), and ck/t2_sS links to the run whose
#    checkpoint_best has the lowest valid loss (the first listed on a tie; ck/t2_sS.choice says
#    which, with each run's loss); the report has the chosen run and each table's run. With one
#    table (e.g. T2_RELATIVE=keep) task 2 is ck/t2_sS from ck/t1_sS.to_task2.pt.
#    Defaults since 2026-11-28 (twenty-ninth session): BUCKETS=64 T2_RELATIVE="keep zero"
#    T2_UPDATES=30000, the recipe measured best (docs/qa.md, "Both, and the lower valid loss
#    kept"); before: 32, keep, 20000 (the record scripts under docs/qa_results name theirs);
# 5. `nesyseq evaluate qa`: test error of both stages -> OUT/report/qa_table.md, qa_results.csv
#    (with more than one seed, the table also names the seed of lowest validation loss per stage).
# Each training stage also stops once a saved checkpoint's valid loss is <= STOP_BITS bits per
# token (default 0.008; STOP_BITS="" trains to the budget). The seeds run at once (one thread
# each). A finished stage leaves OUT/ck/NAME.done and is skipped when called again; a stage
# interrupted before continues from its checkpoint_last.pt (configs/qa_train.sh); one with a
# checkpoint_best.pt but neither (an older qa_train's) is refused, not silently used.
set -euo pipefail
OUT=$1; SEEDS=${2:-"0 1 2"}; DATA_SEED=${3:-0}
NAMES=${NAMES:-10}; T1_UPDATES=${T1_UPDATES:-30000}; T2_UPDATES=${T2_UPDATES:-30000}
TRAIN_STORIES=${TRAIN_STORIES:-10000}; TEST_STORIES=${TEST_STORIES:-1000}
STOP_BITS=${STOP_BITS-0.008}; BUCKETS=${BUCKETS:-64}; T2_LAYERS=${T2_LAYERS:-3}
T2_RELATIVE=${T2_RELATIVE:-keep zero}
read -r -a ARMS <<< "$T2_RELATIVE"
for rel in "${ARMS[@]}"; do
  case $rel in keep|zero|zero-near) ;;
    *) echo "qa_tp_babi_curriculum.sh: T2_RELATIVE=\"$T2_RELATIVE\": $rel is not keep, zero or zero-near" >&2; exit 2 ;;
  esac
done
[ "${#ARMS[@]}" -ge 1 ] || { echo "qa_tp_babi_curriculum.sh: T2_RELATIVE is empty" >&2; exit 2; }
[ "$(printf '%s\n' "${ARMS[@]}" | sort -u | wc -l)" = "${#ARMS[@]}" ] ||
  { echo "qa_tp_babi_curriculum.sh: T2_RELATIVE=\"$T2_RELATIVE\" names a table twice" >&2; exit 2; }
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
  $PY -m nesyseq.cli.main prepare qa --generate --out "$data" --tasks 1,2 --num-names "$NAMES" \
      --train-stories "$TRAIN_STORIES" --test-stories "$TEST_STORIES" --seed "$DATA_SEED" >/dev/null
  touch "$data/.done"
fi
T1=$data/bin/task1 T2=$data/bin/task2
mkdir -p "$OUT/ck"

# saved_scores CK: the valid loss of each checkpoint fairseq saved, one per line, from its
# "Saved checkpoint ... score S)" lines in CK.log
saved_scores() {
  sed -n 's/.*Saved checkpoint.*score \([0-9.]*\)).*/\1/p' "$1.log"
}

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
    if [ -f "$ck.log" ] && saved_scores "$ck" | awk -v s="$STOP_BITS" '$1 <= s { f = 1 } END { exit !f }'; then
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

# best_score CK: the lowest valid loss among CK's saved checkpoints, i.e. checkpoint_best.pt's
best_score() {
  saved_scores "$1" | sort -g | head -1
}

# task2_arm SEED T1 T2 START REL: the warm start with --relative-table REL, then task 2 from it
task2_arm() {
  local s=$1 t1=$2 t2=$3 start=$4 rel=$5
  # the start is made again whenever task 1's checkpoint is newer than it, or its options changed
  # (START.opts, i.e. NAME.to_task2.opts; a start from before that file is kept)
  local opts="--encoder-layers $T2_LAYERS --relative-table $rel" optf=${start%.pt}.opts logf=${start%.pt}.log
  if [ ! "$start" -nt "$t1/checkpoint_best.pt" ] || { [ -f "$optf" ] && [ "$(cat "$optf")" != "$opts" ]; }; then
    # shellcheck disable=SC2086  # opts: four words, split on purpose
    $PY -m nesyseq.cli.main convert warm-start --checkpoint "$t1/checkpoint_best.pt" \
        --from-data "$T1" --to-data "$T2" $opts --out "$start" > "$logf"
    echo "$opts" > "$optf"
  fi
  if [ ! -f "$t2.done" ] && [ -f "$t2/checkpoint_last.pt" ] && [ "$start" -nt "$t2/checkpoint_last.pt" ]; then
    echo "qa_tp_babi_curriculum.sh: $t2 was interrupted, and its start $start has been made again" \
         "since; move $t2 away to train it from the new start" >&2
    return 1
  fi
  train_until "$T2" "$t2" "$s" "$T2_UPDATES" "${MODEL_ARGS[@]}" --encoder-layers "$T2_LAYERS" \
      --finetune-from-model "$start"
}

one_seed() {
  local s=$1 t1=$OUT/ck/t1_s$1 t2=$OUT/ck/t2_s$1
  train_until "$T1" "$t1" "$s" "$T1_UPDATES" "${MODEL_ARGS[@]}"
  if [ "${#ARMS[@]}" = 1 ]; then
    task2_arm "$s" "$t1" "$t2" "$t1.to_task2.pt" "${ARMS[0]}"
    return
  fi
  # several tables: one task-2 run per table (t2_sS_REL, from t1_sS.to_task2_REL.pt), at once;
  # t2_sS (and its .log) then link to the run of lowest best valid loss, the first on a tie
  if [ -e "$t2" ] && [ ! -L "$t2" ]; then
    echo "qa_tp_babi_curriculum.sh: $t2 is a run of one table, not a link to the chosen one; use a new OUT" >&2
    return 1
  fi
  local rel pids=() fail=0 best="" best_rel="" sc scores=""
  for rel in "${ARMS[@]}"; do task2_arm "$s" "$t1" "${t2}_$rel" "$t1.to_task2_$rel.pt" "$rel" & pids+=($!); done
  for p in "${pids[@]}"; do wait "$p" || fail=1; done
  [ "$fail" = 0 ] || return 1
  for rel in "${ARMS[@]}"; do
    sc=$(best_score "${t2}_$rel")
    [ -n "$sc" ] || { echo "qa_tp_babi_curriculum.sh: ${t2}_$rel.log has no saved checkpoint" >&2; return 1; }
    scores+="$rel $sc"$'\n'
    if [ -z "$best" ] || awk -v a="$sc" -v b="$best" 'BEGIN { exit !(a < b) }'; then best=$sc best_rel=$rel; fi
  done
  ln -sfn "t2_s${s}_$best_rel" "$t2"
  ln -sfn "t2_s${s}_$best_rel.log" "$t2.log"
  printf '%schosen: %s\n' "$scores" "$best_rel" > "$t2.choice"
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
  if [ "${#ARMS[@]}" -gt 1 ]; then   # each table's run as well, beside the chosen one
    for rel in "${ARMS[@]}"; do
      RUNS+=(--run "model=tp_transformer_tiny_sym_$rel,task=2,seed=$s,ckpt=$OUT/ck/t2_s${s}_$rel/checkpoint_best.pt,data=$T2")
    done
  fi
done
$PY -m nesyseq.cli.main evaluate qa --out "$OUT/report" --label "bAbI-style, data seed $DATA_SEED" "${RUNS[@]}"
