"""``nesyseq prepare qa``: bAbI (``--source DIR``) or our bAbI-style generator (``--generate``)
to fairseq data for ``--task babi_qa``.

    nesyseq prepare qa --source tasks_1-20_v1-2/en --out data/babi --tasks 1,2,3
    nesyseq prepare qa --source tasks_1-20_v1-2.tar.gz --babi-set en-10k --out data/babi --tasks 2   # the archive itself
    nesyseq prepare qa --train my_train.txt --test my_test.txt --tasks 2 --out data/mine   # any file names
    nesyseq prepare qa --generate --out data/babi_style --tasks 1,2 --num-names 100 --seed 0
    nesyseq prepare qa --generate --out data/zs --tasks 2,5 --zero-shot rooms,objects,people
    nesyseq prepare qa --generate --out data/appb --tasks b --k 100 --train-stories 10000 --test-stories 1000

``--source`` reads the release archive, an unpacked copy or a folder holding only the requested tasks
(data_prep/qa_source.py; known md5s are checked).  Layout under ``--out``: ``raw/`` (the bAbI-format
files read, as ``qa{N}_{split}.txt``: generated, or copied from ``--source``), ``text/task{N}/{train,valid,test}.{src,tgt}``
(source ``s_1 . s_2 . ... q ?``, target the answer word; ``--zero-shot`` adds ``test_rooms``
etc.) and ``bin/task{N}/`` (fairseq-preprocess,
joined dictionary).  The dictionary holds every word of every split, so words never seen in
training get their own entries instead of ``<unk>``; ``bin/task{N}/unseen.txt`` lists them
(the models zero their semantic rows at evaluation).  Valid is 10% of train held out (paper
set-up) unless the source folder has ``qa{N}_valid.txt``.
"""
from __future__ import annotations

import argparse
import os
import random
import shutil


def add_arguments(parser: argparse.ArgumentParser) -> None:
    src = parser.add_mutually_exclusive_group(required=True)
    src.add_argument("--source", metavar="DIR|ARCHIVE",
                     help="the bAbI release: tasks_1-20_v1-2.tar.gz, an unpacked copy (the folder holding "
                          "tasks_1-20_v1-2/, or a set's folder such as .../en-10k), or a folder holding only "
                          "the tasks' files (qa{N}_*_{train,test}.txt or qa{N}_{train,valid,test}.txt)")
    src.add_argument("--generate", action="store_true", help="generate bAbI-style tasks (labelled bAbI-style)")
    src.add_argument("--train", metavar="FILE", help="one bAbI-format train file, whatever its name; with --test "
                                                      "(and --valid, else held out of train) and --tasks N, which "
                                                      "names the output bin/taskN")
    parser.add_argument("--test", metavar="FILE", help="with --train: the test file")
    parser.add_argument("--valid", metavar="FILE", help="with --train: the valid file (default: held out of train)")
    parser.add_argument("--out", metavar="DIR", required=True, help="output directory")
    parser.add_argument("--tasks", default=None, help="comma-separated task numbers (generator: 1,2,3,5,b); "
                                                       "default: all found / 1")
    parser.add_argument("--babi-set", default="en-10k", metavar="SET",
                        help="with --source ARCHIVE or a copy of the whole release: the set read (en, en-10k, "
                             "en-valid, en-valid-10k, hn, hn-10k, shuffled, shuffled-10k)")
    parser.add_argument("--memory-size", type=int, default=50,
                        help="keep the most recent N story sentences (reference codes: 50; 130 for task 3)")
    parser.add_argument("--valid-fraction", type=float, default=0.1, help="train held out for early stopping")
    parser.add_argument("--max-positions", type=int, default=1024,
                        help="refuse a bAbI line with more tokens than this (the model's --max-source-positions)")
    parser.add_argument("--seed", type=int, default=0, help="generator and held-out split seed")
    parser.add_argument("--num-names", type=int, default=4, help="generator: distinct names (10..10000 for Fig. 1)")
    parser.add_argument("--zero-shot", type=zero_shot_kinds, default=None, metavar="KIND[,KIND...]",
                        help="generator: add a test split test_KIND per kind (rooms, objects, people) "
                             "whose rooms/objects/people are unseen in training (Table 2); 'all': "
                             "rooms, objects and people unseen at once (ours)")
    parser.add_argument("--k", type=int, default=10, help="generator task b: |V1| = |V2| = k")
    parser.add_argument("--train-stories", type=int, default=200, help="generator: stories in train")
    parser.add_argument("--test-stories", type=int, default=200, help="generator: stories in test")
    parser.add_argument("--people-per-story", type=int, default=None,
                        help="generator: people drawn per story (default: bAbI's, 4; task 5: 3)")
    parser.add_argument("--questions-per-story", type=int, default=5,
                        help="generator: questions per story (bAbI's 5); a story lasts until its last question")
    parser.add_argument("--wording", choices=["ours", "babi"], default="ours",
                        help="generator, tasks 2 and 3: 'babi' ends every taking in 'there' and one leaving "
                             "in five, as the released files do")


def zero_shot_kinds(text):
    """argparse type: comma-separated zero-shot kinds (also `prepare qa-zero-shot --kinds`)."""
    from nesyseq.data_prep.qa_generate import ZERO_SHOT

    kinds = [k.strip() for k in text.split(",") if k.strip()]
    bad = [k for k in kinds if k not in ZERO_SHOT]
    if bad or not kinds:
        raise argparse.ArgumentTypeError(f"unknown kind(s) {', '.join(bad) or repr(text)}: "
                                         f"choose from {', '.join(ZERO_SHOT)}")
    return kinds


def run(args) -> int:
    from nesyseq.data_prep.qa_pipeline import prepare_qa

    out = prepare_qa(args.out, source=args.source, generate=args.generate, tasks=args.tasks,
                     train_file=args.train, valid_file=args.valid, test_file=args.test,
                     memory_size=args.memory_size, valid_fraction=args.valid_fraction, seed=args.seed,
                     num_names=args.num_names, zero_shot=args.zero_shot, k=args.k,
                     train_stories=args.train_stories, test_stories=args.test_stories,
                     people_per_story=args.people_per_story, questions_per_story=args.questions_per_story,
                     wording=args.wording,
                     max_positions=args.max_positions, babi_set=args.babi_set)
    for p in out:
        print(p)
    return 0
