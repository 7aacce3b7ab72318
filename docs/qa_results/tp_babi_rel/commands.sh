#!/usr/bin/env bash
# The runs of docs/qa.md "Relative positions: the symbolic transformer learns task 1"
# (2026-11-26, CPU, two runs at a time, OMP_NUM_THREADS=1).  OUT is any scratch folder.
set -euo pipefail
OUT=${1:?OUT}
HERE=$(cd "$(dirname "$0")" && pwd)
# NAME_valid.txt, kept here for every run: the per-epoch valid lines of OUT/ck/NAME.log, taken
# after NAME's last training call (the loop at the end of this file; the 64-bucket blocks take
# theirs as they finish; the first plateau_exit.py call reads the 32-bucket curves as kept here)
keep_valid() {  # the log must exist; the kept file is replaced whole or not at all
  "$HERE/../valid_lines.sh" "$OUT/ck/$1.log" "$HERE/$1_valid.txt"
}
# data: 10 names, 10,000 train stories (10% held out as valid), 1,000 test stories; the same
# binaries as `--tasks 1` alone (checked with cmp) and as docs/qa_results/tp_babi_s10k
python -m nesyseq.cli.main prepare qa --generate --out "$OUT/data_n10" --tasks 1,2 --num-names 10 \
    --train-stories 10000 --test-stories 1000 --seed 0
python -m nesyseq.cli.main prepare qa --generate --out "$OUT/data_n1000" --tasks 1 --num-names 1000 \
    --train-stories 10000 --test-stories 1000 --seed 0
python -m nesyseq.cli.main prepare qa --generate --out "$OUT/data_n100" --tasks 1 --num-names 100 \
    --train-stories 10000 --test-stories 1000 --seed 0
PLATEAU="--dropout 0.1 --lr-scheduler reduce_lr_on_plateau --lr-shrink 0.5 --lr-patience 3"
REL="$PLATEAU --encoder-relative-buckets 32"
T1=$OUT/data_n10/bin/task1 T2=$OUT/data_n10/bin/task2 N1000=$OUT/data_n1000/bin/task1
N100=$OUT/data_n100/bin/task1
# seed-1 ablation, 8,000 updates each (the two marked * were stopped at 5,628)
"$HERE/train.sh" "$OUT" t1_base_s1 "$T1" 1 8000 $PLATEAU
"$HERE/train.sh" "$OUT" t1_lq0_s1 "$T1" 1 8000 $PLATEAU --symbolic-score-init 0
"$HERE/train.sh" "$OUT" t1_d0_s1 "$T1" 1 8000 ${PLATEAU/--dropout 0.1/--dropout 0.0}            # *
"$HERE/train.sh" "$OUT" t1_lr3w_s1 "$T1" 1 8000 --dropout 0.1 --lr-scheduler inverse_sqrt \
    --warmup-updates 1000 --warmup-init-lr 1e-7 --lr 0.003                                       # *
# relative positions, task 1: first 8,000 updates, then continued (same call, larger MAXUP);
# seeds 0 and 1 were stopped by hand once the valid loss was <= 0.008 bits (9,849 / 11,256
# updates), seed 2 ran to 20,000 (copy kept) and was continued to 30,000
for s in 0 1 2; do "$HERE/train.sh" "$OUT" t1_rel_s$s "$T1" $s 8000 $REL; done
for s in 0 1 2; do "$HERE/train.sh" "$OUT" t1_rel_s$s "$T1" $s 20000 $REL; done
"$HERE/train.sh" "$OUT" t1_rel_s2 "$T1" 2 30000 $REL
# task 2 and Fig. 1's 1,000 names (one seed each)
"$HERE/train.sh" "$OUT" t2_rel_s0 "$T2" 0 20000 $REL
"$HERE/train.sh" "$OUT" n1000_rel_s0 "$N1000" 0 12000 $REL
FLAGS="" "$HERE/train.sh" "$OUT" n1000_plainrel_s0 "$N1000" 0 12000 $REL
"$HERE/train.sh" "$OUT" n1000_rel_s0 "$N1000" 0 24000 $REL       # continued (12k copy kept)
"$HERE/train.sh" "$OUT" n1000_rel_s1 "$N1000" 1 24000 $REL
# the non-symbolic twin with the bias at 10 names
for s in 0 1; do FLAGS="" "$HERE/train.sh" "$OUT" t1_plainrel_s$s "$T1" $s 20000 $REL; done
# test error (greedy) and failure modes
for n in t1_rel_s0 t1_rel_s1 t1_rel_s2; do
  "$HERE/test_error.sh" "$OUT" $n "$T1"
  python "$HERE/../tp_babi_s10k/failure_modes.py" "$OUT/ck/$n.gen"
