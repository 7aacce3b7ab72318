# What ran (scratch paths; ../../../../configs/qa_babi_table2.sh, ../read_t2.sh,
# ../people_by_count/rename_people_subsets.py). B = the released en-10k folder (md5 in ../SOURCE.md).
B=/work/qa_runs/babi/en-10k
O=/work/qa_runs/babi10k_t2_type03
# seed 0 first (it prepares $O/data), the other four once $O/data/.done exists; five at once on 2 cores
for s in 0 1 2 3 4; do ENTITY_TYPE=0.3 configs/qa_babi_table2.sh $B $O stpr $s 2 32000 & done
../read_t2.sh $B $O/zero_shot $O/data/bin/task2 at_16k $O/ck/stpr_t2_s{0,1,2,3,4}/checkpoint_best.pt   # mid-run
../read_t2.sh $B $O/zero_shot $O/data/bin/task2 at_32k $O/ck/stpr_t2_s{0,1,2,3,4}/checkpoint_best.pt
# people one to four at a time (../people_by_count/t2_stpr_t2_type03_32k.md)
python ../people_by_count/rename_people_subsets.py $B/qa2_two-supporting-facts_test.txt t2
nesyseq evaluate qa --checkpoint at_32k/snap/s{0,1,2,3,4}.pt --data $O/data/bin/task2 \
    --babi-file t2_new_{M,J,S,D,MJ,MJS,MJSD}.txt --out rep_type
# curves: the "| train |" and "valid on 'valid'" lines of $O/ck/stpr_t2_sN.log
# seeds 7 and 8 (2026-11-27, eighteenth session), the same command, two at once; then all nine read together
for s in 7 8; do ENTITY_TYPE=0.3 configs/qa_babi_table2.sh $B $O stpr $s 2 32000 & done; wait
../read_t2.sh $B $O/zero_shot $O/data/bin/task2 at_32k_9seeds $O/ck/stpr_t2_s{0,1,2,3,4,5,6,7,8}/checkpoint_best.pt
