#!/usr/bin/env bash
# continue_t2_held_lr.sh FROM SAVE_DIR SEED LR MAX_UPDATE
# Continues FROM/ck/stpr_t2_sSEED/checkpoint_best.pt (an OUT of configs/qa_babi_table2.sh, task 2)
# with the entity-words recipe (entity dropout 0.2 + init-alpha, symbolic positions, story dropout
# 0.3, --entity-dropout-words ENTITY_WORDS, default bAbI's people, rooms and objects) at a held lr:
# --reset-lr-scheduler, the optimiser's lr overridden to LR, --lr-scheduler fixed. fairseq-train
# directly, not configs/qa_train.sh, so that checkpoint_last.pt is kept (a continuation whose clean
# valid loss never beats the restored best writes no checkpoint_best). Data: FROM/data/bin/task2.
# ENTITY_TYPE=P adds the per-type dropout of `ENTITY_TYPE=P configs/qa_babi_table2.sh` (bAbI's
# entity groups), for continuing those runs with their own recipe. SYM_POSITIONS=role: with
# --symbolic-positions-per-role in place of --symbolic-positions, as `SYM_POSITIONS=role
# configs/qa_babi_table2.sh` (default "shared").
# Log: SAVE_DIR.log. Used by stpr_t2_64k_entitywords_to67k/ and stpr_t2_entitywords_32k/continued_*/.
set -euo pipefail
FROM=$1; SAVE=$2; s=$3; LR=$4; MAXUP=$5
HERE=$(cd "$(dirname "$0")/../../.." && pwd)
PY=${PYTHON:-python}
# shellcheck source=configs/qa_train.sh
source "$HERE/configs/qa_train.sh"     # qa_entity_words, qa_entity_groups, qa_sym_pos_flag
W=${ENTITY_WORDS-$(qa_entity_words)}
export OMP_NUM_THREADS=${OMP_NUM_THREADS:-1}
POS_FLAG=$(qa_sym_pos_flag continue_t2_held_lr.sh) || exit 2
TYPE_ARGS=()
if [ "${ENTITY_TYPE:-0}" != 0 ]; then
  TYPE_ARGS=(--entity-dropout-type "$ENTITY_TYPE" --entity-dropout-groups "$(qa_entity_groups)")
fi
fairseq-train "$FROM/data/bin/task2" --user-dir "$HERE/user_dir" --task babi_qa \
  --arch stpr_babi --adam-betas "(0.9,0.99)" --entity-dropout 0.2 --entity-dropout-init-alpha "$POS_FLAG" \
  --entity-dropout-story 0.3 --entity-dropout-words "$W" "${TYPE_ARGS[@]}" \
  --restore-file "$FROM/ck/stpr_t2_s$s/checkpoint_best.pt" --reset-lr-scheduler \
  --optimizer-overrides "{'lr':$LR}" --lr-scheduler fixed --lr "$LR" \
  --criterion cross_entropy --optimizer adam --clip-norm 5.0 --batch-size 32 --max-update "$MAXUP" \
  --save-dir "$SAVE" --no-epoch-checkpoints --num-workers 0 --cpu --seed "$s" \
  --log-format simple --log-interval 1000 > "$SAVE.log" 2>&1
