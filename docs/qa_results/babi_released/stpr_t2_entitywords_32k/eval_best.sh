#!/usr/bin/env bash
# eval_best.sh OUTDIR TAG: snapshot checkpoint_best of the three seeds of OUTDIR and read the five task-2 files
source /work/qa_runs/env.sh
O=$1; T=$2; mkdir -p $O/snap_$T
for s in 0 1 2; do cp $O/ck/stpr_t2_s$s/checkpoint_best.pt $O/snap_$T/.s$s.tmp && mv $O/snap_$T/.s$s.tmp $O/snap_$T/s$s.pt; done
Z=$O/zero_shot/qa2_two-supporting-facts_test
OMP_NUM_THREADS=1 nesyseq evaluate qa --checkpoint $O/snap_$T/s0.pt --checkpoint $O/snap_$T/s1.pt --checkpoint $O/snap_$T/s2.pt \
  --data $O/data/bin/task2 \
  --babi-file /work/qa_runs/babi_released/en-10k/qa2_two-supporting-facts_test.txt \
  --babi-file ${Z}_rooms.txt --babi-file ${Z}_objects.txt --babi-file ${Z}_people.txt --babi-file ${Z}_all.txt \
  --out $O/rep_$T > $O/rep_$T.log 2>&1
