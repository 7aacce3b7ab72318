#!/usr/bin/env bash
# Table 2 on the released bAbI files (docs/qa.md, "Table 2 on the released bAbI files"):
# train on a bAbI task, test on its released test file and on the paper's zero-shot renamings of
# it (`prepare qa-zero-shot`: rooms as the paper, objects / people ours, all = the three at once).
#   configs/qa_babi_table2.sh BABI_DIR OUT [MODELS] [SEEDS] [TASK] [MAX_UPDATE]
#   configs/qa_babi_table2.sh tasks_1-20_v1-2/en-10k out/babi_t2 stpr "0 1 2" 2 32000
# BABI_DIR holds qa{N}_*_{train,test}.txt (the released tasks_1-20_v1-2/en or en-10k folder).
# Training: the set-up of configs/qa_zero_shot_sweep.sh (configs/qa_train.sh: batch 32, Adam
# lr 1e-3, clip 5, plateau halving, checkpoint_best on 10% of train held out), LR_PATIENCE
# default 10 here (3 there). EXTRA: more fairseq-train options for stpr; default our zero-shot
# recipe (entity dropout 0.2 + init-alpha, symbolic positions, story dropout 0.3, the dropout
# kept on ENTITY_WORDS; all ours, docs/qa.md); EXTRA="" trains the paper's stpr. memnet / smn /
# tpr_rnn get no EXTRA. ENTITY_WORDS: comma-separated words entity dropout may pick (default
# bAbI's people, rooms and objects, data_prep/qa_zero_shot.py; ENTITY_WORDS="": every word).
# ENTITY_TYPE: rate of --entity-dropout-type added to the default recipe with bAbI's people;
# rooms; objects as its groups (default 0: off, the recipe of every run before it).
# SYM_POSITIONS=role: the default recipe with --symbolic-positions-per-role (ours: one γ row per
# role MLP) in place of --symbolic-positions (one row shared by every role; the default, "shared").
# VALID_DROPOUT=1: add --valid-entity-dropout (ours): the valid loss that drives the lr plateau
# rule and checkpoint_best is computed under the same entity dropout (fixed masks per batch).
# RESTORE: continue an earlier OUT: each run starts from RESTORE/ck/MODEL_tTASK_sSEED/checkpoint_best.pt
# (its weights, optimiser, lr schedule and update count) and trains on up to MAX_UPDATE; the
# dictionary must be the one that run was trained with (checked). fairseq writes checkpoint_best
# only when the valid loss beats the restored run's best, so a continuation that never does
# leaves no checkpoint and the script stops with that message.
# Writes OUT/report/MODEL/seeds_S1-S2-…/qa_external.{md,json}: per file, mean ± std over this
# call's seeds (named by them, so calls that share an OUT, one seed each, keep their own reports).
set -euo pipefail
BABI=$1; OUT=$2; MODELS=${3:-stpr}; SEEDS=${4:-"0 1 2"}; TASK=${5:-2}; MAXUP=${6:-32000}
LR=${LR:-0.001}; LR_PATIENCE=${LR_PATIENCE:-10}
export OMP_NUM_THREADS=${OMP_NUM_THREADS:-1}
HERE=$(cd "$(dirname "$0")/.." && pwd)
PY=${PYTHON:-python}
# shellcheck source=configs/qa_train.sh
source "$HERE/configs/qa_train.sh"
if [ -z "${EXTRA+set}" ]; then   # the default recipe; the word list is looked up only for it
  ENTITY_WORDS=${ENTITY_WORDS-$(qa_entity_words)}
  POS_FLAG=$(qa_sym_pos_flag qa_babi_table2.sh) || exit 2
  EXTRA="--entity-dropout 0.2 --entity-dropout-init-alpha $POS_FLAG --entity-dropout-story 0.3${ENTITY_WORDS:+ --entity-dropout-words $ENTITY_WORDS}"
  if [ "${ENTITY_TYPE:-0}" != 0 ]; then   # per-type dropout on top (ours): one kind all new at once
    EXTRA="$EXTRA --entity-dropout-type $ENTITY_TYPE --entity-dropout-groups $(qa_entity_groups)"
  fi
