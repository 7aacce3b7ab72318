#!/usr/bin/env bash
# The test file of OUT/data_nN with every person renamed to a word the dictionary lacks
# (rename_people.py), then `nesyseq evaluate qa` of the checkpoints on both files, its report
# kept as DEST (commands.sh's Fig. 1 blocks, fig1_edrop.sh).
#   renamed_eval.sh OUT N DEST CKPT...
set -euo pipefail
OUT=${1:?OUT} N=${2:?NUM_NAMES} DEST=${3:?DEST}; shift 3
HERE=$(cd "$(dirname "$0")" && pwd)
TEST=$OUT/data_n$N/raw/qa1_test.txt RENAMED=$OUT/qa1_test_n${N}_people.txt
python "$HERE/rename_people.py" "$TEST" "$OUT/data_n$N/bin/task1/dict.src.txt" "$RENAMED"
CKS=(); for c in "$@"; do CKS+=(--checkpoint "$c"); done
REPORT=$OUT/ext_$(basename "$DEST" .md)
nesyseq evaluate qa "${CKS[@]}" --babi-file "$TEST" --babi-file "$RENAMED" --out "$REPORT"
cp "$REPORT/qa_external.md" "$DEST.tmp" && mv "$DEST.tmp" "$DEST"
