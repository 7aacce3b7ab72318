#!/usr/bin/env bash
# Fig. 1 at 10,000 names with entity dropout on the names (ours, thirty-second session,
# 2026-11-28; docs/qa.md "10,000 names, 64 buckets").  The symbolic runs of commands.sh's last
# block (64 buckets, 36,000 updates at most, the same stop rule) with --entity-dropout RATE
# --entity-dropout-words @names: in training each name of a story is, with probability RATE, read
# as a word unseen in training (zero E row in and out, α at its initial value), so that the
# names' semantic rows cannot carry the answer.  Three seeds side by side.
#   fig1_n10000_edrop.sh OUT [RATE]   OUT as for commands.sh (its OUT/data_n10000 is reused)
set -euo pipefail
OUT=${1:?OUT} RATE=${2:-0.5}
HERE=$(cd "$(dirname "$0")" && pwd)
N10000=$OUT/data_n10000/bin/task1
[ -f "$N10000/dict.src.txt" ] || { echo "$N10000: no binarised data; run the data step of commands.sh's last block" >&2; exit 1; }
# the 10,000 names of the generator (qa_generate.make_names, generator seed 0), one per line
NAMES=$OUT/names_n10000.txt
python -c "from data_prep.qa_generate import make_names; print('\n'.join(make_names(10000, 0)))" > "$NAMES.tmp"
mv "$NAMES.tmp" "$NAMES"
export STOP_BITS=0.008
REL64="--dropout 0.1 --lr-scheduler reduce_lr_on_plateau --lr-shrink 0.5 --lr-patience 3 --encoder-relative-buckets 64"
TAG=n10000_edrop${RATE/./}_s
run() {
  local name=$TAG$1
  "$HERE/train.sh" "$OUT" "$name" "$N10000" "$1" 36000 $REL64 --entity-dropout "$RATE" --entity-dropout-words "@$NAMES"
  "$HERE/test_error.sh" "$OUT" "$name" "$N10000"
  python "$HERE/../tp_babi_s10k/failure_modes.py" "$OUT/ck/$name.gen" > "$HERE/${name}_failure_modes.txt"
  sed -n 's/.* | INFO | valid | //p' "$OUT/ck/$name.log" > "$HERE/${name}_valid.txt.tmp"
  mv "$HERE/${name}_valid.txt.tmp" "$HERE/${name}_valid.txt"
}
for s in 0 1 2; do run $s > "$OUT/ck/$TAG$s.out" 2>&1 & done
wait
python "$HERE/gap_error.py" "$OUT"/ck/$TAG{0,1,2}.gen > "$HERE/${TAG%_s}_gap_error.txt"
