"""Per-question answers of stpr checkpoints on a bAbI task-2 file, split by how many people the
question's story has and by what the wrong answer is.  Used on the *training* file with its people
renamed (`prepare qa-zero-shot --kinds people`): does a run fail the all-people-new stories it was
trained on (a fitting failure) or only held-out ones?
Usage: python people_fit.py DATA_BIN BABI_FILE CKPT...   (repository root on PYTHONPATH)"""
import collections
import sys

from nesyseq.data_prep.qa_babi import parse_babi_file
from nesyseq.evaluations.qa_external import evaluate_babi_file

MOVES = {"moved", "went", "journeyed", "travelled"}      # bAbI task 2's movement verbs


def main(data, babi_file, ckpts):
    for ckpt in ckpts:
        rep = evaluate_babi_file(ckpt, babi_file, data, predictions=True)   # answers in file order
        examples = parse_babi_file(babi_file, rep["memory_size"])
        by_people = collections.Counter()
        kinds = collections.Counter()
        for e, pred in zip(examples, rep["predictions"]):
            sents = [s.split() for s in " ".join(e.source_tokens()).split(" . ") if s.strip()]
            people = {s[0] for s in sents[:-1]}
            rooms = [s[-1] for s in sents[:-1] if len(s) > 1 and s[1] in MOVES]
            ok = pred == e.answer
            by_people[len(people), ok] += 1
            if not ok:
                kinds["a room of the story" if pred in rooms else "not a room of the story"] += 1
        print(f"== {ckpt}")
        for n in sorted({k for k, _ in by_people}):
            tot = by_people[n, True] + by_people[n, False]
            print(f"  {n} people in the story: {tot:5d} questions, error {100 * by_people[n, False] / tot:5.1f}%")
        for kind, n in kinds.most_common():
            print(f"  wrong answer is {kind}: {n}")


if __name__ == "__main__":
    main(sys.argv[1], sys.argv[2], sys.argv[3:])
