# What ran (scratch paths; ../continue_t2_held_lr.sh and ../read_t2.sh). B = released en-10k folder.
for s in 0 1 2; do ../continue_t2_held_lr.sh /work/qa_runs/babi10k_t2_64k /work/qa_runs/t2_ew/ck_s$s $s 0.00025 90000 & done
# read twice while training (checkpoint_last.pt of each seed), then the runs were stopped:
O=/work/qa_runs/babi10k_t2_64k
../read_t2.sh $B $O/zero_shot $O/data/bin/task2 at_66270 /work/qa_runs/t2_ew/ck_s{0,1,2}/checkpoint_last.pt
../read_t2.sh $B $O/zero_shot $O/data/bin/task2 at_67116 /work/qa_runs/t2_ew/ck_s{0,1,2}/checkpoint_last.pt
