#!/usr/bin/env bash
# eval.sh TAG: snapshot checkpoint_last of the three seeds and read the five task-2 files
source /work/qa_runs/env.sh
T=$1; mkdir -p /work/qa_runs/t2_ew32d/snap_$T
for s in 0 1 2; do cp /work/qa_runs/t2_ew32d/ck_s$s/checkpoint_last.pt /work/qa_runs/t2_ew32d/snap_$T/.s$s.tmp && mv /work/qa_runs/t2_ew32d/snap_$T/.s$s.tmp /work/qa_runs/t2_ew32d/snap_$T/s$s.pt; done
Z=/work/qa_runs/babi10k_t2_64k/zero_shot/qa2_two-supporting-facts_test
OMP_NUM_THREADS=1 nesyseq evaluate qa --checkpoint /work/qa_runs/t2_ew32d/snap_$T/s0.pt --checkpoint /work/qa_runs/t2_ew32d/snap_$T/s1.pt --checkpoint /work/qa_runs/t2_ew32d/snap_$T/s2.pt \
  --data /work/qa_runs/babi10k_t2_64k/data/bin/task2 \
  --babi-file /work/qa_runs/babi_released/en-10k/qa2_two-supporting-facts_test.txt \
  --babi-file ${Z}_rooms.txt --babi-file ${Z}_objects.txt --babi-file ${Z}_people.txt --babi-file ${Z}_all.txt \
  --out /work/qa_runs/t2_ew32d/rep_$T > /work/qa_runs/t2_ew32d/rep_$T.log 2>&1
