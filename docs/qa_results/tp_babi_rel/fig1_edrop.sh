#!/usr/bin/env bash
# Fig. 1 with entity dropout on the names (ours, thirty-second session, 2026-11-28; docs/qa.md
# "Entity dropout on the names").  The symbolic runs of commands.sh (64 buckets, 36,000 updates
# at most, the same stop rule) with --entity-dropout RATE --entity-dropout-words @names: in
# training each name of a story is, with probability RATE, read as a word unseen in training
# (zero E row in and out, α at its initial value), so that the names' semantic rows cannot carry
# the answer.  The seeds run side by side, one thread each.
#   fig1_edrop.sh OUT NUM_NAMES [RATE] [SEEDS] [WORDS]
#                                                OUT as for commands.sh: OUT/data_nNUM_NAMES is
#                                                made here when missing (commands.sh's options);
#                                                WORDS: names (the default, @names) or all (no
#                                                word list: every distinct source word may be
#                                                dropped; runs tagged ..._edropRATEall_sS)
#   fig1_edrop.sh /tmp/fig1 10000 0.5 "0 1 2"     the first runs; then "3 4" beside
#   fig1_edrop.sh /tmp/fig1 1000 0.5 0              (seeds 0-2 ran under this script's first
#                                                   version, fig1_n10000_edrop.sh: the same runs)
#   fig1_edrop.sh /tmp/fig1 10 0.5 "0 1 2"  and  fig1_edrop.sh /tmp/fig1 100 0.5 "0 1 2"
#                                                at once (thirty-third session), then beside them
#   fig1_edrop.sh /tmp/fig1 10000 0.2 0  and  fig1_edrop.sh /tmp/fig1 10000 0.5 0 all
#                                                and later  fig1_edrop.sh /tmp/fig1 10000 0.5 1 all
#                                                and  fig1_edrop.sh /tmp/fig1 10000 0.8 0
#                                                (the rate and word-list ablation, one seed each)
# At the end, every checkpoint of this name count and rate so far on the test file and on it with
# every person renamed to a word the dictionary lacks (renamed_eval.sh; until the thirty-second
# session's review this step was run by hand, for 10,000 names after seeds 0-2 and 0-4 and for
# 1,000 names after seed 0).  Only finished runs (OUT/ck/NAME.finished, written after a run's last
# step) enter these two reports, so a call does not read the runs of another call for the same
# tag while they train (until the thirty-third session's review it did: the renamed report of the
# first no-list seed held the second mid-training, until the second call rewrote it).
set -euo pipefail
OUT=${1:?OUT} N=${2:?NUM_NAMES} RATE=${3:-0.5} SEEDS=${4:-"0 1 2"} WORDS=${5:-names}
HERE=$(cd "$(dirname "$0")" && pwd)
DATA=$OUT/data_n$N/bin/task1
if [ ! -f "$DATA/dict.src.txt" ]; then
  python -m nesyseq.cli.main prepare qa --generate --out "$OUT/data_n$N" --tasks 1 --num-names "$N" \
      --train-stories 10000 --test-stories 1000 --seed 0
fi
# the generator's names (qa_generate.make_names, generator seed 0), one per line
NAMES=$OUT/names_n$N.txt
python -c "import sys; from data_prep.qa_generate import make_names; print('\n'.join(make_names(int(sys.argv[1]), 0)))" \
    "$N" > "$NAMES.tmp.$$"
mv "$NAMES.tmp.$$" "$NAMES"   # one tmp per call: two calls may run at once
export STOP_BITS=0.008
REL64="--dropout 0.1 --lr-scheduler reduce_lr_on_plateau --lr-shrink 0.5 --lr-patience 3 --encoder-relative-buckets 64"
case $WORDS in
  names) LIST=(--entity-dropout-words "@$NAMES") SUFFIX= ;;
  all) LIST=() SUFFIX=all ;;
  *) echo "fig1_edrop.sh: WORDS must be names or all, got '$WORDS'" >&2; exit 2 ;;
esac
TAG=n${N}_edrop${RATE/./}${SUFFIX}_s
run() {
  local name=$TAG$1
  "$HERE/train.sh" "$OUT" "$name" "$DATA" "$1" 36000 $REL64 --entity-dropout "$RATE" ${LIST[@]+"${LIST[@]}"}
  "$HERE/test_error.sh" "$OUT" "$name" "$DATA"
  python "$HERE/../tp_babi_s10k/failure_modes.py" "$OUT/ck/$name.gen" > "$HERE/${name}_failure_modes.txt"
  "$HERE/../valid_lines.sh" "$OUT/ck/$name.log" "$HERE/${name}_valid.txt"
  touch "$OUT/ck/$name.finished"
}
mkdir -p "$OUT/ck"
pids=() fail=0
for s in $SEEDS; do run "$s" > "$OUT/ck/$TAG$s.out" 2>&1 & pids+=($!); done
for p in "${pids[@]}"; do wait "$p" || fail=1; done
[ "$fail" = 0 ] || { echo "fig1_edrop.sh: a run failed, see $OUT/ck/$TAG*.out" >&2; exit 1; }
# the gap table and the renamed report over every finished run of this tag (this call's seeds
# at least); RUNS: OUT/ck/NAME of each
RUNS=("$OUT"/ck/$TAG*.finished); RUNS=("${RUNS[@]%.finished}")
python "$HERE/gap_error.py" "${RUNS[@]/%/.gen}" > "$HERE/${TAG%_s}_gap_error.txt"
"$HERE/renamed_eval.sh" "$OUT" "$N" "$HERE/${TAG%_s}_people_renamed_external.md" "${RUNS[@]/%//checkpoint_best.pt}"
