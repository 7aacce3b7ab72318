# What ran (2026-11-27, seventeenth session; scratch paths as in ../commands.sh). The two seeds that
# missed a target at 32,000 updates (2: people / all-new; 3: the original test), continued from
# their checkpoint_best (seed 2's is at 28,764 updates, seed 3's at 32,000) to 40,000 updates,
# the two arms below on the 2-core box two runs at a time.
B=/work/qa_runs/babi/en-10k
O=/work/qa_runs/babi10k_t2_type03
# arm 1, held lr: the same recipe (word list, per-type dropout 0.3), Adam's moments kept, the lr
# schedule reset and the lr held at 1e-3 (the fix of task 1's failing seed, docs/qa.md)
for s in 2 3; do ENTITY_TYPE=0.3 ../../continue_t2_held_lr.sh $O /work/qa_runs/type03_cont/stpr_t2_s$s $s 0.001 40000 & done; wait
../../read_t2.sh $B $O/zero_shot $O/data/bin/task2 heldlr1e-3 /work/qa_runs/type03_cont/stpr_t2_s{2,3}/checkpoint_last.pt
# arm 2, the control: the run's own optimiser and plateau schedule restored (RESTORE), same budget
# (ran as one call with SEEDS "2 3", stopped by hand when it began seed 3, which ran as the next line)
RESTORE=$O ENTITY_TYPE=0.3 configs/qa_babi_table2.sh $B /work/qa_runs/type03_ctrl stpr 2 2 40000 &
RESTORE=$O ENTITY_TYPE=0.3 configs/qa_babi_table2.sh $B /work/qa_runs/type03_ctrl3 stpr 3 2 40000 &
wait
../../read_t2.sh $B $O/zero_shot $O/data/bin/task2 own_schedule \
    /work/qa_runs/type03_ctrl/ck/stpr_t2_s2/checkpoint_best.pt /work/qa_runs/type03_ctrl3/ck/stpr_t2_s3/checkpoint_best.pt
# curves: the "| train |" and "valid |" lines of each log -> ARM/stpr_t2_sN_{train,valid}.txt
# from scratch, lr held at 1e-3 throughout (LR_PATIENCE=1000: the plateau rule never fires), same
# seeds: the runs are identical to the originals until their first halving (19,176 / 25,380)
for s in 2 3; do LR_PATIENCE=1000 ENTITY_TYPE=0.3 configs/qa_babi_table2.sh $B /work/qa_runs/type03_fixedlr_s$s stpr $s 2 32000 & done; wait
../../read_t2.sh $B $O/zero_shot $O/data/bin/task2 fixedlr_from_scratch_32k \
    /work/qa_runs/type03_fixedlr_s2/ck/stpr_t2_s2/checkpoint_best.pt /work/qa_runs/type03_fixedlr_s3/ck/stpr_t2_s3/checkpoint_best.pt
