#!/usr/bin/env bash
# The runs of docs/qa.md "Task 2: budget, joint training, warm start, depth" (2026-11-26, CPU,
# two runs at a time, OMP_NUM_THREADS=1).  OUT is the scratch folder of
# ../tp_babi_rel/commands.sh (its data_n10, its task-1 checkpoint t1_rel_s0 and its task-2 run
# t2_rel_s0 at 20,000 updates).  The runs stopped by hand are marked; MAXUP is the limit given.
set -euo pipefail
OUT=${1:?OUT}
HERE=$(cd "$(dirname "$0")" && pwd)
REL=$HERE/../tp_babi_rel
OPTS="--dropout 0.1 --lr-scheduler reduce_lr_on_plateau --lr-shrink 0.5 --lr-patience 3 --encoder-relative-buckets 32"
T2=$OUT/data_n10/bin/task2
# (a) budget: the 2-layer task-2 run continued from 20,000 updates (stopped by hand at 31,000)
"$REL/train.sh" "$OUT" t2_rel_s0 "$T2" 0 60000 $OPTS
# (b) joint training on tasks 1 + 2 (one data folder, one dictionary; stopped at 21,500)
python "$HERE/make_joint.py" "$OUT/data_n10" "$OUT/joint12" 1 2
"$REL/train.sh" "$OUT" j12_rel_s0 "$OUT/joint12/bin" 0 60000 $OPTS
# (c) warm start: task 2 from the task-1 model (vocabulary re-indexed; stopped at 3,500)
for s in 0 1 2; do   # seed 0 stopped at 3,500; seeds 1 and 2 (run last) at 4,500
  python "$HERE/warm_start.py" "$OUT/ck/t1_rel_s$s/checkpoint_best.pt" "$OUT/data_n10/bin/task1" "$T2" \
      "$OUT/ck/t1_rel_s${s}_to_t2.pt"
  "$REL/train.sh" "$OUT" t2_from_t1_s$s "$T2" $s 40000 $OPTS --finetune-from-model "$OUT/ck/t1_rel_s${s}_to_t2.pt"
done
# (d) depth: 3 encoder layers from scratch (stopped at 13,500), and from each seed's task-1
# model grown to 3 layers (stopped by hand once the valid loss was <= 0.03 bits: seed 0 at
# 16,000 updates, seed 1 at 9,500, seed 2 at ~5,700)
# (continued 2026-11-26 from its last checkpoint with STOP_BITS=0.008; stopped by hand at ~24,000)
"$REL/train.sh" "$OUT" t2_e3_s0 "$T2" 0 40000 $OPTS --encoder-layers 3
for s in 0 1 2; do
  python "$HERE/warm_start.py" "$OUT/ck/t1_rel_s$s/checkpoint_best.pt" "$OUT/data_n10/bin/task1" "$T2" \
      "$OUT/ck/t1_rel_s${s}_to_t2_e3.pt" 3
  "$REL/train.sh" "$OUT" t2_e3_from_t1_s$s "$T2" $s 40000 $OPTS --encoder-layers 3 \
      --finetune-from-model "$OUT/ck/t1_rel_s${s}_to_t2_e3.pt"
done
# test error (greedy) and what the answers are
for n in t2_rel_s0 t2_e3_from_t1_s0 t2_e3_from_t1_s1 t2_e3_from_t1_s2; do
  "$REL/test_error.sh" "$OUT" $n "$T2"
  python "$REL/task2_failure_modes.py" "$OUT/ck/$n.gen"
done
for sub in test_t1 test_t2; do "$REL/test_error.sh" "$OUT" j12_rel_s0 "$OUT/joint12/bin" $sub; done
# (e) 3 encoder layers from scratch with 64 relative buckets, seeds 0 and 1 (2026-11-26,
# thirteenth session, stopped for time at ≈ 5,700 updates; run again from scratch in the
# fourteenth session, whose scratch folder was new: the same valid losses through 5,628 updates,
# stopped by hand for the session's end at 32,361 / 33,768 updates)
for s in 0 1; do
  STOP_BITS=0.008 "$REL/train.sh" "$OUT" t2_e3r64_s$s "$T2" $s 40000 \
      ${OPTS/--encoder-relative-buckets 32/--encoder-relative-buckets 64} --encoder-layers 3
done
for s in 0 1; do
  "$HERE/../valid_lines.sh" "$OUT/ck/t2_e3r64_s$s.log" "$HERE/t2_e3r64_s${s}_valid.txt"
  "$REL/test_error.sh" "$OUT" t2_e3r64_s$s "$T2"
  python "$REL/task2_failure_modes.py" "$OUT/ck/t2_e3r64_s$s.gen" > "$HERE/t2_e3r64_s${s}_failure_modes.txt"
done
python "$REL/plateau_exit.py" "$HERE"/t2_e3r64_s*_valid.txt
