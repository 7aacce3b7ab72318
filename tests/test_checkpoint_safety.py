"""Checkpoints load with torch's default weights_only=True, and only safely.

The end-to-end test (test_math_e2e.py) covers real checkpoints written by
fairseq-train and read by fairseq-generate and --restore-file; here we check
the allow-list itself and that a crafted pickle is refused.
"""
import argparse
import os
import pickle
import re
from pathlib import Path

import pytest
import torch

from nesyseq import plugins  # noqa: F401  (registers the safe globals)
from fairseq import checkpoint_utils
from nesyseq.plugins.checkpoint_safety import SAFE_GLOBALS

REPO = Path(__file__).resolve().parents[1]


class _Exploit:
    """Unpickling this runs ``touch <marker>``: what a malicious checkpoint would do."""

    def __init__(self, marker):
        self.marker = marker

    def __reduce__(self):
        return (os.system, (f"touch {self.marker}",))


def test_legacy_namespace_checkpoint_loads_with_weights_only(tmp_path):
    path = tmp_path / "legacy.pt"
    state = {"args": argparse.Namespace(arch="tp_transformer_tiny", lr=[0.1]),
             "model": {"w": torch.ones(2)}, "cfg": None}
    torch.save(state, path)
    loaded = torch.load(path)  # torch's default: weights_only=True
    assert loaded["args"].arch == "tp_transformer_tiny"
    assert torch.equal(loaded["model"]["w"], torch.ones(2))


def test_crafted_checkpoint_is_refused(tmp_path):
    marker = tmp_path / "pwned"
    path = tmp_path / "evil.pt"
    torch.save({"model": {}, "args": _Exploit(marker)}, path)
    with pytest.raises(pickle.UnpicklingError, match="system"):
        checkpoint_utils.load_checkpoint_to_cpu(str(path))
    with pytest.raises(pickle.UnpicklingError):
        torch.load(path)
    assert not marker.exists(), "the malicious payload ran"


def test_allow_list_is_exact():
    names = sorted(f"{g.__module__}.{g.__qualname__}" for g in SAFE_GLOBALS)
    assert names == ["argparse.Namespace"]
    assert all(g in torch.serialization.get_safe_globals() for g in SAFE_GLOBALS)


def test_nothing_turns_the_safe_loader_off():
    """No file sets the escape-hatch variable or turns weights_only off.
    (Removing the variable from a child's environment is fine.)"""
    var = "TORCH_FORCE_NO_WEIGHTS_ONLY" + "_LOAD"
    forbidden = [
        re.compile(var + r"""["']?\s*(\]\s*)?[=:]"""),  # X=1, environ["X"] = , {"X": ...}
        re.compile(r"setdefault\(\s*[\"']" + var),
        re.compile(r"weights_only\s*=\s*False"),
    ]
    assert forbidden[0].search(f'os.environ["{var}"] = "1"') and forbidden[0].search(f"export {var}=1")
    assert not forbidden[0].search(f'env.pop("{var}", None)')
    offenders = []
    for path in REPO.rglob("*"):
        if (not path.is_file() or ".venv" in path.parts or ".git" in path.parts
                or path.suffix not in {".py", ".sh", ".cfg", ".toml", ".yaml", ".md", ".txt", ""}):
            continue
        text = path.read_text(errors="ignore")
        offenders += [f"{path.relative_to(REPO)}: {f.pattern}" for f in forbidden if f.search(text)]
    assert not offenders, offenders
