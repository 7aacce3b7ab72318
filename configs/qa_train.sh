# Sourced by the QA sweep scripts: the training command they share (paper App. D set-up:
# batch 32, Adam, clip 5.0, lr halving on plateau, checkpoint_best on the held-out 10%).
#   qa_train DATA SAVE_DIR SEED MAX_UPDATE [model and extra fairseq-train options...]
# Uses LR, LR_PATIENCE and HERE from the caller; the log goes to SAVE_DIR.log.
# A finished run leaves SAVE_DIR.done and is skipped when called again. An interrupted one
# (SAVE_DIR/checkpoint_last.pt, no .done) continues from its checkpoint_last.pt: fairseq's own
# resume (weights, optimiser, update count, data order, and the plateau schedule since
# plugins/fairseq_fixes.py saves it whole; on one CPU thread the weights end as in an
# uninterrupted run), with any --restore-file option dropped (fairseq would start from that file
# again) and the log continued; one whose log says fairseq finished ("done training") only gets
# its marker (a second guard: before plugins/fairseq_fixes.py, fairseq resumed at its budget
# trained one more update).
# A SAVE_DIR with a checkpoint_best.pt but neither (written before qa_train kept them: finished
# or interrupted cannot be told) is left as it is, with a warning.
qa_train() {
  local data=$1 ck=$2 seed=$3 maxup=$4
  shift 4
  [ -f "$ck.done" ] && return 0
  local args=()
  if [ -f "$ck/checkpoint_last.pt" ] && grep -q "fairseq_cli.train | done training" "$ck.log" 2>/dev/null; then
    touch "$ck.done"   # it finished but was stopped before its marker (nothing left to train)
    return 0
  elif [ -f "$ck/checkpoint_last.pt" ]; then
    while [ $# -gt 0 ]; do
      case $1 in
        --restore-file=*) shift ;;
        --restore-file) [ $# -ge 2 ] || { echo "qa_train: --restore-file without a file" >&2; return 2; }
                        shift 2 ;;
        *) args+=("$1"); shift ;;
      esac
    done
    echo "qa_train: resuming $ck from its checkpoint_last.pt" >> "$ck.log"
  elif [ -f "$ck/checkpoint_best.pt" ]; then
    echo "qa_train: $ck has a checkpoint_best.pt but no checkpoint_last.pt and no $ck.done (a run of" \
         "an older qa_train, finished or interrupted): used as it is; move it away to train it again" >&2
    return 0
  else
    args=("$@")
    : > "$ck.log"
  fi
  fairseq-train "$data" --user-dir "$HERE/user_dir" --task babi_qa ${args[@]+"${args[@]}"} --criterion cross_entropy \
      --optimizer adam --lr "$LR" --clip-norm 5.0 --batch-size 32 --max-update "$maxup" \
      --lr-scheduler reduce_lr_on_plateau --lr-shrink 0.5 --lr-patience "$LR_PATIENCE" --save-dir "$ck" \
      --no-epoch-checkpoints --num-workers 0 --cpu --seed "$seed" \
      --log-format simple --log-interval 1000 >> "$ck.log" 2>&1 || return $?
  touch "$ck.done"
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
