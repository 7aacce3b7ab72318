"""Task-1 test error by how often the asked person occurs in the training file.

    python name_frequency.py QA1_TRAIN_TXT GENERATE_LOG...

QA1_TRAIN_TXT is the bAbI-format training file (`prepare qa` writes it as raw/qa1_train.txt;
10% of its stories are held out as valid, so counts are slightly high); GENERATE_LOG a
`fairseq-generate` log (S-/T-/H- lines, as test_error.sh writes). For each log it prints the
error % per quarter of the test questions, ranked by how many training sentences (statements
and questions) mention the asked person.  A model that keys the answer to the name's own learnt
embedding errs more on rare names; one that uses the name only as a symbol should not.
"""
import collections
import pathlib
import re
import sys

sys.path.insert(0, str(pathlib.Path(__file__).resolve().parents[3]))
from nesyseq.common.generate_output import read_generate_output  # noqa: E402


def train_counts(path):
    counts = collections.Counter()
    with open(path) as f:
        for n, line in enumerate(f, 1):
            text = line.split("\t")[0].split(" ", 1)
            if len(text) != 2:
                sys.exit(f"{path}:{n}: not a bAbI line (number, space, text)")
            for w in re.findall(r"[a-z]+", text[1].lower()):
                counts[w] += 1
    return counts


def main(argv):
    if len(argv) < 2:
        sys.exit(__doc__)
    counts = train_counts(argv[0])
    for log in argv[1:]:
        recs = read_generate_output(pathlib.Path(log)).values()
        if not recs:
            sys.exit(f"{log}: no S-/T-/H- lines (not a fairseq-generate log?)")
        rows = sorted((counts[r["S"].split()[-2]], r["H"] != r["T"]) for r in recs)  # "where is NAME ?"
        quarters = [rows[i * len(rows) // 4:(i + 1) * len(rows) // 4] for i in range(4)]
        cells = [f"{q[0][0]}-{q[-1][0]}: {100 * sum(e for _, e in q) / len(q):.1f}%" for q in quarters if q]
        print(f"{log.rsplit('/', 1)[-1]}: " + "; ".join(cells))


if __name__ == "__main__":
    main(sys.argv[1:])
