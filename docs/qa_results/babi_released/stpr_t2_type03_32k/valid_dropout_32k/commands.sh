# What ran (2026-11-27, eighteenth session; scratch paths as in ../commands.sh). The two seeds that
# missed a target at 32,000 updates, from scratch, the same recipe plus --valid-entity-dropout
# (VALID_DROPOUT=1): the lr plateau rule and checkpoint_best read the valid loss under the training
# entity dropout (fixed masks per batch) instead of the clean one. Two runs at once on the 2-core box
# (≈ 16.7 updates/s each, 32 min).
B=/work/qa_runs/babi/en-10k
O=/work/qa_runs/babi10k_t2_type03_vdrop
ENTITY_TYPE=0.3 VALID_DROPOUT=1 configs/qa_babi_table2.sh $B $O stpr 2 2 32000 &
# once $O/data/.done exists:
ENTITY_TYPE=0.3 VALID_DROPOUT=1 configs/qa_babi_table2.sh $B $O stpr 3 2 32000 &
wait
../read_t2.sh $B $O/zero_shot $O/data/bin/task2 /work/qa_runs/vdrop_eval/at_32k $O/ck/stpr_t2_s{2,3}/checkpoint_best.pt
# curves: the "| train |" and "valid on" lines of $O/ck/stpr_t2_sN.log -> stpr_t2_sN_{train,valid}.txt
# (the valid loss here is the one under dropout; the originals' clean valid curves are in ..)
