"""Helpers for the FOLNet tests: tiny models built without a fairseq task."""
from __future__ import annotations

import argparse
from pathlib import Path

import pytest
import torch

from nesyseq import plugins  # noqa: F401  (registers the models)
from fairseq.data import Dictionary
from fairseq.models import ARCH_CONFIG_REGISTRY, ARCH_MODEL_REGISTRY

REPO = Path(__file__).resolve().parents[1]
USER_DIR = REPO / "user_dir"


def tiny_dictionary(n: int = 12) -> Dictionary:
    d = Dictionary()
    for i in range(n):
        d.add_symbol(chr(ord("a") + i))
    return d


class _Task:
    def __init__(self, d):
        self.source_dictionary = self.target_dictionary = d


def build(arch: str, dictionary=None, **overrides):
    """Build ``arch`` exactly as fairseq does from a Namespace (arch defaults, then dataclass)."""
    d = dictionary or tiny_dictionary()
    args = argparse.Namespace(**overrides)
    ARCH_CONFIG_REGISTRY[arch](args)
    model_cls = ARCH_MODEL_REGISTRY[arch]
    cfg = model_cls.__dataclass.from_namespace(args)
    model = model_cls.build_model(cfg, _Task(d))
    return model.double().eval(), d


def random_tokens(d, B, T, gen=None):
    return torch.randint(d.nspecial, len(d), (B, T), generator=gen)


@pytest.fixture(autouse=True, scope="module")
def single_thread():
    """Tiny models run ~100x faster single-threaded on a busy 2-core machine."""
    n = torch.get_num_threads()
    torch.set_num_threads(1)
    yield
    torch.set_num_threads(n)


def run_on_triton_interpreter(tmp_path, script_text: str, arg) -> None:
    """Run ``script_text`` as a script with ``TRITON_INTERPRET=1`` set before triton is imported
    and ``arg`` as its argument; it prints OK when its checks pass, or SKIP when the interpreter
    is not usable.  In this process when triton was already imported in interpreter mode here
    (the suite's workers, tests/test_trans_triton.py), else in a fresh one."""
    import contextlib
    import io
    import os
    import runpy
    import subprocess
    import sys

    pytest.importorskip("triton")
    script = tmp_path / "run.py"
    script.write_text(script_text)
    from nesyseq.triton_kernels import trans_triton as tt

    if "triton" in sys.modules and tt.interpreter_usable():
        out, argv, path = io.StringIO(), sys.argv, list(sys.path)
        sys.argv = [str(script), str(arg)]
        try:
            with contextlib.redirect_stdout(out):
                runpy.run_path(str(script), run_name="__main__")
        except SystemExit as e:
            assert e.code in (None, 0), f"{script} exited with {e.code!r}:\n{out.getvalue()[-3000:]}"
        finally:
            sys.argv, sys.path[:] = argv, path
        if "SKIP" in out.getvalue():
            pytest.skip("the Triton interpreter is not usable here")
        assert "OK" in out.getvalue(), out.getvalue()[-3000:]
        return
    env = dict(os.environ, TRITON_INTERPRET="1", OMP_NUM_THREADS="1")
    p = subprocess.run([sys.executable, str(script), str(arg)], cwd=tmp_path, env=env, capture_output=True,
                       text=True, timeout=900)
    assert p.returncode == 0, p.stdout[-3000:] + p.stderr[-5000:]
    if "SKIP" in p.stdout:
        pytest.skip("the Triton interpreter is not usable here")
    assert "OK" in p.stdout
