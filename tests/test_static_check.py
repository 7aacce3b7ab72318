"""The static check (tools/static_check.py) and the GPU-only list (tools/gpu_only.py).

The check itself runs in ``make test`` beside pytest; here: it sorts mypy's errors into crash
kinds and others, maps the link tree's paths back to the checkout's, fails on a missing class
attribute (the bug that crashed FOLNet on CUDA: ``_BinaryBoolFn.ROWS_CUDA``), and the GPU-only
list still names real lines.
"""
import importlib.util
import subprocess
import sys
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[1]


def _load(name):
    spec = importlib.util.spec_from_file_location(name, REPO / "tools" / f"{name}.py")
    mod = importlib.util.module_from_spec(spec)
    sys.path.insert(0, str(REPO / "tools"))
    try:
        spec.loader.exec_module(mod)
    finally:
        sys.path.remove(str(REPO / "tools"))
    return mod


static_check = _load("static_check")
gpu_only = _load("gpu_only")


def test_crash_kinds():
    assert static_check.is_crash("attr-defined", '"type[_BinaryBoolFn]" has no attribute "ROWS_CUDA"')
    assert static_check.is_crash("name-defined", 'Name "SplitScore" is not defined')
    assert static_check.is_crash("call-arg", 'Too many arguments for "f"')
    assert static_check.is_crash("misc", '"None" not callable')
    assert not static_check.is_crash("union-attr", 'Item "None" of "Tensor | None" has no attribute "shape"')
    assert not static_check.is_crash("operator", '"Tensor" not callable')


def test_paths_map_back_to_the_checkout():
    assert static_check.repo_path(".mypy_tree/nesyseq/plugins/layers/folnet_layer.py") == "plugins/layers/folnet_layer.py"
    assert static_check.repo_path(".mypy_tree/nesyseq/cli/main.py") == "nesyseq/cli/main.py"
    assert static_check.repo_path("hydra_plugins/x.py") == "hydra_plugins/x.py"


def test_mypy_reports_a_missing_class_attribute(tmp_path):
    """mypy, with the check's flags, on the shape of the CUDA crash: a class attribute that does
    not exist, read in one arm of a conditional expression that the CPU never takes."""
    pytest.importorskip("mypy")
    src = tmp_path / "blocks.py"
    src.write_text("class Fn:\n    ROWS = 1 << 12\n\n\ndef step(on_gpu: bool) -> int:\n"
                   "    return Fn.ROWS_CUDA if on_gpu else Fn.ROWS\n")
    p = subprocess.run([sys.executable, "-m", "mypy", *static_check.MYPY_FLAGS, "--no-incremental", str(src)],
                       capture_output=True, text=True, cwd=str(tmp_path))
    errors = [static_check.LINE.match(line) for line in p.stdout.splitlines()]
    crash = [m for m in errors if m and static_check.is_crash(m["code"] or "misc", m["msg"])]
    assert p.returncode == 1 and len(crash) == 1, p.stdout + p.stderr
    assert crash[0]["line"] == "6" and "ROWS_CUDA" in crash[0]["msg"]


def test_gpu_only_entries_name_real_lines():
    for path, text, reason in gpu_only.GPU_ONLY:
        lines = [line for line in (REPO / path).read_text().splitlines() if text in line]
        assert lines, f"{path}: no line has {text!r} any more; update tools/gpu_only.py"
        assert all(gpu_only.DEVICE_LINE.search(line) for line in lines), (path, text)
        assert len(reason) > 20, (path, text)
        assert gpu_only.entry_for(path, lines[0])[1] == text
