#!/usr/bin/env bash
# read_t2.sh BABI_DIR ZERO_SHOT_DIR DATA_BIN OUT CKPT...
# Copies each CKPT to OUT/snap/sK.pt (atomically, so a checkpoint that training is rewriting is
# read whole), then reads the released task-2 test file and its four zero-shot renamings
# (rooms, objects, people, all; `prepare qa-zero-shot`) with `nesyseq evaluate qa`, mean ± std
# over the checkpoints: OUT/qa_external.{md,json}, log OUT.log.
set -euo pipefail
BABI=$1; Z=$2; DATA=$3; OUT=$4; shift 4
mkdir -p "$OUT/snap"
CKS=(); k=0
for ck in "$@"; do
  cp "$ck" "$OUT/snap/.s$k.tmp" && mv "$OUT/snap/.s$k.tmp" "$OUT/snap/s$k.pt"
  CKS+=(--checkpoint "$OUT/snap/s$k.pt"); k=$((k + 1))
done
T=$Z/qa2_two-supporting-facts_test
OMP_NUM_THREADS=1 nesyseq evaluate qa "${CKS[@]}" --data "$DATA" \
  --babi-file "$BABI/qa2_two-supporting-facts_test.txt" \
  --babi-file "${T}_rooms.txt" --babi-file "${T}_objects.txt" --babi-file "${T}_people.txt" --babi-file "${T}_all.txt" \
  --out "$OUT" > "$OUT.log" 2>&1
