#!/usr/bin/env bash
# Task 2, the from-scratch 32k checkpoints of the entity-words recipe (babi10k_t2_ew32k) continued
# --entity-dropout-words restricted to bAbI's people/rooms/objects.
source /work/qa_runs/env.sh
s=$1; MAXUP=${2:-40000}
W=mary,john,sandra,daniel,fred,bill,jeff,kitchen,bedroom,office,garden,hallway,bathroom,apple,football,milk
export OMP_NUM_THREADS=1
fairseq-train /work/qa_runs/babi10k_t2_64k/data/bin/task2 --user-dir /work/main/user_dir --task babi_qa \
  --arch stpr_babi --adam-betas "(0.9,0.99)" --entity-dropout 0.2 --entity-dropout-init-alpha --symbolic-positions \
  --entity-dropout-story 0.3 --entity-dropout-words $W \
  --restore-file /work/qa_runs/babi10k_t2_ew32k/ck/stpr_t2_s$s/checkpoint_best.pt --reset-lr-scheduler \
  --optimizer-overrides "{'lr':0.001}" --lr-scheduler fixed --lr 0.001 \
  --criterion cross_entropy --optimizer adam --clip-norm 5.0 --batch-size 32 --max-update $MAXUP \
  --save-dir /work/qa_runs/t2_ew32d/ck_s$s --no-epoch-checkpoints --num-workers 0 --cpu --seed $s \
  --log-format simple --log-interval 1000 > /work/qa_runs/t2_ew32d/ck_s$s.log 2>&1
