#!/usr/bin/env bash
# Test error of OUT/ck/NAME/checkpoint_best.pt (greedy, answer = first token):
#   test_error.sh OUT NAME DATA_BIN [SUBSET]   writes OUT/ck/NAME.gen (NAME.SUBSET.gen for a
#                                              SUBSET other than test; for the failure-mode
#                                              scripts) and prints the error on SUBSET (test)
set -euo pipefail
OUT=$1 N=$2 D=$3 SUB=${4:-test}
D=$(cd "$D" && pwd)   # absolute: the error step below runs from the repository root
G=$OUT/ck/$N.gen; [ "$SUB" = test ] || G=$OUT/ck/$N.$SUB.gen
HERE=$(cd "$(dirname "$0")/../../.." && pwd)
OMP_NUM_THREADS=${OMP_NUM_THREADS:-1} fairseq-generate "$D" --user-dir "$HERE/user_dir" --task babi_qa \
  --path "$OUT/ck/$N/checkpoint_best.pt" --gen-subset "$SUB" --beam 1 --batch-size 128 --cpu > "$G" 2>/dev/null
# the error itself: evaluations.qa_eval.answer_error (argmax at the answer step = --beam 1, except
# where that argmax is EOS: generate forbids it at the first step, answer_error counts it wrong)
cd "$HERE" && python -c "import sys; from evaluations.qa_eval import answer_error
r = answer_error(sys.argv[1], sys.argv[2], sys.argv[4]); print(f'{sys.argv[3]}: {sys.argv[4]} error {r[\"error\"]:.2f}% of {r[\"questions\"]}')" \
  "$OUT/ck/$N/checkpoint_best.pt" "$D" "$N" "$SUB"
