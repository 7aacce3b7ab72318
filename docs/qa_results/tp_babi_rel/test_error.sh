#!/usr/bin/env bash
# Test error of OUT/ck/NAME/checkpoint_best.pt (greedy, answer = first token):
#   test_error.sh OUT NAME DATA_BIN      writes OUT/ck/NAME.gen (for the failure-mode scripts)
#                                        and prints the error
set -euo pipefail
OUT=$1 N=$2 D=$3
HERE=$(cd "$(dirname "$0")/../../.." && pwd)
OMP_NUM_THREADS=${OMP_NUM_THREADS:-1} fairseq-generate "$D" --user-dir "$HERE/user_dir" --task babi_qa \
  --path "$OUT/ck/$N/checkpoint_best.pt" --gen-subset test --beam 1 --batch-size 128 --cpu > "$OUT/ck/$N.gen" 2>/dev/null
# the error itself: evaluations.qa_eval.answer_error (argmax at the answer step = --beam 1)
cd "$HERE" && python -c "import sys; from evaluations.qa_eval import answer_error
r = answer_error(sys.argv[1], sys.argv[2]); print(f'{sys.argv[3]}: test error {r[\"error\"]:.2f}% of {r[\"questions\"]}')" \
  "$OUT/ck/$N/checkpoint_best.pt" "$D" "$N"
