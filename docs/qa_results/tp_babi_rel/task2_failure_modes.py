"""Task-2 answers from a fairseq-generate log (S-/T-/H- lines): right, the holder's room at some
other time, the room of the latest sentence, another room of the story; then the error split by
whether the holder moved after taking the object (the generator asks only about held objects, so
the answer is the holder's latest room: after the taking sentence, or before it if not moved);
then (added 2026-11-27, twenty-fourth session, below the earlier lines, which are unchanged) the
error by the story's length in sentences and in tokens, and by how often the object was taken.
Usage: python task2_failure_modes.py GENERATE_LOG"""
import collections
import pathlib
import sys

sys.path.insert(0, str(pathlib.Path(__file__).resolve().parents[3]))
from nesyseq.data_prep.qa_generate import DROP_VERBS, GRAB_VERBS  # noqa: E402
from nesyseq.common.generate_output import read_generate_output  # noqa: E402

RECS = read_generate_output(pathlib.Path(sys.argv[1]))
if not RECS:
    sys.exit(f"{sys.argv[1]}: no S-/T-/H- lines (not a fairseq-generate log?)")
S, T, H = ({k: r[x] for k, r in RECS.items()} for x in "STH")
TAKE = tuple(v.split()[0] for v in GRAB_VERBS)         # a sentence's second word says its kind
HANDLE = TAKE + tuple(v.split()[0] for v in DROP_VERBS)  # anything else is a move
stats = collections.Counter()
by_case = collections.Counter()
by_length = collections.Counter()   # (length bin, right?)
by_takes = collections.Counter()
LENGTHS = ((5, "1-5"), (8, "6-8"), (12, "9-12"), (10 ** 9, "13+"))
by_tokens = collections.Counter()
TOKENS = ((31, "0-31"), (63, "32-63"), (95, "64-95"), (127, "96-127"), (10 ** 9, "128+"))  # source tokens
for k in S:
    toks = S[k].split()
    obj = toks[-2]
    sents = [s.split() for s in " ".join(toks).split(" . ")[:-1]]
    holder, took = None, -1
    for i, s in enumerate(sents):        # the last person who took the object
        if s[-1] == obj and s[1] in TAKE:
            holder, took = s[0], i
    rooms = [s[-1] for s in sents if s[1] not in HANDLE]
    holder_rooms = [s[-1] for s in sents if s[0] == holder and s[-1] in rooms] if holder else []
    if H[k] == T[k]:
        kind = "ok"
    elif H[k] in holder_rooms:
        kind = "another room of the holder"
    elif rooms and H[k] == rooms[-1]:
        kind = "room of the latest move"
    elif H[k] in rooms:
        kind = "another room of the story"
    else:
        kind = "not a room of the story"
    stats[kind] += 1
    moved = any(s[0] == holder and s[1] not in HANDLE for s in sents[took + 1:])
    by_case[moved, kind == "ok"] += 1
    by_length[next(name for top, name in LENGTHS if len(sents) <= top), kind == "ok"] += 1
    by_tokens[next(name for top, name in TOKENS if len(toks) <= top), kind == "ok"] += 1
    by_takes[min(sum(s[-1] == obj and s[1] in TAKE for s in sents), 3), kind == "ok"] += 1
for kind, n in stats.most_common():
    print(f"{kind:30s} {n:5d} ({100 * n / len(S):.1f}%)")


def print_errors(counter, rows):
    """One line per (key, label) of ROWS: questions and error % of COUNTER[key, right?]."""
    for key, what in rows:
        n = counter[key, True] + counter[key, False]
        if n:
            print(f"{what:34s} {n:5d} questions, error {100 * counter[key, False] / n:.1f}%")


print_errors(by_case, ((False, "holder not moved since taking it"), (True, "holder moved after taking it")))
print_errors(by_length, ((name, f"story of {name} sentences") for _, name in LENGTHS))
print_errors(by_tokens, ((name, f"story of {name} tokens") for _, name in TOKENS))
print_errors(by_takes, ((t, f"object taken {t}{'+' if t == 3 else ''} time{'s' if t > 1 else ''}") for t in (1, 2, 3)))
