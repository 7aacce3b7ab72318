#!/usr/bin/env bash
# docs/qa.md "The curriculum as one command, on another generator seed", the continuation
# (2026-11-27, seventeenth session, CPU, both seeds at once, one thread each): task-2 seeds 0 and 2
# of ../commands.sh's OUT, which sat on the second plateau at 20,000 updates, trained on from their
# checkpoint_best.pt with --finetune-from-model (fresh Adam and plateau schedule at lr 1e-3, the lr
# they still had) for up to 20,000 more updates. Stopped by hand after 14,070 (epoch 10): the
# valid loss had not moved below 0.30 / 0.295 for five epochs. Then test error and failure modes.
#   docs/qa_results/tp_babi_curriculum_d1/continued/run.sh OUT CONT   (repository root as cwd)
set -euo pipefail
OUT=${1:?OUT of ../commands.sh}; CONT=${2:?a scratch folder}
HERE=$(cd "$(dirname "$0")/../../../.." && pwd)
REL=$HERE/docs/qa_results/tp_babi_rel
LR=0.001; LR_PATIENCE=3
export OMP_NUM_THREADS=1
# shellcheck source=configs/qa_train.sh
source "$HERE/configs/qa_train.sh"
T2=$OUT/data/bin/task2
mkdir -p "$CONT/ck"
for s in 0 2; do
  qa_train "$T2" "$CONT/ck/t2_s${s}_cont" "$s" 20000 --arch tp_transformer_tiny --symbolic-embeddings \
     --symbolic-output --encoder-relative-buckets 32 --dropout 0.1 --encoder-layers 3 \
     --finetune-from-model "$OUT/ck/t2_s$s/checkpoint_best.pt" &
done
wait
for s in 0 2; do
  "$REL/test_error.sh" "$CONT" "t2_s${s}_cont" "$T2"
  python "$REL/task2_failure_modes.py" "$CONT/ck/t2_s${s}_cont.gen" > "$(dirname "$0")/t2_s${s}_cont_failure_modes.txt"
done