fi
[ "${VALID_DROPOUT:-0}" = 0 ] || EXTRA="$EXTRA --valid-entity-dropout"
read -r -a EXTRA_ARGS <<< "$EXTRA"
data=$OUT/data
if [ ! -f "$data/.done" ]; then
  $PY -m nesyseq.cli.main prepare qa --source "$BABI" --out "$data" --tasks "$TASK" --seed 0 >/dev/null
  touch "$data/.done"
fi
if [ -n "${RESTORE:-}" ]; then
  [ -f "$RESTORE/data/bin/task$TASK/dict.src.txt" ] || {
    echo "qa_babi_table2.sh: RESTORE=$RESTORE has no data/bin/task$TASK/dict.src.txt (not an OUT of this script for task $TASK)" >&2
    exit 2; }
  cmp -s "$RESTORE/data/bin/task$TASK/dict.src.txt" "$data/bin/task$TASK/dict.src.txt" || {
    echo "qa_babi_table2.sh: RESTORE=$RESTORE was trained with another dictionary than $data/bin/task$TASK/dict.src.txt" >&2
    exit 2; }
fi
test_file=$(ls "$BABI"/qa"${TASK}"_*_test.txt)
$PY -m nesyseq.cli.main prepare qa-zero-shot --babi-file "$test_file" --out "$OUT/zero_shot" >/dev/null
mkdir -p "$OUT/ck"
for m in $MODELS; do
  case $m in
    memnet|smn) MODEL_ARGS=(--arch "${m}_babi" --embed-dim 50 --hops 3 --max-story 50); M_EXTRA=() ;;
    tpr_rnn) MODEL_ARGS=(--arch tpr_rnn_babi --adam-betas "(0.9,0.99)"); M_EXTRA=() ;;
    stpr) MODEL_ARGS=(--arch stpr_babi --adam-betas "(0.9,0.99)"); M_EXTRA=(${EXTRA_ARGS[@]+"${EXTRA_ARGS[@]}"}) ;;
    *) echo "qa_babi_table2.sh: unknown model '$m'" >&2; exit 2 ;;
  esac
  CKS=()
  for s in $SEEDS; do
    ck=$OUT/ck/${m}_t${TASK}_s$s
    RESTORE_ARGS=()
    [ -z "${RESTORE:-}" ] || qa_restore_args "$RESTORE/ck/${m}_t${TASK}_s$s/checkpoint_best.pt" qa_babi_table2.sh
    qa_train "$data/bin/task$TASK" "$ck" "$s" "$MAXUP" "${MODEL_ARGS[@]}" ${RESTORE_ARGS[@]+"${RESTORE_ARGS[@]}"} \
        ${M_EXTRA[@]+"${M_EXTRA[@]}"}
    [ -f "$ck/checkpoint_best.pt" ] || {   # fairseq saves a best only when the valid loss beats the restored one
      echo "qa_babi_table2.sh: $ck has no checkpoint_best.pt: training failed or, with RESTORE, never beat the restored run's best valid loss (see $ck.log)" >&2
      exit 1; }
    CKS+=(--checkpoint "$ck/checkpoint_best.pt")
  done
  FILES=(--babi-file "$test_file")
  for kind in rooms objects people all; do      # a kind absent from the task has no file
    f=$OUT/zero_shot/$(basename "$test_file" .txt)_$kind.txt
    if [ -f "$f" ]; then FILES+=(--babi-file "$f"); fi
  done
  rep=$OUT/report/$m/seeds_$(echo $SEEDS | tr ' ' '-')
  mkdir -p "$rep"
  $PY -m nesyseq.cli.main evaluate qa "${CKS[@]}" "${FILES[@]}" --data "$data/bin/task$TASK" \
      --out "$rep" > "$rep.log" 2>&1 || { tail -5 "$rep.log" >&2; exit 1; }
  echo "$rep/qa_external.md"
done
