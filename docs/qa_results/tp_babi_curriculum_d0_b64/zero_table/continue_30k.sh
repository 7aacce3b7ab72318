#!/usr/bin/env bash
# Do the zeroed-table runs that reached the 20,000-update budget still improve? (docs/qa.md,
# "Which part of the start"; 2026-11-28, twenty-seventh session, CPU, one thread per run, the two
# at once.) Starts 0 and 2 of commands.sh continued from their checkpoint_last.pt (weights,
# optimiser, update count, plateau schedule; lr still 1e-3 at 20,000) to 30,000 updates with the
# same model and training options, into a new folder; then the test error of each
# checkpoint_best.pt and its failure modes.
#   continue_30k.sh ZERO_TABLE_OUT NEW_OUT [SEEDS] [DEST]
# (SEEDS default "0 2"; DEST, where the valid and failure-mode files go, default this folder;
#  also used for generator seed 1's zero_table_s2: SEEDS=2, DEST that folder.)
set -euo pipefail
FIRST=${1:?ZERO_TABLE_OUT: the folder of commands.sh}
OUT=${2:?NEW_OUT: a new folder}
HERE=$(cd "$(dirname "$0")/../../../.." && pwd)
SEEDS=${3:-"0 2"} REL=$(cd "${4:-$(dirname "$0")}" && pwd)
LR=0.001 LR_PATIENCE=3
export OMP_NUM_THREADS=1
# shellcheck source=configs/qa_train.sh
source "$HERE/configs/qa_train.sh"
mkdir -p "$OUT/ck"
[ -e "$OUT/data" ] || ln -s "$FIRST/data" "$OUT/data"   # called again: resumes (qa_train)
for s in $SEEDS; do
  qa_train "$OUT/data/bin/task2" "$OUT/ck/t2_s$s" "$s" 30000 --arch tp_transformer_tiny --symbolic-embeddings \
      --symbolic-output --encoder-relative-buckets 64 --dropout 0.1 --encoder-layers 3 \
      --restore-file "$FIRST/ck/t2_s$s/checkpoint_last.pt" &
done
wait
for s in $SEEDS; do
  "$HERE/docs/qa_results/valid_lines.sh" "$OUT/ck/t2_s$s.log" "$REL/t2_s${s}_30k_valid.txt"
  "$HERE/docs/qa_results/tp_babi_rel/test_error.sh" "$OUT" "t2_s$s" "$OUT/data/bin/task2"
  python "$HERE/docs/qa_results/tp_babi_rel/task2_failure_modes.py" "$OUT/ck/t2_s$s.gen" > "$REL/t2_s${s}_30k_failure_modes.txt"
done
