# What ran (scratch paths; ../configs/qa_babi_table2.sh, ../read_t2.sh, ../continue_t2_held_lr.sh).
# B = released en-10k folder; O = the OUT of the one command.
# The continuations read FROM/data/bin/task2 of this OUT; the scratch runs read babi10k_t2_64k/data,
# byte-identical (same prepare command and seed; dict, train and valid binaries compared with cmp).
O=/work/qa_runs/babi10k_t2_ew32k
for s in 0 1 2; do configs/qa_babi_table2.sh $B $O stpr $s 2 32000 & done     # seeds 3 4 afterwards
../read_t2.sh $B $O/zero_shot $O/data/bin/task2 at_16k $O/ck/stpr_t2_s{0,1,2}/checkpoint_best.pt   # mid-run
../read_t2.sh $B $O/zero_shot $O/data/bin/task2 at_32k $O/ck/stpr_t2_s{0,1,2}/checkpoint_best.pt
../read_t2.sh $B $O/zero_shot $O/data/bin/task2 at_32k_5seeds $O/ck/stpr_t2_s{0,1,2,3,4}/checkpoint_best.pt
# continuations from the 32k checkpoint_best (continued_*/):
for s in 0 1 2; do ../continue_t2_held_lr.sh $O /work/qa_runs/t2_ew32c/ck_s$s $s 0.00025 40000 & done   # stopped early
for s in 0 1 2; do ../continue_t2_held_lr.sh $O /work/qa_runs/t2_ew32d/ck_s$s $s 0.001 40000 & done
../read_t2.sh $B $O/zero_shot $O/data/bin/task2 continued_heldlr1e-3_to40k /work/qa_runs/t2_ew32d/ck_s{0,1,2}/checkpoint_last.pt
