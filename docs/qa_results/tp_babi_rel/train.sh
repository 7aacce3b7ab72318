#!/usr/bin/env bash
# One tp_transformer_tiny run on generated bAbI-style data (the qa_train command of
# configs/qa_train.sh, with the last checkpoint kept so that a run can be continued:
# calling it again with a larger MAXUP resumes from OUT/ck/NAME/checkpoint_last.pt).
#   train.sh OUT NAME DATA_BIN SEED MAXUP [fairseq-train options...]
# STOP_BITS: see below.
# FLAGS (default "--symbolic-embeddings --symbolic-output"; FLAGS="" = the non-symbolic twin).
set -euo pipefail
OUT=$1 N=$2 D=$3 S=$4 M=$5; shift 5
HERE=$(cd "$(dirname "$0")/../../.." && pwd)
CK=$OUT/ck/$N
mkdir -p "$CK"
read -r -a SYM <<< "${FLAGS---symbolic-embeddings --symbolic-output}"
START=0; [ -f "$CK.log" ] && START=$(wc -l < "$CK.log")
OMP_NUM_THREADS=${OMP_NUM_THREADS:-1} fairseq-train "$D" --user-dir "$HERE/user_dir" --task babi_qa \
  --arch tp_transformer_tiny ${SYM[@]+"${SYM[@]}"} --criterion cross_entropy --optimizer adam --lr 0.001 \
  --clip-norm 5.0 --batch-size 32 --max-update "$M" --save-dir "$CK" --no-epoch-checkpoints --num-workers 0 \
  --cpu --seed "$S" --log-format simple --log-interval 500 "$@" >> "$CK.log" 2>&1 &
PID=$! KILLED=0
# STOP_BITS (optional): stop once a saved checkpoint's valid loss (bits per token) is <= STOP_BITS,
# the rule the earlier runs applied by hand (0.008); checked after fairseq has logged the save
while [ -n "${STOP_BITS:-}" ] && kill -0 "$PID" 2>/dev/null; do
  sleep 10
  if tail -n +"$((START + 1))" "$CK.log" | sed -n 's/.*Saved checkpoint.*score \([0-9.]*\)).*/\1/p' |
      awk -v s="$STOP_BITS" '$1 <= s { f = 1 } END { exit !f }'; then
    kill -TERM "$PID" 2>/dev/null || true; KILLED=1
    echo "train.sh: stopped, valid loss <= $STOP_BITS bits" >> "$CK.log"
    break
  fi
done
wait "$PID" || [ "$KILLED" = 1 ]
