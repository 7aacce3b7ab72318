"""Rename every person of a bAbI task-1 file to a word the checkpoint's dictionary lacks.

    python rename_people.py QA1_TEST_TXT DICT_SRC_TXT OUT_TXT

A person is the first word of a statement ("Kounour went back to the office.") or the last word of
a question ("Where is Kounour?").  Each is replaced, everywhere in the file, by the same word with
"zq" appended ("Kounourzq"), with `prepare qa-zero-shot`'s whole-word renaming
(`data_prep.qa_zero_shot.rename_lines`); the script refuses to write if a new word is already in
DICT_SRC_TXT, so all of them are new to the model.  Evaluated with ``nesyseq evaluate qa`` they
get zero semantic embeddings (the paper's protocol for unseen words), and only the symbolic path
can tell the people apart.  Answers (rooms) are left alone.
"""
import pathlib
import re
import sys

sys.path.insert(0, str(pathlib.Path(__file__).resolve().parents[3]))
from nesyseq.data_prep.qa_babi import parse_babi_lines, read_babi_lines  # noqa: E402
from nesyseq.data_prep.qa_zero_shot import rename_lines  # noqa: E402
from nesyseq.common.atomic import atomic_write_bytes  # noqa: E402

STATEMENT = re.compile(r"^\d+ (\w+) ")
QUESTION = re.compile(r"^\d+ Where is (\w+)\?\t")


def main(argv):
    src, dict_path, out = argv
    known = {line.split()[0] for line in pathlib.Path(dict_path).read_text(encoding="utf-8").splitlines() if line}
    lines = read_babi_lines(src)
    parse_babi_lines(lines, src, None)               # a malformed input names its file:line here
    people = set()
    for n, line in enumerate(lines, 1):
        m = QUESTION.match(line) if "\t" in line else STATEMENT.match(line)
        if line.strip() and not m:
            raise SystemExit(f"{src}:{n}: not a task-1 statement or question: {line!r}")
        if m:
            people.add(m.group(1).lower())
    mapping = {p: p + "zq" for p in people}
    clash = sorted(new for new in mapping.values() if new in known)
    if clash:
        raise SystemExit(f"{dict_path}: already holds {clash[0]} (and {len(clash) - 1} more)")
    atomic_write_bytes(out, ("\n".join(rename_lines(lines, mapping, src)) + "\n").encode("utf-8"))
    print(f"{out}: {len(people)} people renamed, {len(lines)} lines")


if __name__ == "__main__":
    main(sys.argv[1:])
