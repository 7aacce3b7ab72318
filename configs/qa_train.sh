# Sourced by the QA sweep scripts: the training command they share (paper App. D set-up:
# batch 32, Adam, clip 5.0, lr halving on plateau, checkpoint_best on the held-out 10%).
#   qa_train DATA SAVE_DIR SEED MAX_UPDATE [model and extra fairseq-train options...]
# Uses LR, LR_PATIENCE and HERE from the caller; skips a run whose checkpoint_best.pt exists;
# the log goes to SAVE_DIR.log.
qa_train() {
  local data=$1 ck=$2 seed=$3 maxup=$4
  shift 4
  [ -f "$ck/checkpoint_best.pt" ] && return 0
  fairseq-train "$data" --user-dir "$HERE/user_dir" --task babi_qa "$@" --criterion cross_entropy \
      --optimizer adam --lr "$LR" --clip-norm 5.0 --batch-size 32 --max-update "$maxup" \
      --lr-scheduler reduce_lr_on_plateau --lr-shrink 0.5 --lr-patience "$LR_PATIENCE" --save-dir "$ck" \
      --no-epoch-checkpoints --no-last-checkpoints --num-workers 0 --cpu --seed "$seed" \
      --log-format simple --log-interval 1000 > "$ck.log" 2>&1
}

# qa_restore_args CKPT CALLER: RESTORE_ARGS=(--restore-file CKPT) to continue an earlier run
# (its weights, optimiser, update count and the whole plateau schedule: best loss, count of bad
# epochs, and the epoch's step that fairseq takes after saving; the last two only for checkpoints
# written since plugins/fairseq_fixes.py saves them); a missing CKPT is an error naming it.
qa_restore_args() {
  [ -f "$1" ] || { echo "$2: RESTORE=$RESTORE has no $1" >&2; exit 2; }
  RESTORE_ARGS=(--restore-file "$1")
}

# qa_entity_words / qa_entity_groups: bAbI's people, rooms and objects (data_prep/qa_zero_shot.py)
# as --entity-dropout-words and --entity-dropout-groups take them. Use HERE (and PY) from the caller.
qa_entity_words() {
  (cd "$HERE" && ${PY:-python} -c "from data_prep.qa_zero_shot import entity_words; print(entity_words())")
}
qa_entity_groups() {
  (cd "$HERE" && ${PY:-python} -c "from data_prep.qa_zero_shot import entity_groups; print(entity_groups())")
}
# qa_sym_pos_flag CALLER: the stpr flag SYM_POSITIONS names ("shared", the default:
# --symbolic-positions; "role": --symbolic-positions-per-role); anything else is an error naming CALLER.
qa_sym_pos_flag() {
  case ${SYM_POSITIONS:-shared} in
    shared) echo --symbolic-positions ;;
    role) echo --symbolic-positions-per-role ;;
    *) echo "$1: SYM_POSITIONS must be 'shared' or 'role', got '$SYM_POSITIONS'" >&2; return 2 ;;
  esac
}
