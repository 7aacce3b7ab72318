# What ran (2026-11-27, eighteenth session; scratch paths as in ../commands.sh). Seed 2, the run that
# stays at 11-12% on new people, looked at from two sides.
B=/work/qa_runs/babi/en-10k
O=/work/qa_runs/babi10k_t2_type03
# 1. More people-dropped examples: its checkpoint_best (28,764 updates) continued to 40,000 at a held
#    lr 1e-3 with the per-type rate raised from 0.3 to 0.6 and 0.9 (people all new in 20% / 30% of
#    examples instead of 10%), two runs at once
for r in 0.6 0.9; do
  ENTITY_TYPE=$r ../../continue_t2_held_lr.sh $O /work/qa_runs/type_rate_cont/r$r 2 0.001 40000 &
done; wait
../../read_t2.sh $B $O/zero_shot $O/data/bin/task2 /work/qa_runs/type_rate_cont/eval_last \
    /work/qa_runs/type_rate_cont/r{0.6,0.9}/checkpoint_last.pt                    # -> type_rate_0.6_0.9_to40k.md
# 2. Fitting or generalising: the *training* file with its people renamed
Z=/work/qa_runs/t2_train_zs
cp $B/qa2_two-supporting-facts_train.txt $Z/qa2_train.txt
nesyseq prepare qa-zero-shot --babi-file $Z/qa2_train.txt --kinds people --out $Z
nesyseq evaluate qa --checkpoint $O/ck/stpr_t2_s2/checkpoint_best.pt \
    --checkpoint /work/qa_runs/type_rate_cont/r0.9/checkpoint_last.pt \
    --checkpoint $O/ck/stpr_t2_s0/checkpoint_best.pt --checkpoint $O/ck/stpr_t2_s1/checkpoint_best.pt \
    --data $O/data/bin/task2 --babi-file $Z/qa2_train.txt --babi-file $Z/qa2_train_people.txt \
    --out $Z/eval_full                                                               # -> train_file_error.md
PYTHONPATH=. python docs/qa_results/babi_released/stpr_t2_type03_32k/seed2_fit/people_fit.py $O/data/bin/task2 \
    $Z/qa2_train_people.txt $O/ck/stpr_t2_s2/checkpoint_best.pt $O/ck/stpr_t2_s1/checkpoint_best.pt   # -> people_fit_train_people.txt
