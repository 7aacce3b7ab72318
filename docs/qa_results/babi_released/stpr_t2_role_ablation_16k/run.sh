#!/usr/bin/env bash
# Issue 23 part 1: which of our options the task-2 one command still needs once each role MLP has
# its own row of symbolic position weights (2026-11-27, twenty-first session). Task 2 of the
# released en-10k folder, seed 2 (a seed the shared row failed), 16,000 updates, one option taken
# out at a time from SYM_POSITIONS=role ENTITY_TYPE=0.3 configs/qa_babi_table2.sh (EXTRA spelled
# out). Runs one after another (one thread).
#   run.sh REPO BABI_DIR OUT_ROOT DATA [SEED] [VARIANTS]
set -euo pipefail
REPO=$1; B=$2; ROOT=$3; DATA=$4; SEED=${5:-2}
VARIANTS=${6:-"full none no_story no_type no_words no_alpha no_perword"}
HERE=$REPO
source "$REPO/configs/qa_train.sh"
W=$(qa_entity_words); G=$(qa_entity_groups)
for v in $VARIANTS; do
  words="--entity-dropout-words $W"; typ="--entity-dropout-type 0.3 --entity-dropout-groups $G"
  story="--entity-dropout-story 0.3"; alpha="--entity-dropout-init-alpha"; pw="--entity-dropout 0.2"
  case $v in
    full) ;;
    none) pw=""; story=""; alpha=""; words=""; typ="" ;;   # the paper's stpr + per-role rows
    no_story) story="" ;;
    no_type) typ="" ;;
    no_words) words="" ;;
    no_alpha) alpha="" ;;
    no_perword) pw="" ;;
    *) echo "run.sh: unknown variant $v" >&2; exit 2 ;;
  esac
  O=$ROOT/$v
  mkdir -p "$O"; ln -sfn "$DATA" "$O/data"
  EXTRA="--symbolic-positions-per-role $pw $alpha $story $words $typ" \
    bash "$REPO/configs/qa_babi_table2.sh" "$B" "$O" stpr "$SEED" 2 16000 > "$O/run_s$SEED.out" 2>&1 \
    || echo "run.sh: $v failed (see $O/run_s$SEED.out)" >&2
done
