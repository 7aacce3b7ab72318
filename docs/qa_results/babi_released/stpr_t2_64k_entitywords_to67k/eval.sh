#!/usr/bin/env bash
# eval.sh TAG: snapshot checkpoint_last of the three seeds and read the five task-2 files
source /work/qa_runs/env.sh
T=$1; mkdir -p snap_$T
for s in 0 1 2; do cp ck_s$s/checkpoint_last.pt snap_$T/.s$s.tmp && mv snap_$T/.s$s.tmp snap_$T/s$s.pt; done
Z=/work/qa_runs/babi10k_t2_64k/zero_shot/qa2_two-supporting-facts_test
OMP_NUM_THREADS=1 nesyseq evaluate qa --checkpoint snap_$T/s0.pt --checkpoint snap_$T/s1.pt --checkpoint snap_$T/s2.pt \
  --data /work/qa_runs/babi10k_t2_64k/data/bin/task2 \
  --babi-file /work/qa_runs/babi_released/en-10k/qa2_two-supporting-facts_test.txt \
  --babi-file ${Z}_rooms.txt --babi-file ${Z}_objects.txt --babi-file ${Z}_people.txt --babi-file ${Z}_all.txt \
  --out rep_$T > rep_$T.log 2>&1
