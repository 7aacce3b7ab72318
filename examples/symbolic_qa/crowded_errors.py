"""Where a checkpoint's errors on a bAbI-format file fall: by the number of distinct words the
question's context holds (each is a symbol slot, numbered by first appearance) and by the number
of statements before the question.

    python examples/symbolic_qa/crowded_errors.py CHECKPOINT BABI_FILE [MEMORY_SIZE]

The released task-2 training stories never hold more than 33 distinct words (the task's whole
vocabulary), so training never shows the model more than 33 symbols at once; stories twice as
crowded go past that.  Answers
come from ``nesyseq.load`` (the same path as ``nesyseq evaluate qa --babi-file``), every statement
kept up to MEMORY_SIZE (default 100).
"""
import collections
import pathlib
import sys

sys.path.insert(0, str(pathlib.Path(__file__).resolve().parents[2]))
import nesyseq  # noqa: E402
from nesyseq.data_prep.qa_babi import parse_babi_file  # noqa: E402

TRAINING_MAX_SLOTS = 33


def main(argv) -> None:
    ckpt, path = argv[0], argv[1]
    memory = int(argv[2]) if len(argv) > 2 else 100
    qa = nesyseq.load(ckpt)
    cells = collections.defaultdict(lambda: [0, 0])      # (slots, length) -> [questions, errors]
    for e in parse_babi_file(path, memory_size=memory):
        slots = len({w for s in e.story for w in s} | set(e.question))
        wrong = qa.answer([" ".join(s) + "." for s in e.story], " ".join(e.question) + "?") != e.answer
        key = (f"<= {TRAINING_MAX_SLOTS} words" if slots <= TRAINING_MAX_SLOTS else f"> {TRAINING_MAX_SLOTS} words",
               "< 40 statements" if len(e.story) < 40 else ">= 40 statements")
        for k in (key, (key[0], "all"), ("all", key[1]), ("all", "all")):
            cells[k][0] += 1
            cells[k][1] += wrong
    print("| context words | statements before the question | questions | errors | error (%) |")
    print("|---|---|---|---|---|")
    for (a, b), (n, bad) in sorted(cells.items()):
        print(f"| {a} | {b} | {n} | {bad} | {100 * bad / n:.1f} |")


if __name__ == "__main__":
    main(sys.argv[1:])
