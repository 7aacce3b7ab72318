# What ran (2026-11-27, nineteenth session; scratch paths). B = the released en-10k folder (md5 in ../SOURCE.md).
# The recipe of ../stpr_t2_type03_32k/ (ENTITY_TYPE=0.3) with --symbolic-positions-per-role in place of
# --symbolic-positions (SYM_POSITIONS=role). Its data folder is the one those runs used (a link), so the
# dictionary and the splits are the same; seeds in the order 2, 8, 7, 3, 0, 1, two at a time.
B=/work/qa_runs/babi/en-10k
O=/work/qa_runs/t2_role
mkdir -p $O && ln -sfn /work/qa_runs/babi10k_t2_type03/data $O/data
printf '%s\n' 2 8 7 3 0 1 | xargs -P 2 -I{} bash -c \
  "SYM_POSITIONS=role ENTITY_TYPE=0.3 configs/qa_babi_table2.sh $B $O stpr {} 2 32000 > $O/run_s{}.out 2>&1"
# mid-run read of seeds 2 and 8 (checkpoint_best at about 17,000 updates, read at 07:13 while they trained)
docs/qa_results/babi_released/read_t2.sh $B $O/zero_shot $O/data/bin/task2 $O/read_mid $O/ck/stpr_t2_s{2,8}/checkpoint_best.pt
# all six read together (each run's own report is in $O/report/stpr/seeds_N/)
docs/qa_results/babi_released/read_t2.sh $B $O/zero_shot $O/data/bin/task2 $O/read_6seeds $O/ck/stpr_t2_s{0,1,2,3,7,8}/checkpoint_best.pt
# the learned rows
PYTHONPATH=. python docs/qa_results/babi_released/stpr_t2_type03_32k/sym_pos/sym_pos_by_seed.py \
  $B/qa2_two-supporting-facts_train.txt $O/ck/stpr_t2_s{0,1,2,3,7,8}/checkpoint_best.pt \
  | sed 's#/work/qa_runs/t2_role/ck/stpr_t2_\(s[0-9]\)/checkpoint_best.pt#per-role \1#' > sym_pos_rows.md
# curves: the "| train |" and "valid on 'valid'" lines of $O/ck/stpr_t2_sN.log -> stpr_t2_sN_{train,valid}.txt