done
"$HERE/test_error.sh" "$OUT" t2_rel_s0 "$T2"
python "$HERE/task2_failure_modes.py" "$OUT/ck/t2_rel_s0.gen"
for n in n1000_rel_s0 n1000_rel_s1 n1000_plainrel_s0; do "$HERE/test_error.sh" "$OUT" $n "$N1000"; done
for n in t1_plainrel_s0 t1_plainrel_s1; do "$HERE/test_error.sh" "$OUT" $n "$T1"; done
# Fig. 1, completed 2026-11-26 (eleventh session): every seed at 100 names, the third seed at
# 1,000 names and 10 names' third twin; two runs at a time, each stopped by the script once the
# valid loss was <= 0.008 bits (STOP_BITS), else at the budget
export STOP_BITS=0.008
for s in 0 1 2; do
  "$HERE/train.sh" "$OUT" n100_rel_s$s "$N100" $s 20000 $REL
  FLAGS="" "$HERE/train.sh" "$OUT" n100_plainrel_s$s "$N100" $s 20000 $REL
done
"$HERE/train.sh" "$OUT" n1000_rel_s2 "$N1000" 2 24000 $REL
for s in 1 2; do FLAGS="" "$HERE/train.sh" "$OUT" n1000_plainrel_s$s "$N1000" $s 12000 $REL; done
FLAGS="" "$HERE/train.sh" "$OUT" t1_plainrel_s2 "$T1" 2 20000 $REL
for n in n100_rel_s0 n100_rel_s1 n100_rel_s2 n100_plainrel_s0 n100_plainrel_s1 n100_plainrel_s2; do
  "$HERE/test_error.sh" "$OUT" $n "$N100"
done
for n in n1000_rel_s2 n1000_plainrel_s1 n1000_plainrel_s2; do "$HERE/test_error.sh" "$OUT" $n "$N1000"; done
"$HERE/test_error.sh" "$OUT" t1_plainrel_s2 "$T1"
# the three symbolic 1,000-name runs continued from their 24,000-update state to 36,000 (copies
# of the 24,000-update folders kept as n1000_rel_s*_24k; same stop rule)
for s in 0 2 1; do
  "$HERE/train.sh" "$OUT" n1000_rel_s$s "$N1000" $s 36000 $REL
  "$HERE/test_error.sh" "$OUT" n1000_rel_s$s "$N1000"
