"""Task-1 error by the distance from the asked person's latest mention to the question.

    python gap_error.py GENERATE_LOG...

The gap is counted in source tokens, from the first token of the latest statement whose subject
is the asked person to the end of the source (question and eos included), in buckets of 16
tokens (the last one open).  A long gap means the answer sentence is far back in the story.
"""
import collections
import pathlib
import sys

sys.path.insert(0, str(pathlib.Path(__file__).resolve().parents[3]))
from nesyseq.common.generate_output import read_generate_output  # noqa: E402

WIDTH, LAST = 16, 4          # buckets 0-15, 16-31, 32-47, 48-63, 64+


def gap(tokens):
    person = tokens[-2]      # "... where is NAME ?" -> NAME
    starts = [i for i, t in enumerate(tokens) if t == person and (i == 0 or tokens[i - 1] == ".")]
    return len(tokens) - starts[-1] if starts else None


def main(paths):
    print("| log | " + " | ".join(f"{k * WIDTH}{'+' if k == LAST else f'-{k * WIDTH + WIDTH - 1}'}"
                                  for k in range(LAST + 1)) + " | all |")
    print("|---" * (LAST + 3) + "|")
    for path in paths:
        recs = read_generate_output(pathlib.Path(path))
        if not recs:
            sys.exit(f"{path}: no S-/T-/H- lines (not a fairseq-generate log?)")
        wrong, total = collections.Counter(), collections.Counter()
        for r in recs.values():
            g = gap(r["S"].split())
            if g is None:
                sys.exit(f"{path}: a question whose person has no statement: {r['S']!r}")
            k = min(g // WIDTH, LAST)
            total[k] += 1
            wrong[k] += r["H"] != r["T"]
        cells = [f"{100 * wrong[k] / total[k]:.1f}% of {total[k]}" if total[k] else "-" for k in range(LAST + 1)]
        all_ = f"{100 * sum(wrong.values()) / sum(total.values()):.2f}% of {sum(total.values())}"
        print(f"| {pathlib.Path(path).name} | " + " | ".join(cells) + f" | {all_} |")


if __name__ == "__main__":
    if len(sys.argv) < 2:
        sys.exit(__doc__)
    main(sys.argv[1:])
