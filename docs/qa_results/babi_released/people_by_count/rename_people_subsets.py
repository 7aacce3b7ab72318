"""Scratch diagnostic (docs/qa.md, "Table 2 on the released bAbI files"): copies of a bAbI test
file with 1, 2, 3 or all 4 of its people renamed to names no checkpoint has seen, to see
whether the people errors grow with the number of new names in a story.

    python rename_people_subsets.py BABI_TEST_FILE PREFIX
writes PREFIX_new_M.txt, _J, _S, _D (one name new), _MJ, _MJS, _MJSD (two, three, four).
The names are those of `prepare qa-zero-shot --kinds people` for bAbI's four people."""
import re
import sys

NAMES = [("Mary", "Wilhelmina"), ("John", "Quentin"), ("Sandra", "Ottilie"), ("Daniel", "Bartholomew")]
src, prefix = sys.argv[1:]
text = open(src, encoding="utf-8").read()
for subset in [(0,), (1,), (2,), (3,), (0, 1), (0, 1, 2), (0, 1, 2, 3)]:
    out = text
    for i in subset:
        out = re.sub(rf"\b{NAMES[i][0]}\b", NAMES[i][1], out)
    tag = "".join(NAMES[i][0][0] for i in subset)
    with open(f"{prefix}_new_{tag}.txt", "w", encoding="utf-8") as f:
        f.write(out)