done
# when each run left the plateau (first valid loss below 0.5 bits)
python "$HERE/plateau_exit.py" "$HERE"/*_valid.txt
# seed 0 at 1,000 names continued to 48,000 updates and the twin's seed 1 to 24,000 (copies of
# the 36,000- and 12,000-update folders kept as *_36k / *_12k); checkpoint_best did not change
"$HERE/train.sh" "$OUT" n1000_rel_s0 "$N1000" 0 48000 $REL
FLAGS="" "$HERE/train.sh" "$OUT" n1000_plainrel_s1 "$N1000" 1 24000 $REL
for n in n1000_rel_s0 n1000_plainrel_s1; do "$HERE/test_error.sh" "$OUT" $n "$N1000"; done
# seed 0's remaining 1,000-name error against the asked name's training frequency
python "$HERE/name_frequency.py" "$OUT/data_n1000/raw/qa1_train.txt" "$OUT"/ck/n1000_rel_s{0,1,2}.gen \
    "$OUT"/ck/n1000_rel_s{0,2}_24k.gen > "$HERE/n1000_name_frequency.txt"
# what seed 0 at 1,000 names gets wrong (2026-11-26): error by the distance to the asked person's
# latest statement, on test and on its own training questions; and every person renamed to a word
# the dictionary lacks (zero semantic embedding: only the symbolic slot tells people apart)
"$HERE/test_error.sh" "$OUT" n1000_rel_s0 "$N1000" train
python "$HERE/gap_error.py" "$OUT"/ck/n1000_rel_s0.gen "$OUT"/ck/n1000_rel_s0.train.gen \
    "$OUT"/ck/n1000_rel_s0_24k.gen "$OUT"/ck/n1000_rel_s1.gen "$OUT"/ck/n1000_rel_s1_24k.gen \
    "$OUT"/ck/n1000_rel_s2.gen "$OUT"/ck/n1000_rel_s2_24k.gen "$OUT"/ck/n1000_plainrel_s0.gen \
    > "$HERE/n1000_gap_error.txt"
"$HERE/renamed_eval.sh" "$OUT" 1000 "$HERE/n1000_people_renamed_external.md" "$OUT"/ck/n1000_rel_s{0,1,2}/checkpoint_best.pt
# 64 relative buckets instead of 32 at 1,000 names (2026-11-26, twelfth session): the symbolic
# model to 36,000 updates and its twin to 12,000, 3 seeds each, same stop rule; then the same
# analyses as above
REL64=${REL/--encoder-relative-buckets 32/--encoder-relative-buckets 64}
for s in 0 1 2; do
  "$HERE/train.sh" "$OUT" n1000_rel64_s$s "$N1000" $s 36000 $REL64
  "$HERE/test_error.sh" "$OUT" n1000_rel64_s$s "$N1000"
  python "$HERE/../tp_babi_s10k/failure_modes.py" "$OUT/ck/n1000_rel64_s$s.gen" > "$HERE/n1000_rel64_s${s}_failure_modes.txt"
  FLAGS="" "$HERE/train.sh" "$OUT" n1000_plainrel64_s$s "$N1000" $s 12000 $REL64
  "$HERE/test_error.sh" "$OUT" n1000_plainrel64_s$s "$N1000"
done
python "$HERE/gap_error.py" "$OUT"/ck/n1000_rel64_s{0,1,2}.gen "$OUT"/ck/n1000_plainrel64_s{0,1,2}.gen > "$HERE/n1000_rel64_gap_error.txt"
for s in 0 1 2; do keep_valid n1000_rel64_s$s; keep_valid n1000_plainrel64_s$s; done
python "$HERE/plateau_exit.py" "$HERE"/n1000_rel64_s*_valid.txt "$HERE"/n1000_plainrel64_s*_valid.txt
"$HERE/renamed_eval.sh" "$OUT" 1000 "$HERE/n1000_rel64_people_renamed_external.md" "$OUT"/ck/n1000_rel64_s{0,1,2}/checkpoint_best.pt
# 64 relative buckets at 10 and 100 names (2026-11-26, thirteenth session): the Fig. 1 runs above
# again with --encoder-relative-buckets 64, symbolic and twin, 3 seeds, 20,000 updates at most,
# the same stop rule (two lanes, one per name count, run side by side)
for s in 0 1 2; do
  for L in 10 100; do
    D=$OUT/data_n$L/bin/task1
    "$HERE/train.sh" "$OUT" n${L}_rel64_s$s "$D" $s 20000 $REL64
    "$HERE/test_error.sh" "$OUT" n${L}_rel64_s$s "$D"
    FLAGS="" "$HERE/train.sh" "$OUT" n${L}_plainrel64_s$s "$D" $s 20000 $REL64
    "$HERE/test_error.sh" "$OUT" n${L}_plainrel64_s$s "$D"
  done
done
for L in 10 100; do for m in rel64 plainrel64; do for s in 0 1 2; do
  keep_valid n${L}_${m}_s$s
  python "$HERE/../tp_babi_s10k/failure_modes.py" "$OUT/ck/n${L}_${m}_s$s.gen" > "$HERE/n${L}_${m}_s${s}_failure_modes.txt"
done; done; done
python "$HERE/plateau_exit.py" "$HERE"/n10_rel64_s*_valid.txt "$HERE"/n10_plainrel64_s*_valid.txt \
    "$HERE"/n100_rel64_s*_valid.txt "$HERE"/n100_plainrel64_s*_valid.txt
python "$HERE/gap_error.py" "$OUT"/ck/n10_rel64_s{0,1,2}.gen "$OUT"/ck/n10_plainrel64_s{0,1,2}.gen \
    "$OUT"/ck/n100_rel64_s{0,1,2}.gen "$OUT"/ck/n100_plainrel64_s{0,1,2}.gen > "$HERE/n10_n100_rel64_gap_error.txt"
# every valid curve kept here, from the final logs (the runs above, t2_rel_s0 at 20,000 updates:
# ../tp_babi_task2/commands.sh continues it later)
for f in "$HERE"/*_valid.txt; do keep_valid "$(basename "$f" _valid.txt)"; done
# Fig. 1 at 10,000 names (2026-11-28, thirty-first session): the 64-bucket runs of 1,000 names
# again on data regenerated with 10,000 names (same generator seed, story counts and options),
# symbolic to 36,000 updates at most, its twin to 12,000, the same stop rule; two lanes
python -m nesyseq.cli.main prepare qa --generate --out "$OUT/data_n10000" --tasks 1 --num-names 10000 \
    --train-stories 10000 --test-stories 1000 --seed 0
N10000=$OUT/data_n10000/bin/task1
fig1_n10000() {  # fig1_n10000 SEED: the symbolic run; fig1_n10000 SEED twin: the twin
  local name=n10000_rel64_s$1
  if [ "${2:-}" = twin ]; then
    name=n10000_plainrel64_s$1
    FLAGS="" "$HERE/train.sh" "$OUT" $name "$N10000" $1 12000 $REL64
  else
    "$HERE/train.sh" "$OUT" $name "$N10000" $1 36000 $REL64
  fi
  "$HERE/test_error.sh" "$OUT" $name "$N10000"
  python "$HERE/../tp_babi_s10k/failure_modes.py" "$OUT/ck/$name.gen" > "$HERE/${name}_failure_modes.txt"
  keep_valid $name
}
( fig1_n10000 0; fig1_n10000 2 ) &
( fig1_n10000 1; for s in 0 1 2; do fig1_n10000 $s twin; done ) &
wait
python "$HERE/plateau_exit.py" "$HERE"/n10000_rel64_s*_valid.txt "$HERE"/n10000_plainrel64_s*_valid.txt
python "$HERE/gap_error.py" "$OUT"/ck/n10000_rel64_s{0,1,2}.gen "$OUT"/ck/n10000_plainrel64_s{0,1,2}.gen \
    > "$HERE/n10000_rel64_gap_error.txt"
# every person of the 10,000-name test file renamed to a word the dictionary lacks (zero semantic
# rows), the three symbolic checkpoints read on both files
"$HERE/renamed_eval.sh" "$OUT" 10000 "$HERE/n10000_rel64_people_renamed_external.md" "$OUT"/ck/n10000_rel64_s{0,1,2}/checkpoint_best.pt
