"""Every ```python block of README.md, docs/*.md and examples/ runs, as written, and prints what it says.

A block runs in a folder that holds the repository's ``examples/`` (the shipped exports) and, for
the guides whose models ship no export, the files their "Try it" commands would have made: tiny
untrained checkpoints of the same architecture at the same paths (``po-ck``/``po-data``,
``folnet-try``, ``ent-try``), so the block's calls run on a real model of that family.  A line
``print(...)  # -> TEXT`` must print TEXT: the docs show what the shipped models answer.
Each model guide has a ``## Python`` section with such a block.
"""
import ast
import contextlib
import io
import re
import sys
from pathlib import Path

import pytest

from tests.test_docs_commands import ROOT, fenced_blocks

MODEL_GUIDES = ["math", "qa", "wmt", "folnet", "tpru"]
EXPECTED = re.compile(r"#\s*->\s*(.*?)\s*$")

def python_blocks():
    out = []
    for doc in [ROOT / "README.md", *sorted((ROOT / "docs").glob("*.md")), *sorted((ROOT / "examples").rglob("*.md"))]:
        for line, lang, _illustrative, body in fenced_blocks(doc.read_text(encoding="utf-8")):
            if lang in ("python", "py"):
                out.append(pytest.param(doc, line, body, id=f"{doc.relative_to(ROOT)}:{line}"))
    return out


def test_each_model_guide_and_the_readme_have_a_python_block():
    docs = {p.values[0].name for p in python_blocks()}
    assert {"README.md"} | {f"{g}.md" for g in MODEL_GUIDES} <= docs
    for g in MODEL_GUIDES:
        assert "\n## Python\n" in (ROOT / "docs" / f"{g}.md").read_text(encoding="utf-8"), g


@pytest.fixture(scope="module")
def workspace(tmp_path_factory):
    from tests import hub_helpers as h

    ws = tmp_path_factory.mktemp("docs_python")
    (ws / "examples").symlink_to(ROOT / "examples")
    h.wmt_checkpoint(ws / "po-ck" / "checkpoint_last.pt", h.wmt_data(ws / "po-data"))
    data = h.folnet_data(ws / "folnet-try" / "bin", ROOT / "docs" / "folnet_paper_to_code.md")
    h.folnet_checkpoint(ws / "folnet-try" / "ck" / "checkpoint_last.pt", data)
    h.tpru_checkpoint(ws / "ent-try" / "ck" / "checkpoint_best.pt", ws / "ent-try")
    return ws


def expected_prints(body: str):
    """{line number in the block: text} for each ``print(...)  # -> TEXT`` line."""
    out = {}
    for n, line in enumerate(body.splitlines(), 1):
        m = EXPECTED.search(line)
        if m and line.lstrip().startswith("print("):
            out[n] = m.group(1)
    return out


@pytest.mark.parametrize("doc,line,body", python_blocks())
def test_python_block_runs_and_prints_what_it_says(workspace, monkeypatch, doc, line, body):
    ast.parse(body)                                  # a syntax error names the block, not exec
    monkeypatch.chdir(workspace)
    monkeypatch.setattr(sys, "path", list(sys.path))
    printed = {}
    real_print = print

    def recording_print(*args, **kwargs):
        buf = io.StringIO()
        real_print(*args, file=buf, **{k: v for k, v in kwargs.items() if k != "file"})
        printed.setdefault(sys._getframe(1).f_lineno, []).append(buf.getvalue().rstrip("\n"))

    code = compile(body, f"{doc.relative_to(ROOT)}:{line}", "exec")
    with contextlib.redirect_stdout(io.StringIO()):
        exec(code, {"__name__": "__docs__", "print": recording_print})
    for n, text in expected_prints(body).items():
        assert printed.get(n) == [text], f"{doc.name} block at line {line}, its line {n}"
