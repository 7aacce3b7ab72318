# What ran (2026-11-27, twentieth session, code d1d3098 = the padding fix; scratch paths). B = the
# released en-10k folder (md5 in ../SOURCE.md). Task 1 with the one command that meets task 2
# (../stpr_t2_role_32k/): per-role γ rows, per-type dropout 0.3, the rest of the default recipe
# (entity dropout 0.2 + init-alpha, story dropout 0.3, the dropout kept on bAbI's people, rooms
# and objects; patience 10), 16,000 updates. The objects group is skipped (task 1 has none; logged).
B=/work/qa_runs/babi/en-10k
O=/work/qa_runs/t1_role_pf
for s in 0 1 2; do
  SYM_POSITIONS=role ENTITY_TYPE=0.3 configs/qa_babi_table2.sh $B $O stpr $s 1 16000 > $O/run_s$s.out 2>&1
done
# paired control: the same command with the one shared row, same data folder (a link), seeds 1, 0, 2
C=/work/qa_runs/t1_shared_pf
mkdir -p $C && ln -sfn $O/data $C/data
for s in 1 0 2; do
  SYM_POSITIONS=shared ENTITY_TYPE=0.3 configs/qa_babi_table2.sh $B $C stpr $s 1 16000 > $C/run_s$s.out 2>&1
done
# each set of three read together -> read_3seeds/ (per-role), shared_read_3seeds/ (control, the same with $C)
Z=$O/zero_shot/qa1_single-supporting-fact_test
OMP_NUM_THREADS=1 nesyseq evaluate qa --checkpoint $O/ck/stpr_t1_s{0,1,2}/checkpoint_best.pt ... \
  --data $O/data/bin/task1 --babi-file $B/qa1_single-supporting-fact_test.txt \
  --babi-file ${Z}_rooms.txt --babi-file ${Z}_people.txt --babi-file ${Z}_all.txt --out read_3seeds
PYTHONPATH=. python docs/qa_results/babi_released/run_summary.py $O/ck/stpr_t1_s{0,1,2} $C/ck/stpr_t1_s{0,1,2} \
  | sed '2,4s/^stpr/role_stpr/; 5,7s/^stpr/shared_stpr/' > run_summary.csv
# curves: the "| train |" and "valid on 'valid'" lines of $O/ck/stpr_t1_sN.log -> stpr_t1_sN_{train,valid}.txt,
# of $C/ck/stpr_t1_sN.log -> shared_stpr_t1_sN_{train,valid}.txt
# the learned rows, shared control and per-role
PYTHONPATH=. python docs/qa_results/babi_released/stpr_t2_type03_32k/sym_pos/sym_pos_by_seed.py \
  $B/qa1_single-supporting-fact_train.txt $C/ck/stpr_t1_s{0,1,2}/checkpoint_best.pt $O/ck/stpr_t1_s{0,1,2}/checkpoint_best.pt \
  | sed "s#$C/ck/stpr_t1_\(s[0-9]\)/checkpoint_best.pt#shared \1#; s#$O/ck/stpr_t1_\(s[0-9]\)/checkpoint_best.pt#per-role \1#" > sym_pos_rows.md
