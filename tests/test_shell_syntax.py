"""Every shell script in the repo parses (`bash -n`).

Scripts that only run by hand (result records, the local SLURM set-up) would otherwise show a
syntax error only when someone tries them. Two did not parse once: an apostrophe inside
`${1:?...}` opens a quote that never closes.
"""
import subprocess
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
SKIP = {".venv", ".git", "build", "node_modules"}


def shell_scripts(root=ROOT):
    return sorted(p for p in root.rglob("*.sh")
                  if not SKIP.intersection(p.relative_to(root).parts)
                  and not any(part.startswith(".") for part in p.relative_to(root).parts[:-1]))


def test_the_repo_has_scripts():
    names = {p.relative_to(ROOT).as_posix() for p in shell_scripts()}
    assert "slurm/local_cluster.sh" in names


@pytest.mark.parametrize("script", shell_scripts(), ids=lambda p: p.relative_to(ROOT).as_posix())
def test_bash_parses(script):
    res = subprocess.run(["bash", "-n", str(script)], capture_output=True, text=True)
    assert res.returncode == 0, f"{script.relative_to(ROOT)} does not parse:\n{res.stderr}"


def test_a_broken_script_is_caught(tmp_path):
    bad = tmp_path / "bad.sh"
    bad.write_text("#!/usr/bin/env bash\nOUT=${1:?the run's folder}\necho \"$OUT\"\n")
    assert bad in shell_scripts(tmp_path)
    assert subprocess.run(["bash", "-n", str(bad)], capture_output=True).returncode != 0
