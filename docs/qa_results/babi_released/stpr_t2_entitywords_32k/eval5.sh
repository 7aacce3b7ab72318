#!/usr/bin/env bash
# eval5.sh: seeds 0-2 from snap_32k plus checkpoint_best of seeds 3, 4, read together (5 seeds)
source /work/qa_runs/env.sh
O=/work/qa_runs/babi10k_t2_ew32k; mkdir -p $O/snap_32k
for s in 3 4; do cp $O/ck/stpr_t2_s$s/checkpoint_best.pt $O/snap_32k/.s$s.tmp && mv $O/snap_32k/.s$s.tmp $O/snap_32k/s$s.pt; done
Z=$O/zero_shot/qa2_two-supporting-facts_test
OMP_NUM_THREADS=1 nesyseq evaluate qa $(for s in 0 1 2 3 4; do echo --checkpoint $O/snap_32k/s$s.pt; done) \
  --data $O/data/bin/task2 \
  --babi-file /work/qa_runs/babi_released/en-10k/qa2_two-supporting-facts_test.txt \
  --babi-file ${Z}_rooms.txt --babi-file ${Z}_objects.txt --babi-file ${Z}_people.txt --babi-file ${Z}_all.txt \
  --out $O/rep_32k_5seeds > $O/rep_32k_5seeds.log 2>&1
