#!/usr/bin/env python3
"""The static check of ``make test``: mypy over the product folders, failing on crash-kind errors.

    python tools/static_check.py [--python PY] [--all]

A checkout keeps the design's folders at the repository root and installs them as ``nesyseq.*``
(setup.cfg's ``package_dir``).  mypy resolves modules by folder, so this builds a tree of
symbolic links, ``.mypy_tree/nesyseq/{plugins,evaluations,...} -> ../../<folder>``, the layout an
installed nesyseq has, and checks the package ``nesyseq`` there with torch and fairseq from the
interpreter's site-packages; every ``nesyseq.*`` import is followed.  Reported paths are the
repository's own.  An editor or another tool can use the same tree (docs/testing.md).

It fails on the kinds of error that mean "this line would crash when it runs" (CRASH_CODES:
an attribute or name that is not defined, a call with the wrong arguments, calling something
that may be None).  The other kinds mypy reports about the untyped code (mostly Optional
narrowing and torch's ``Module.__getattr__`` typing) are counted, and listed with ``--all``.
A crash-kind error that is right to keep is silenced on its line with ``# type: ignore[code]``
and the reason.
"""
import argparse
import os
import re
import subprocess
import sys
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
TREE = REPO / ".mypy_tree"


def installed_folders() -> dict:
    """Installed name under nesyseq/ -> folder of the checkout: setup.cfg's ``package_dir`` (the
    Python packages of it) and the packages inside nesyseq/ itself (cli, common, hub, ...)."""
    import configparser

    cfg = configparser.ConfigParser()
    cfg.read(REPO / "setup.cfg")
    out = {}
    for line in cfg["options"]["package_dir"].splitlines():
        name, _, folder = (part.strip() for part in line.partition("="))
        if name.startswith("nesyseq.") and (REPO / folder / "__init__.py").is_file():
            out[name.split(".", 1)[1]] = folder
    for sub in sorted((REPO / "nesyseq").iterdir()):
        if (sub / "__init__.py").is_file():
            out[sub.name] = f"nesyseq/{sub.name}"
    return out


FOLDERS = installed_folders()
CRASH_CODES = {"attr-defined", "name-defined", "call-arg", "has-type", "import-not-found"}
# "None" not callable and friends are reported under [misc]
CRASH_MESSAGES = re.compile(r'"None" not callable|"None" has no attribute|Too (many|few) arguments')
LINE = re.compile(r"^(?P<path>[^:]+):(?P<line>\d+): error: (?P<msg>.*?)(?:  \[(?P<code>[a-z-]+)\])?$")
MYPY_FLAGS = ["--ignore-missing-imports", "--check-untyped-defs", "--follow-imports=silent",
              "--no-error-summary", "--show-error-codes", "--no-color-output", "--hide-error-context"]


def build_tree() -> Path:
    """.mypy_tree/nesyseq: links to the checkout's folders, under their installed names."""
    pkg = TREE / "nesyseq"
    pkg.mkdir(parents=True, exist_ok=True)
    links = dict(FOLDERS, **{"__init__.py": "nesyseq/__init__.py"})
    for name, folder in links.items():
        link, target = pkg / name, os.path.relpath(REPO / folder, pkg)
        if link.is_symlink() and os.readlink(link) == target:
            continue
        if link.is_symlink() or link.exists():
            link.unlink()
        link.symlink_to(target)
    return TREE


def repo_path(path: str) -> str:
    """.mypy_tree/nesyseq/plugins/x.py -> plugins/x.py; nesyseq/cli/... stays."""
    p = path.replace("\\", "/")
    for prefix in (".mypy_tree/", str(TREE) + "/"):
        if p.startswith(prefix):
            p = p[len(prefix):]
    parts = p.split("/")
    if len(parts) > 1 and parts[0] == "nesyseq" and parts[1] in FOLDERS:
        return "/".join([FOLDERS[parts[1]]] + parts[2:])
    return p


def is_crash(code: str, msg: str) -> bool:
    return code in CRASH_CODES or bool(CRASH_MESSAGES.search(msg))


def run_mypy(python: str) -> subprocess.CompletedProcess:
    build_tree()
    cmd = [sys.executable, "-m", "mypy", "--python-executable", python, *MYPY_FLAGS,
           "--cache-dir", str(REPO / ".mypy_cache"), "-p", "nesyseq", "-p", "hydra_plugins"]
    env = dict(os.environ, MYPYPATH=str(TREE))
    # run from the tree's parent so mypy's relative paths start with .mypy_tree/ (mapped back above)
    return subprocess.run(cmd, cwd=str(REPO), env=env, capture_output=True, text=True)


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[1])
    ap.add_argument("--python", default=sys.executable, help="the interpreter whose site-packages hold torch")
    ap.add_argument("--all", action="store_true", help="list every error, not only the crash kinds")
    args = ap.parse_args(argv)
    t0 = time.perf_counter()
    p = run_mypy(args.python)
    crash, other = [], []
    for line in p.stdout.splitlines():
        m = LINE.match(line.strip())
        if not m:
            continue
        text = f"{repo_path(m['path'])}:{m['line']}: {m['msg']}  [{m['code'] or 'misc'}]"
        (crash if is_crash(m["code"] or "misc", m["msg"]) else other).append(text)
    if p.returncode not in (0, 1) or (p.returncode == 1 and not crash and not other):
        sys.stderr.write(p.stdout + p.stderr)
        print(f"static check: mypy did not run (exit {p.returncode})", file=sys.stderr)
        return 2
    for text in crash + (other if args.all else []):
        print(text)
    took = time.perf_counter() - t0
    print(f"static check: {len(crash)} crash-kind errors, {len(other)} others (not failing), {took:.0f} s")
    return 1 if crash else 0


if __name__ == "__main__":
    sys.exit(main())
