# What ran (2026-11-27, nineteenth session; scratch paths as in ../commands.sh), from the repository root
B=/work/qa_runs/babi/en-10k
O=/work/qa_runs/babi10k_t2_type03
D=docs/qa_results/babi_released/stpr_t2_type03_32k/sym_pos
PYTHONPATH=. python $D/sym_pos_by_seed.py $B/qa2_two-supporting-facts_train.txt $O/ck/stpr_t2_s{0,1,2,3,4,5,6,7,8}/checkpoint_best.pt \
  | sed 's#/work/qa_runs/babi10k_t2_type03/ck/stpr_t2_\(s[0-9]\)/checkpoint_best.pt#shared \1#' > $D/shared_9seeds.md
