#!/usr/bin/env bash
# What the curriculum record scripts keep of one seed of a configs/qa_tp_babi_curriculum.sh OUT:
#   keep_curriculum_seed.sh OUT SEED DEST
# DEST/t1_sSEED_valid.txt and t2_sSEED_valid.txt (the per-epoch valid lines of both stages), the
# task-2 test error (printed; test_error.sh) and DEST/t2_sSEED_failure_modes.txt (what the answers are).
set -euo pipefail
OUT=$1 S=$2 DEST=$3
REL=$(cd "$(dirname "$0")" && pwd)
for n in t1_s$S t2_s$S; do "$REL/../valid_lines.sh" "$OUT/ck/$n.log" "$DEST/${n}_valid.txt"; done
"$REL/test_error.sh" "$OUT" "t2_s$S" "$OUT/data/bin/task2"
python "$REL/task2_failure_modes.py" "$OUT/ck/t2_s$S.gen" > "$DEST/t2_s${S}_failure_modes.txt"
