# What ran (2026-11-27, twentieth session, code d1d3098 = the padding fix; scratch paths). B = the
# released en-10k folder (md5 in ../SOURCE.md). The task-5 recipe of ../stpr_t5_16k/ (entity dropout
# 0.2 + init-alpha, patience 3, 16,000 updates; no story dropout, no word list, no per-type dropout)
# with --symbolic-positions-per-role in place of --symbolic-positions. Seeds 0 and 1 at once, then 2.
B=/work/qa_runs/babi/en-10k
O=/work/qa_runs/t5_role_pf
export EXTRA="--entity-dropout 0.2 --entity-dropout-init-alpha --symbolic-positions-per-role" LR_PATIENCE=3
for s in 0 1 2; do configs/qa_babi_table2.sh $B $O stpr $s 5 16000 > $O/run_s$s.out 2>&1; done
# the three read together -> read_3seeds/
Z=$O/zero_shot/qa5_three-arg-relations_test
OMP_NUM_THREADS=1 nesyseq evaluate qa --checkpoint $O/ck/stpr_t5_s{0,1,2}/checkpoint_best.pt ... \
  --data $O/data/bin/task5 --babi-file $B/qa5_three-arg-relations_test.txt \
  --babi-file ${Z}_rooms.txt --babi-file ${Z}_objects.txt --babi-file ${Z}_people.txt --babi-file ${Z}_all.txt \
  --out read_3seeds
# beta, losses, lr -> run_summary.csv
PYTHONPATH=. python docs/qa_results/babi_released/run_summary.py $O/ck/stpr_t5_s{0,1,2}
# curves: the "| train |" and "valid on 'valid'" lines of $O/ck/stpr_t5_sN.log -> stpr_t5_sN_{train,valid}.txt
