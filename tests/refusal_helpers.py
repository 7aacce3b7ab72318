"""One helper for every "bad input is refused" test: run a command (the ``nesyseq`` main function
in this process, or any callable), and assert what a refusal must be: exactly one line on stderr,
no Python traceback, a non-zero exit, and the folders it was pointed at left exactly as they were
(the same paths, the same bytes)."""
import hashlib
import io
import os
from contextlib import redirect_stderr, redirect_stdout
from pathlib import Path
from typing import Callable, Dict, Iterable, Tuple, Union

from nesyseq.common.errors import UserError


def tree(folder) -> Dict[str, Tuple[str, str]]:
    """Every path under ``folder`` (and the folder itself) -> (kind, sha256 of a file's bytes)."""
    folder = Path(folder)
    if not os.path.lexists(folder):
        return {}
    if not folder.is_dir():
        return {".": ("file", hashlib.sha256(folder.read_bytes()).hexdigest())}
    out = {".": ("dir", "")}
    for root, dirs, files in os.walk(folder):
        for d in dirs:
            out[os.path.relpath(os.path.join(root, d), folder)] = ("dir", "")
        for f in files:
            p = os.path.join(root, f)
            out[os.path.relpath(p, folder)] = ("file", hashlib.sha256(Path(p).read_bytes()).hexdigest())
    return out


def refused(command: Union[Iterable[str], Callable[[], object]], folders, *words: str) -> str:
    """Run ``command`` (argv of ``nesyseq``, or a callable; a ``UserError`` it raises is printed as
    the ``nesyseq`` command prints it) and assert a refusal: non-zero exit, exactly one non-empty
    line on stderr containing each of ``words``, no traceback, and every folder of ``folders`` (one
    path or several) unchanged.  Returns the line."""
    from nesyseq.cli.main import main

    folders = [folders] if isinstance(folders, (str, os.PathLike)) else list(folders)
    before = {str(f): tree(f) for f in folders}
    err, out = io.StringIO(), io.StringIO()
    with redirect_stderr(err), redirect_stdout(out):
        try:
            if callable(command):
                try:
                    command()
                    rc = 0
                except UserError as exc:
                    print(f"nesyseq: error: {exc}", file=err)
                    rc = 2
            else:
                rc = main(list(map(str, command)))
        except SystemExit as exc:   # what fairseq-train / argparse end with
            if isinstance(exc.code, str):
                print(exc.code, file=err)
                rc = 1
            else:
                rc = exc.code
    text = err.getvalue()
    lines = [line for line in text.splitlines() if line.strip()]
    assert rc not in (0, None), f"exit status {rc}; stdout: {out.getvalue()[-500:]}; stderr: {text[-500:]}"
    assert "Traceback" not in text, text
    assert len(lines) == 1, text
    for w in words:
        assert w in lines[0], (w, lines[0])
    for f in folders:
        assert tree(f) == before[str(f)], f"{f} changed"
    return lines[0]
