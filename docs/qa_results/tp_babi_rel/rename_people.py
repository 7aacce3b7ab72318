"""Rename every person of a bAbI task-1 file to a word the checkpoint's dictionary lacks.

    python rename_people.py QA1_TEST_TXT DICT_SRC_TXT OUT_TXT

A person is the first word of a statement ("Kounour went back to the office.") or the last word of
a question ("Where is Kounour?").  Each is replaced, everywhere in the file, by the same word with
"zq" appended ("kounourzq"), lower-cased as the tokenizer would; the script refuses to write if a
new word is already in DICT_SRC_TXT, so all of them are new to the model.  Evaluated with
``nesyseq evaluate qa`` they get zero semantic embeddings (the paper's protocol for unseen words),
and only the symbolic path can tell the people apart.  Answers (rooms) are left alone.
"""
import os
import pathlib
import re
import sys
import tempfile

STATEMENT = re.compile(r"^(\d+ )(\w+)( .*)$")
QUESTION = re.compile(r"^(\d+ Where is )(\w+)(\?\t.*)$")


def main(argv):
    src, dict_path, out = argv
    known = {line.split()[0] for line in pathlib.Path(dict_path).read_text(encoding="utf-8").splitlines() if line}
    lines, people = [], set()
    for n, line in enumerate(pathlib.Path(src).read_text(encoding="utf-8").splitlines(), 1):
        m = QUESTION.match(line) or STATEMENT.match(line)
        if line.strip() and not m:
            raise SystemExit(f"{src}:{n}: not a task-1 statement or question: {line!r}")
        if m:
            people.add(m.group(2))
            line = f"{m.group(1)}{m.group(2)}zq{m.group(3)}"
        lines.append(line)
    clash = sorted(p for p in people if (p + "zq").lower() in known)
    if clash:
        raise SystemExit(f"{dict_path}: already holds {clash[0].lower()}zq (and {len(clash) - 1} more)")
    fd, tmp = tempfile.mkstemp(dir=os.path.dirname(os.path.abspath(out)) or ".")
    with os.fdopen(fd, "w", encoding="utf-8") as f:
        f.write("\n".join(lines) + "\n")
    os.replace(tmp, out)
    print(f"{out}: {len(people)} people renamed, {len(lines)} lines")


if __name__ == "__main__":
    main(sys.argv[1:])
